import { strict as assert } from 'node:assert';
import type { Disposable } from '../../src/core/events';
import { NegotiationError, type Speaker } from '../../src/core/policy/speaker';
import type { RoomDecision } from '../../src/core/room/model';
import type { RoomProposalInput, VoteInput } from '../../src/core/room/room';
import { CollectingSink, RouterHarness, ctx, json, settle } from '../support/routerHarness';

const OPERATOR: Speaker = { kind: 'operator', label: 'operator' };
const as = (agentId: string): Speaker => ({
  kind: 'agent',
  label: `agent:${agentId}`,
  mayActAs: (id) => id === agentId,
});
const PLAN = Buffer.from(JSON.stringify({ steps: ['design', 'build', 'test'] }));

function refusal(fn: () => unknown, kind: NegotiationError['kind'], code: string, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof NegotiationError, `a NegotiationError, not ${String(err)}`);
    assert.equal(err.kind, kind, err.message);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

describe('negotiation room (RFC §17.5)', function () {
  this.timeout(20_000);
  let h: RouterHarness;
  let sinks: Map<string, CollectingSink>;
  let operator: Disposable | undefined;

  beforeEach(() => {
    h = new RouterHarness();
    sinks = new Map();
    for (const id of ['prod', 'c1', 'c2', 'c3', 'other']) {
      h.register(id);
      sinks.set(id, h.stream(id).sink);
    }
    operator = h.coordinator.hitl.attachOperator('tester');
  });

  afterEach(() => {
    operator?.dispose();
    h.dispose();
  });

  const room = () => h.coordinator.room;

  function proposal(extra: Partial<RoomProposalInput> = {}): RoomProposalInput {
    return {
      artifactType: 'PLAN',
      artifactId: 'plan-1',
      producerId: 'prod',
      artifact: PLAN,
      contentType: 'application/json',
      requestedCritics: ['c1', 'c2'],
      roomId: 'room-1',
      createdAt: null,
      ...extra,
    };
  }

  function submit(extra: Partial<RoomProposalInput> = {}) {
    return room().submitProposal(proposal(extra), as('prod'), ctx('submit'));
  }

  function vote(criticId: string, score: number, confidence: number, extra: Partial<VoteInput> = {}) {
    return room().submitVote(
      {
        artifactId: 'plan-1',
        criticId,
        score,
        confidence,
        passed: true,
        strengths: [],
        weaknesses: [],
        recommendations: [],
        roomId: '',
        votedAt: null,
        ...extra,
      },
      as(criticId),
      ctx(`vote-${criticId}`),
    );
  }

  function decision(): RoomDecision {
    const d = room().getDecision('plan-1', '');
    assert.ok(d, 'a decision');
    return d;
  }

  const events = (type: string) => h.events(type).filter((e) => e.correlationId === 'room-1');

  describe('SubmitProposal', () => {
    it('stores revision 1 and notifies each requested critic by a NEGOTIATION envelope in the same transaction', () => {
      const result = submit();
      assert.deepEqual(result, { artifactId: 'plan-1', roomId: 'room-1', revision: 1 });
      for (const critic of ['c1', 'c2']) {
        const got = sinks.get(critic)!.ofType('NEGOTIATION');
        assert.equal(got.length, 1, `${critic} was notified`);
        const env = got[0].envelope;
        assert.equal(env.producerId, 'coordinator');
        assert.equal(env.correlationId, 'room-1');
        assert.equal(env.contentType, 'application/json');
        const body = json(env);
        assert.equal(body.kind, 'review_request');
        assert.equal(body.artifact_id, 'plan-1');
        assert.equal(body.negotiation_room_id, 'room-1');
        assert.equal(body.revision, 1);
        assert.equal(body.artifact_type, 'PLAN');
        assert.equal(body.producer_id, 'prod');
        assert.equal(body.critic_id, critic);
        assert.equal(body.ct, 'application/json');
        assert.deepEqual(Buffer.from(String(body.payload_b64), 'base64'), PLAN);
        assert.equal(typeof body.vote_deadline, 'string');
      }
      assert.equal(sinks.get('c3')!.ofType('NEGOTIATION').length, 0);
      const [event] = events('room.proposal_submitted');
      assert.equal(event.details.revision, 1);
      assert.deepEqual(event.details.requested_critics, ['c1', 'c2']);
      assert.equal((event.details.notified as unknown[]).length, 2);
      assert.equal(room().listArtifacts()[0].state, 'voting');
    });

    it('assigns artifact and room ids when they are empty', () => {
      const result = submit({ artifactId: '', roomId: '' });
      assert.match(result.artifactId, /^[0-9a-f-]{36}$/);
      assert.match(result.roomId, /^[0-9a-f-]{36}$/);
      assert.notEqual(result.artifactId, result.roomId);
    });

    it("refuses bad proposals with the spec's codes", () => {
      refusal(() => submit({ artifactType: '' }), 'invalid', 'VALIDATION_ERROR', /artifact_type/);
      refusal(() => submit({ requestedCritics: [] }), 'invalid', 'VALIDATION_ERROR', /at least one critic/);
      refusal(() => submit({ requestedCritics: ['c1', 'c1'] }), 'invalid', 'VALIDATION_ERROR', /twice/);
      refusal(() => submit({ requestedCritics: ['c1', 'prod'] }), 'invalid', 'VALIDATION_ERROR', /its own artifact/);
      refusal(() => submit({ requestedCritics: ['c1', 'nobody'] }), 'not_found', 'NOT_FOUND', /not a registered agent/);
      refusal(
        () => submit({ requestedCritics: Array.from({ length: 17 }, (_, i) => `c${i}`) }),
        'invalid',
        'VALIDATION_ERROR',
        /at most 16/,
      );
      refusal(() => submit({ artifact: Buffer.alloc(0) }), 'invalid', 'VALIDATION_ERROR', /empty/);
      refusal(
        () => submit({ artifact: Buffer.alloc(512 * 1024 + 1) }),
        'invalid',
        'VALIDATION_ERROR',
        /at most 524288/,
      );
      refusal(() => submit({ artifactId: 'x\u0000y' }), 'invalid', 'VALIDATION_ERROR', /control characters/);
      refusal(() => submit({ producerId: 'ghost' }), 'permission', 'PERMISSION_DENIED');
      // An agent credential may act only as its own agent; the operator may act for anyone.
      refusal(
        () => room().submitProposal(proposal(), as('c1'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /as producer 'prod'/,
      );
      refusal(
        () => room().submitProposal(proposal({ producerId: 'ghost' }), OPERATOR, ctx()),
        'not_found',
        'NOT_FOUND',
        /producer_id 'ghost'/,
      );
      assert.equal(room().listArtifacts().length, 0, 'nothing was stored');
      assert.equal(sinks.get('c1')!.ofType('NEGOTIATION').length, 0, 'nobody was notified');
      assert.deepEqual(room().submitProposal(proposal(), OPERATOR, ctx()), {
        artifactId: 'plan-1',
        roomId: 'room-1',
        revision: 1,
      });
    });

    it('a critic that does not accept application/json is refused (it could not be sent the artifact)', () => {
      h.register('picky', { modalitiesSupported: ['text/plain'] });
      refusal(
        () => submit({ requestedCritics: ['c1', 'picky'] }),
        'invalid',
        'VALIDATION_ERROR',
        /modalities_supported/,
      );
    });

    it('the same artifact again while voting is idempotent; a different one is refused until decided', () => {
      submit();
      assert.deepEqual(submit({ requestedCritics: ['c2', 'c1'] }), {
        artifactId: 'plan-1',
        roomId: 'room-1',
        revision: 1,
      });
      assert.equal(sinks.get('c1')!.ofType('NEGOTIATION').length, 1, 'not notified twice');
      assert.equal(events('room.proposal_submitted').length, 1);
      refusal(
        () => submit({ artifact: Buffer.from('{"steps":[]}') }),
        'precondition',
        'FAILED_PRECONDITION',
        /still being voted on/,
      );
      refusal(() => submit({ roomId: 'room-2' }), 'precondition', 'FAILED_PRECONDITION', /is in room 'room-1'/);
    });

    it('a retried SubmitProposal after the revision is decided answers the same revision and changes nothing', () => {
      submit();
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      assert.equal(decision().outcome, 'APPROVED');
      const before = h.events('room.proposal_submitted').length;
      assert.deepEqual(submit({ requestedCritics: ['c2', 'c1'] }), {
        artifactId: 'plan-1',
        roomId: 'room-1',
        revision: 1,
      });
      assert.equal(h.events('room.proposal_submitted').length, before, 'no new revision');
      assert.equal(sinks.get('c1')!.ofType('NEGOTIATION').length, 1, 'not notified again');
      // After REVISION_REQUESTED: the retry of revision 2 once it is decided too.
      submit({ artifactId: 'plan-2' });
      vote('c1', 3, 0.9, { artifactId: 'plan-2' });
      vote('c2', 3, 0.9, { artifactId: 'plan-2' });
      const v2 = Buffer.from('{"v":2}');
      assert.equal(submit({ artifactId: 'plan-2', artifact: v2 }).revision, 2);
      // Votes like those on revision 1, cast for revision 2 (voted_at after its submission): stored.
      const at = h.clock.now();
      vote('c1', 3, 0.9, { artifactId: 'plan-2', votedAt: at });
      vote('c2', 3, 0.9, { artifactId: 'plan-2', votedAt: at });
      assert.equal(room().getDecision('plan-2', '')?.outcome, 'REVISION_REQUESTED');
      assert.equal(
        submit({ artifactId: 'plan-2', artifact: v2 }).revision,
        2,
        'the retry of revision 2, not a revision 3',
      );
    });
  });

  describe('SubmitVote', () => {
    beforeEach(() => submit({ requestedCritics: ['c1', 'c2', 'c3'] }));

    it('only a requested critic of the current revision may vote; a credential may not lie about critic_id', () => {
      refusal(() => vote('other', 8, 0.9), 'permission', 'PERMISSION_DENIED', /not a requested critic/);
      refusal(
        () =>
          room().submitVote(
            {
              artifactId: 'plan-1',
              criticId: 'c1',
              score: 8,
              confidence: 0.9,
              passed: true,
              strengths: [],
              weaknesses: [],
              recommendations: [],
              roomId: '',
              votedAt: null,
            },
            as('other'),
            ctx(),
          ),
        'permission',
        'PERMISSION_DENIED',
        /may not vote as critic 'c1'/,
      );
      refusal(() => vote('c1', 8, 0.9, { artifactId: 'nope' }), 'not_found', 'NOT_FOUND');
      refusal(() => vote('c1', 8, 0.9, { roomId: 'room-2' }), 'not_found', 'NOT_FOUND');
      assert.equal(room().getVotes('plan-1', 'room-1').length, 0);
    });

    it('score 0–10 and confidence 0–1 (NaN refused)', () => {
      refusal(() => vote('c1', 10.5, 0.9), 'invalid', 'VALIDATION_ERROR', /score/);
      refusal(() => vote('c1', -1, 0.9), 'invalid', 'VALIDATION_ERROR', /score/);
      refusal(() => vote('c1', NaN, 0.9), 'invalid', 'VALIDATION_ERROR', /score/);
      refusal(() => vote('c1', 8, 1.01), 'invalid', 'VALIDATION_ERROR', /confidence/);
      refusal(() => vote('c1', 8, NaN), 'invalid', 'VALIDATION_ERROR', /confidence/);
      refusal(
        () => vote('c1', 8, 0.9, { strengths: Array.from({ length: 33 }, () => 'x') }),
        'invalid',
        'VALIDATION_ERROR',
        /at most 32/,
      );
      vote('c1', 0, 0);
      vote('c2', 10, 1);
      assert.equal(room().getVotes('plan-1', '').length, 2);
    });

    it("a re-vote replaces the critic's vote and is logged; a repeated identical vote changes nothing", () => {
      vote('c1', 5, 0.9);
      vote('c1', 5, 0.9);
      assert.equal(events('room.vote').length, 1);
      assert.equal(events('room.vote_replaced').length, 0);
      vote('c1', 8, 0.8, { strengths: ['clear'] });
      const votes = room().getVotes('plan-1', '');
      assert.equal(votes.length, 1);
      assert.deepEqual(
        [votes[0].score, votes[0].confidence, votes[0].replaced, votes[0].strengths],
        [8, 0.8, 1, ['clear']],
      );
      const [replaced] = events('room.vote_replaced');
      const previous = replaced.details.previous as Record<string, unknown>;
      assert.deepEqual([previous.score, previous.confidence, previous.passed], [5, 0.9, true]);
      assert.equal(replaced.details.score, 8);
      assert.equal(room().getDecision('plan-1', ''), undefined, 'still voting');
    });

    it('a retried deciding vote is answered OK and changes nothing once the revision is decided or escalated', () => {
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      vote('c3', 8, 0.9, { strengths: ['ok'] });
      assert.equal(decision().outcome, 'APPROVED');
      const counts = () =>
        ['room.vote', 'room.vote_replaced', 'room.decided', 'room.escalated'].map((t) => events(t).length);
      const before = counts();
      assert.deepEqual(vote('c3', 8, 0.9, { strengths: ['ok'] }), { artifactId: 'plan-1', criticId: 'c3' });
      assert.deepEqual(counts(), before, 'nothing recorded');
      refusal(() => vote('c3', 7, 0.9), 'precondition', 'FAILED_PRECONDITION', /votes are closed/);
    });

    it("a vote counts for the revision current when it arrives: a retry of the previous revision's vote changes nothing, a vote cast before this revision is refused", () => {
      // Revision 1 (c1, c2, c3) is decided REVISION_REQUESTED; the producer resubmits at once.
      vote('c1', 3, 0.9);
      vote('c2', 3, 0.9);
      vote('c3', 3, 0.9);
      assert.equal(decision().outcome, 'REVISION_REQUESTED');
      h.clock.advance(1_000);
      assert.equal(submit({ requestedCritics: ['c1', 'c2', 'c3'], artifact: Buffer.from('{"v":2}') }).revision, 2);
      // c3's revision-1 vote is retried (its answer was lost): OK, not stored on revision 2.
      assert.deepEqual(vote('c3', 3, 0.9), { artifactId: 'plan-1', criticId: 'c3' });
      assert.equal(room().getVotes('plan-1', '').length, 0, 'not counted for revision 2');
      // A late vote stamped before revision 2 was submitted: refused, naming why.
      const r2 = room().artifactDetail('plan-1')!.proposal.submittedAt;
      refusal(
        () => vote('c2', 4, 0.9, { votedAt: r2 - 500 }),
        'precondition',
        'FAILED_PRECONDITION',
        /earlier revision/,
      );
      assert.equal(room().getVotes('plan-1', '').length, 0);
      vote('c2', 9, 0.9, { votedAt: r2 + 10 });
      assert.equal(room().getVotes('plan-1', '').length, 1);
    });
  });

  describe('decisions', () => {
    const two = () => submit();

    it('every critic voted and all four thresholds hold: APPROVED, with votes, aggregate, checks, policy version, rationale', () => {
      two();
      vote('c1', 8, 0.9);
      assert.equal(room().getDecision('plan-1', ''), undefined);
      vote('c2', 9, 0.8);
      const d = decision();
      assert.equal(d.outcome, 'APPROVED');
      assert.equal(d.final, true);
      assert.equal(d.decidedBy, 'policy');
      assert.deepEqual(
        d.votes.map((v) => v.criticId),
        ['c1', 'c2'],
      );
      // weighted mean (8·0.9 + 9·0.8) / 1.7 = 14.4 / 1.7 = 8.4706; std dev 0.5
      assert.equal(d.aggregate.weightedMean.toFixed(4), '8.4706');
      assert.equal(d.aggregate.stdDev, 0.5);
      assert.ok(d.checks.every((c) => c.pass));
      assert.equal(d.policyVersion, `v${h.coordinator.policies.current().version}`);
      assert.match(d.reason, /Approved by policy/);
      const [event] = events('room.decided');
      assert.equal(event.details.outcome, 'APPROVED');
      assert.equal(room().listArtifacts()[0].state, 'decided');
      refusal(() => vote('c1', 2, 0.9), 'precondition', 'FAILED_PRECONDITION', /decided \(APPROVED\)/);
      refusal(() => submit({ artifact: Buffer.from('{}') }), 'precondition', 'FAILED_PRECONDITION', /approved/);
    });

    // Each condition failing alone, no escalation condition holding: REVISION_REQUESTED naming that check.
    const alone: Array<[string, Array<[string, number, number, boolean]>]> = [
      // weighted mean 6 < 7; confidence 0.9; pass 1; std dev 0
      [
        'min_score_threshold',
        [
          ['c1', 6, 0.9, true],
          ['c2', 6, 0.9, true],
        ],
      ],
      // mean confidence 0.5 < 0.7 (each ≥ 0.3)
      [
        'min_confidence_threshold',
        [
          ['c1', 8, 0.5, true],
          ['c2', 8, 0.5, true],
        ],
      ],
      // pass ratio 1/2 < 0.8
      [
        'min_pass_ratio',
        [
          ['c1', 8, 0.9, true],
          ['c2', 8, 0.9, false],
        ],
      ],
      // scores 10 and 5: std dev 2.5 > 2 (not > 3); weighted mean 7.5
      [
        'max_std_dev',
        [
          ['c1', 10, 0.9, true],
          ['c2', 5, 0.9, true],
        ],
      ],
    ];
    for (const [name, votes] of alone) {
      it(`${name} failing alone: REVISION_REQUESTED`, () => {
        two();
        for (const [critic, score, confidence, passed] of votes) vote(critic, score, confidence, { passed });
        const d = decision();
        assert.equal(d.outcome, 'REVISION_REQUESTED');
        assert.deepEqual(
          d.checks.filter((c) => !c.pass).map((c) => c.name),
          [name],
        );
        assert.deepEqual(d.escalation, []);
        assert.match(d.reason, new RegExp(`${name} [\\d.]+ [<>] [\\d.]+ \\(failed\\)`));
      });
    }

    const escalations: Array<[string, () => void]> = [
      [
        'low_confidence',
        () => {
          vote('c1', 8, 0.9);
          vote('c2', 8, 0.29);
        },
      ],
      [
        'disagreement',
        () => {
          vote('c1', 10, 0.9);
          vote('c2', 2, 0.9);
        },
      ],
      [
        'critic_requested',
        () => {
          vote('c1', 9, 0.9);
          vote('c2', 9, 0.9, { recommendations: ['Escalate: a person must sign off the budget'] });
        },
      ],
      [
        'vote_timeout',
        () => {
          vote('c1', 9, 0.9);
          h.clock.advance(15 * 60_000);
        },
      ],
    ];
    for (const [name, act] of escalations) {
      it(`${name} alone: ESCALATED_TO_HITL with a DEBATE_DEADLOCK invocation`, async () => {
        two();
        act();
        await settle();
        const d = decision();
        assert.equal(d.outcome, 'ESCALATED_TO_HITL');
        assert.equal(d.final, false);
        assert.equal(d.escalation.length, 1);
        assert.match(d.escalation[0], new RegExp(`^${name}:`));
        const invocation = h.coordinator.hitl.get(d.hitl!.invocationId)!;
        assert.equal(invocation.reasonType, 'DEBATE_DEADLOCK');
        assert.equal(invocation.state, 'pending');
        assert.deepEqual(invocation.proposedActions, ['approve', 'modify', 'deny']);
        assert.equal(invocation.correlationId, 'room-1');
        assert.deepEqual(invocation.origin, { kind: 'internal', component: 'room' });
        const facts = invocation.context.facts;
        assert.equal(facts.artifact_id, 'plan-1');
        assert.equal(facts.negotiation_room_id, 'room-1');
        assert.equal(facts.revision, 1);
        assert.deepEqual(facts.escalation_reasons, d.escalation);
        assert.equal((facts.thresholds as Record<string, unknown>).min_score_threshold, 7);
        assert.equal(events('room.escalated').length, 1);
        assert.equal(room().listArtifacts()[0].state, 'escalated');
        refusal(() => vote('c1', 1, 0.9), 'precondition', 'FAILED_PRECONDITION', /escalated/);
        if (name === 'vote_timeout') assert.deepEqual(facts.missing_critics, ['c2']);
      });
    }

    function escalate(): string {
      two();
      vote('c1', 10, 0.9);
      vote('c2', 2, 0.9);
      return decision().hitl!.invocationId;
    }

    it('a person approves: APPROVED, decided by hitl', async () => {
      escalate();
      const waited = room().waitForDecision('plan-1', '', 0);
      assert.deepEqual(
        room().hitlAction('room-1', 'approve', 'The spread is fine: c2 misread the scope.', OPERATOR, ctx()),
        {
          ok: true,
          reason: "artifact 'plan-1' revision 1: APPROVED",
        },
      );
      const d = await waited;
      assert.equal(d.outcome, 'APPROVED');
      assert.equal(d.decidedBy, 'hitl');
      assert.equal(d.closed, false);
      assert.equal(d.hitl?.action, 'approve');
      assert.equal(d.hitl?.origin, 'human');
      assert.match(d.reason, /a person\): approved — The spread is fine/);
      assert.deepEqual(decision(), d);
    });

    it('approve through hitlAction reaches a waiting producer', async () => {
      escalate();
      const waited = room().waitForDecision('plan-1', 'room-1', 0);
      room().hitlAction('plan-1', 'approve', 'ok', OPERATOR, ctx());
      assert.equal((await waited).outcome, 'APPROVED');
    });

    it('modify (Request Revision): REVISION_REQUESTED, and the producer may submit revision 2', async () => {
      const id = escalate();
      h.coordinator.hitl.decide(
        id,
        { action: 'modify', rationale: 'Split step 2.', payload: { request: 'revision' } },
        'editor:alice',
        ctx(),
      );
      await settle();
      const d = decision();
      assert.deepEqual([d.outcome, d.decidedBy, d.closed], ['REVISION_REQUESTED', 'hitl', false]);
      const next = submit({ artifact: Buffer.from('{"steps":["design","build part 1","build part 2","test"]}') });
      assert.equal(next.revision, 2);
      assert.equal(sinks.get('c1')!.ofType('NEGOTIATION').length, 2);
      assert.equal(json(sinks.get('c1')!.ofType('NEGOTIATION')[1].envelope).revision, 2);
      assert.equal(room().getDecision('plan-1', ''), undefined, 'revision 2 is voting');
      assert.equal(room().getVotes('plan-1', '').length, 0, "revision 1's votes do not count");
      const detail = room().artifactDetail('plan-1')!;
      assert.equal(detail.previous?.revision, 1);
      assert.equal(detail.proposal.revision, 2);
    });

    it('deny (Reject): REVISION_REQUESTED and closed; no further revision is accepted', async () => {
      escalate();
      refusal(
        () => room().hitlAction('room-1', 'deny', '  ', OPERATOR, ctx()),
        'invalid',
        'VALIDATION_ERROR',
        /rationale is required/,
      );
      refusal(
        () => room().hitlAction('room-1', 'approve', 'mine', as('prod'), ctx()),
        'permission',
        'PERMISSION_DENIED',
      );
      refusal(() => room().hitlAction('room-1', 'maybe', 'x', OPERATOR, ctx()), 'invalid', 'VALIDATION_ERROR');
      refusal(() => room().hitlAction('room-9', 'deny', 'x', OPERATOR, ctx()), 'not_found', 'NOT_FOUND');
      room().hitlAction('room-1', 'deny', 'Wrong approach entirely.', OPERATOR, ctx());
      const d = decision();
      assert.deepEqual([d.outcome, d.decidedBy, d.closed], ['REVISION_REQUESTED', 'hitl', true]);
      assert.match(d.reason, /rejected: no further revision/);
      refusal(
        () => submit({ artifact: Buffer.from('{}') }),
        'precondition',
        'FAILED_PRECONDITION',
        /rejected by a person/,
      );
      assert.deepEqual(room().hitlAction('room-1', 'approve', 'late', OPERATOR, ctx()).ok, false);
    });

    it("an operator's HITL auto rule decides at once: decided by policy (the rule), not a person", () => {
      h.coordinator.hitl.setPolicy({
        ...h.coordinator.hitl.policy,
        rules: [{ name: 'trust-prod', reasonType: 'DEBATE_DEADLOCK', agent: 'prod', subject: '**', action: 'approve' }],
      });
      escalate();
      const d = decision();
      assert.deepEqual([d.outcome, d.decidedBy, d.final, d.hitl?.origin], ['APPROVED', 'policy', true, 'rule']);
      assert.match(d.reason, /the HITL auto rule 'trust-prod'/);
      assert.deepEqual(h.events('room.escalated').length, 1);
    });

    it('two escalations in one room: HitlAction by room id asks for the artifact id', () => {
      escalate();
      room().submitProposal(proposal({ artifactId: 'plan-2' }), as('prod'), ctx());
      vote('c1', 10, 0.9, { artifactId: 'plan-2' });
      vote('c2', 1, 0.9, { artifactId: 'plan-2' });
      const answer = room().hitlAction('room-1', 'approve', 'ok', OPERATOR, ctx());
      assert.equal(answer.ok, false);
      assert.match(
        answer.reason,
        /^FAILED_PRECONDITION: room 'room-1' has 2 escalations waiting \(plan-1, plan-2\); name the artifact_id/,
      );
      assert.equal(room().hitlAction('plan-2', 'approve', 'ok', OPERATOR, ctx()).ok, true);
      assert.equal(room().getDecision('plan-2', '')?.outcome, 'APPROVED');
      assert.equal(decision().outcome, 'ESCALATED_TO_HITL');
    });

    it('no human available (RFC §15.4): the fallback decides, recorded as a fallback, never as a person', async () => {
      operator?.dispose();
      operator = undefined;
      escalate();
      h.clock.advance(5_000);
      await settle();
      const d = decision();
      assert.equal(d.outcome, 'REVISION_REQUESTED');
      assert.equal(d.decidedBy, 'fallback');
      assert.equal(d.closed, false, 'a fallback deny does not close the artifact');
      assert.equal(d.hitl?.origin, 'fallback');
      assert.equal(d.hitl?.fallbackPolicy, 'DENY_BY_DEFAULT');
      assert.equal(d.hitl?.trigger, 'hitl_unavailable');
      assert.match(d.reason, /fallback DENY_BY_DEFAULT \(no human was available\), not a person/);
      assert.equal(events('room.decided')[0].level, 'WARN');
      assert.equal(submit({ artifact: Buffer.from('{"v":2}') }).revision, 2);
    });

    it('an escalation that cannot be opened (BUFFER_FULL) is decided by the DEBATE_DEADLOCK fallback policy, recorded as a fallback', () => {
      h.coordinator.hitl.setPolicy({ ...h.coordinator.hitl.policy, maxPendingPerRequester: 0 });
      two();
      vote('c1', 10, 0.9);
      vote('c2', 2, 0.9);
      const d = decision();
      assert.deepEqual([d.outcome, d.decidedBy, d.final, d.closed], ['REVISION_REQUESTED', 'fallback', true, false]);
      assert.match(
        d.reason,
        /could not be opened \(BUFFER_FULL: prod already has 0 pending HITL invocations.*the HITL fallback DENY_BY_DEFAULT.*No person decided/,
      );
      const [failed] = events('room.escalation_failed');
      assert.equal(failed.details.fallback_policy, 'DENY_BY_DEFAULT');
      // AUTO_DECIDE_THRESHOLD approves a high weighted mean (0.9 ≥ 0.8) when no person can be asked.
      const fallbacks = {
        ...h.coordinator.hitl.policy.fallbacks,
        DEBATE_DEADLOCK: { policy: 'AUTO_DECIDE_THRESHOLD' as const, threshold: 0.8, extendMs: 0, maxExtensions: 0 },
      };
      h.coordinator.hitl.setPolicy({ ...h.coordinator.hitl.policy, fallbacks });
      submit({ artifactId: 'plan-2' });
      vote('c1', 9, 0.9, { artifactId: 'plan-2' });
      vote('c2', 9, 0.9, { artifactId: 'plan-2', recommendations: ['Please escalate to a human'] });
      const d2 = room().getDecision('plan-2', '')!;
      assert.deepEqual([d2.outcome, d2.decidedBy], ['APPROVED', 'fallback']);
      assert.match(d2.reason, /AUTO_DECIDE_THRESHOLD/);
    });

    it('an unexpected error while escalating is not swallowed: the deciding vote is rolled back', () => {
      two();
      vote('c1', 10, 0.9);
      const hitl = h.coordinator.hitl;
      const open = hitl.open.bind(hitl);
      hitl.open = () => {
        throw new Error('disk on fire');
      };
      try {
        assert.throws(() => vote('c2', 2, 0.9), /disk on fire/);
      } finally {
        hitl.open = open;
      }
      assert.equal(room().getVotes('plan-1', '').length, 1, 'the deciding vote was not kept');
      assert.equal(room().getDecision('plan-1', ''), undefined);
      assert.equal(events('room.escalation_failed').length, 0);
      vote('c2', 2, 0.9);
      assert.equal(decision().outcome, 'ESCALATED_TO_HITL');
    });

    it('auto-approval off: thresholds that all hold go to a person', () => {
      h.coordinator.policies.applySettings({ room: { autoApprove: false } }, ctx());
      two();
      vote('c1', 9, 0.9);
      vote('c2', 9, 0.9);
      const d = decision();
      assert.equal(d.outcome, 'ESCALATED_TO_HITL');
      assert.match(d.escalation[0], /^approval_required/);
      assert.equal(d.policyVersion, `v${h.coordinator.policies.current().version}`);
    });

    it('a revision is decided under the policy version recorded at its submission (thresholds, timeout, version)', () => {
      const v1 = h.coordinator.policies.current().version;
      two();
      h.coordinator.policies.applySettings({ room: { minScoreThreshold: 9, voteTimeoutMs: 60_000 } }, ctx());
      assert.equal(h.coordinator.policies.current().version, v1 + 1);
      assert.equal(
        room().artifactDetail('plan-1')!.thresholds.minScoreThreshold,
        7,
        'the editor shows the thresholds it is decided by',
      );
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      const d = decision();
      assert.equal(d.outcome, 'APPROVED', 'min_score_threshold 7 of the submitted version, not 9');
      assert.equal(d.policyVersion, `v${v1}`);
      assert.equal(d.checks[0].threshold, 7);
    });

    it('configured thresholds apply (min_score_threshold 9)', () => {
      h.coordinator.policies.applySettings({ room: { minScoreThreshold: 9 } }, ctx());
      two();
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      assert.equal(decision().outcome, 'REVISION_REQUESTED');
      assert.equal(decision().checks[0].threshold, 9);
    });
  });

  describe('reading the votes', () => {
    it('GetVotes: the producer and the operator; a requested critic only once the revision is decided; nobody else', () => {
      submit();
      vote('c1', 10, 0.9);
      assert.equal(room().getVotes('plan-1', '', as('prod')).length, 1);
      assert.equal(room().getVotes('plan-1', '', OPERATOR).length, 1);
      const unauthenticated: Speaker = { kind: 'agent', label: 'unauthenticated', mayActAs: () => true };
      assert.equal(room().getVotes('plan-1', '', unauthenticated).length, 1, 'auth none: may act as anyone');
      refusal(
        () => room().getVotes('plan-1', '', as('c2')),
        'permission',
        'PERMISSION_DENIED',
        /before the revision is decided/,
      );
      refusal(
        () => room().getVotes('plan-1', '', as('c1')),
        'permission',
        'PERMISSION_DENIED',
        /before the revision is decided/,
      );
      refusal(() => room().getVotes('plan-1', '', as('other')), 'permission', 'PERMISSION_DENIED', /only the producer/);
      // Escalated: still not decided; GetDecision answers the escalation without the votes to a critic.
      vote('c2', 2, 0.9);
      assert.equal(decision().outcome, 'ESCALATED_TO_HITL');
      refusal(() => room().getVotes('plan-1', '', as('c2')), 'permission', 'PERMISSION_DENIED');
      const seen = room().getDecision('plan-1', '', as('c2'))!;
      assert.deepEqual([seen.outcome, seen.votes.length], ['ESCALATED_TO_HITL', 0]);
      assert.equal(room().getDecision('plan-1', '', as('prod'))!.votes.length, 2);
      assert.equal(room().getDecision('plan-1', '', as('other'))!.votes.length, 0);
      room().hitlAction('room-1', 'approve', 'fine', OPERATOR, ctx());
      assert.equal(
        room().getVotes('plan-1', '', as('c2')).length,
        2,
        "decided: the critics may read each other's votes",
      );
      assert.equal(room().getDecision('plan-1', '', as('c1'))!.votes.length, 2);
      refusal(() => room().getVotes('plan-1', '', as('other')), 'permission', 'PERMISSION_DENIED');
    });
  });

  describe('WaitForDecision', () => {
    it('resolves when the last critic votes; at once when decided', async () => {
      submit();
      const waited = room().waitForDecision('plan-1', 'room-1', 0);
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      assert.equal((await waited).outcome, 'APPROVED');
      assert.equal((await room().waitForDecision('plan-1', '', 0)).outcome, 'APPROVED');
    });

    it('keeps waiting while escalated; DEADLINE_EXCEEDED after its timeout on the clock (default 300 s)', async () => {
      submit();
      const short = room().waitForDecision('plan-1', '', 2_000);
      const long = room().waitForDecision('plan-1', '', 0);
      vote('c1', 10, 0.9);
      vote('c2', 1, 0.9);
      h.clock.advance(2_000);
      await assert.rejects(
        short,
        (err: unknown) =>
          err instanceof NegotiationError && err.kind === 'deadline' && err.code === 'DEADLINE_EXCEEDED',
      );
      let settledLong = false;
      void long.then(
        () => {
          settledLong = true;
        },
        () => {
          settledLong = true;
        },
      );
      h.clock.advance(297_000);
      await settle();
      assert.equal(settledLong, false, 'still waiting before 300 s');
      h.clock.advance(1_000);
      await assert.rejects(long, (err: unknown) => err instanceof NegotiationError && err.kind === 'deadline');
    });

    it('unknown artifact: NOT_FOUND; a cancelled wait ends', async () => {
      await assert.rejects(
        room().waitForDecision('nope', '', 0),
        (err: unknown) => err instanceof NegotiationError && err.kind === 'not_found',
      );
      submit();
      const aborter = new AbortController();
      const waited = room().waitForDecision('plan-1', '', 0, aborter.signal);
      assert.equal(room().waiterCount('plan-1'), 1);
      aborter.abort();
      await assert.rejects(waited, (err: unknown) => err instanceof NegotiationError && err.code === 'CANCELLED');
      assert.equal(room().waiterCount('plan-1'), 0, 'the waiter is gone');
    });

    it('at most 64 waits per artifact: one more is refused RESOURCE_EXHAUSTED (BUFFER_FULL); a freed place is usable again', async () => {
      submit();
      const aborters = Array.from({ length: 64 }, () => new AbortController());
      const waits = aborters.map((a) => room().waitForDecision('plan-1', '', 0, a.signal));
      assert.equal(room().waiterCount('plan-1'), 64);
      await assert.rejects(
        room().waitForDecision('plan-1', '', 0),
        (err: unknown) =>
          err instanceof NegotiationError &&
          err.kind === 'exhausted' &&
          err.code === 'BUFFER_FULL' &&
          /at most 64/.test(err.message),
      );
      aborters[0].abort();
      await assert.rejects(waits[0], (err: unknown) => err instanceof NegotiationError && err.code === 'CANCELLED');
      const again = room().waitForDecision('plan-1', '', 0);
      vote('c1', 8, 0.9);
      vote('c2', 8, 0.9);
      assert.equal((await again).outcome, 'APPROVED');
      for (const w of waits.slice(1)) assert.equal((await w).outcome, 'APPROVED');
      assert.equal(room().waiterCount('plan-1'), 0);
    });
  });

  describe('restart', () => {
    it('mid-vote: votes survive, the last vote after the restart decides, a waiter of the old coordinator is told to call again', async () => {
      submit();
      vote('c1', 8, 0.9);
      const old = room().waitForDecision('plan-1', '', 0);
      operator?.dispose();
      operator = undefined;
      h.restart();
      await assert.rejects(old, (err: unknown) => err instanceof NegotiationError && err.kind === 'unavailable');
      operator = h.coordinator.hitl.attachOperator('tester');
      assert.equal(room().getVotes('plan-1', 'room-1').length, 1);
      const waited = room().waitForDecision('plan-1', '', 0);
      vote('c2', 8, 0.9);
      assert.equal((await waited).outcome, 'APPROVED');
      assert.equal((await room().waitForDecision('plan-1', '', 0)).outcome, 'APPROVED');
    });

    it('a vote deadline that passed while the coordinator was stopped escalates at start', async () => {
      submit();
      vote('c1', 8, 0.9);
      operator?.dispose();
      operator = undefined;
      h.restart(() => h.clock.advance(16 * 60_000));
      // restore() ran at start, the clock already past the deadline: no further time passes.
      const d = decision();
      assert.equal(d.outcome, 'ESCALATED_TO_HITL');
      assert.match(d.escalation[0], /^vote_timeout/);
      assert.equal(events('room.vote_timeout').length, 1);
    });

    it('the vote timer is re-armed after a restart', async () => {
      submit();
      vote('c1', 8, 0.9);
      h.restart();
      operator = h.coordinator.hitl.attachOperator('tester');
      h.clock.advance(14 * 60_000);
      assert.equal(room().getDecision('plan-1', ''), undefined);
      h.clock.advance(60_000);
      assert.equal(decision().outcome, 'ESCALATED_TO_HITL');
      assert.match(decision().escalation[0], /^vote_timeout/);
    });

    it('an escalation decided but not applied before the stop is applied by restore()', async () => {
      submit();
      vote('c1', 10, 0.9);
      vote('c2', 1, 0.9);
      const id = decision().hitl!.invocationId;
      // Decided, then the coordinator stops before the room's settle handler (a microtask) runs.
      h.coordinator.hitl.decide(id, { action: 'approve', rationale: 'fine' }, 'editor:alice', ctx());
      operator?.dispose();
      operator = undefined;
      h.restart();
      const d = decision();
      assert.deepEqual([d.outcome, d.decidedBy, d.hitl?.by], ['APPROVED', 'hitl', 'editor:alice']);
      await settle();
      assert.equal(h.events('room.decided').length, 1, 'applied once');
    });

    it('an escalation pending across a restart is applied when a person decides afterwards', async () => {
      submit();
      vote('c1', 10, 0.9);
      vote('c2', 1, 0.9);
      h.restart();
      operator = h.coordinator.hitl.attachOperator('tester');
      const waited = room().waitForDecision('plan-1', '', 0);
      room().hitlAction('room-1', 'modify', 'Narrow the scope.', OPERATOR, ctx());
      assert.equal((await waited).outcome, 'REVISION_REQUESTED');
    });
  });

  it('the HITL context stays bounded (UTF-8 JSON bytes) with 16 critics of long votes on the escalated revision, and carries the diff', () => {
    const critics = Array.from({ length: 16 }, (_, i) => `k${i}`);
    for (const id of critics) h.register(id);
    submit({ requestedCritics: critics, artifact: Buffer.from('step one\nstep two\n') });
    critics.forEach((c, i) => vote(c, i % 2 === 0 ? 8 : 5, 0.9));
    assert.equal(decision().outcome, 'REVISION_REQUESTED');
    submit({ requestedCritics: critics, artifact: Buffer.from('step one\nstep two\nstep three\n') });
    // The longest texts a vote may carry, each control character escaped to 6 bytes of JSON: on the escalated revision.
    const long = (i: number) => `${'\u0001'.repeat(990)} ${i}`;
    const lists = Array.from({ length: 32 }, (_, i) => long(i));
    critics.forEach((c) =>
      vote(c, 9, 0.9, {
        strengths: lists,
        weaknesses: lists,
        recommendations: c === 'k3' ? ['escalate: the budget needs a person', ...lists.slice(1)] : lists,
      }),
    );
    const d = decision();
    assert.equal(d.outcome, 'ESCALATED_TO_HITL');
    const invocation = h.coordinator.hitl.get(d.hitl!.invocationId)!;
    const size = Buffer.byteLength(JSON.stringify(invocation.context));
    assert.ok(size <= 256 * 1024, `the context is ${size} bytes`);
    assert.equal(invocation.context.facts.context_trimmed, true);
    const votes = invocation.context.facts.votes as Array<Record<string, unknown>>;
    assert.equal(votes.length, 16, 'every vote is there (its texts cut)');
    assert.deepEqual(JSON.parse(JSON.stringify(invocation.context.diffs)), [
      { title: 'plan-1: revision 1 → 2', before: 'step one\nstep two\n', after: 'step one\nstep two\nstep three\n' },
    ]);
    assert.equal(invocation.context.facts.artifact_excerpt, 'step one\nstep two\nstep three\n');
  });

  it('a critic whose inbox is full: the proposal stands when another was notified, is refused when none was', () => {
    h.dispose();
    h = new RouterHarness({ capacity: 1 });
    for (const id of ['prod', 'c1', 'c2', 'c3']) {
      h.register(id);
      h.stream(id);
    }
    operator = h.coordinator.hitl.attachOperator('tester');
    // c1's inbox now holds one message not READ: its capacity.
    submit({ artifactId: 'a', requestedCritics: ['c1'] });
    refusal(
      () => submit({ artifactId: 'b', requestedCritics: ['c1'] }),
      'exhausted',
      'BUFFER_FULL',
      /no requested critic could be notified/,
    );
    assert.equal(room().artifactDetail('b'), undefined, 'nothing kept');
    submit({ artifactId: 'c', requestedCritics: ['c1', 'c2'] });
    assert.equal(room().artifactDetail('c')?.proposal.state, 'voting');
    const [warn] = h.events('room.critic_not_notified');
    assert.deepEqual(
      [warn.details.artifact_id, warn.details.critic_id, warn.details.code, warn.level],
      ['c', 'c1', 'BUFFER_FULL', 'WARN'],
    );
  });

  it('listArtifacts and artifactDetail show what the editor renders', () => {
    submit();
    vote('c1', 8, 0.9, { strengths: ['<b>clear</b>'] });
    const [row] = room().listArtifacts();
    assert.deepEqual(
      { ...row, updatedAt: 0 },
      {
        roomId: 'room-1',
        artifactId: 'plan-1',
        revision: 1,
        artifactType: 'PLAN',
        producerId: 'prod',
        state: 'voting',
        votes: 1,
        requested: 2,
        outcome: null,
        invocationId: null,
        updatedAt: 0,
      },
    );
    const detail = room().artifactDetail('plan-1')!;
    assert.deepEqual(detail.proposal.artifact, PLAN);
    assert.equal(detail.previous, undefined);
    assert.deepEqual(detail.votes[0].strengths, ['<b>clear</b>']);
    assert.equal(detail.aggregate?.voteCount, 1);
    assert.equal(detail.thresholds.minScoreThreshold, 7);
    assert.equal(detail.decision, null);
    assert.equal(room().artifactDetail('nope'), undefined);
  });

  it('onDidChange fires after each change', () => {
    const seen: string[] = [];
    room().onDidChange((c) => seen.push(`${c.artifactId}:${c.state}`));
    submit();
    vote('c1', 8, 0.9);
    vote('c2', 8, 0.9);
    assert.deepEqual(seen, ['plan-1:voting', 'plan-1:voting', 'plan-1:decided']);
  });
});
