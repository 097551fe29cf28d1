import { strict as assert } from 'node:assert';
import type { HitlDecision, HitlInvocation } from '../../src/core/hitl/model';
import { DEFAULT_ROOM_THRESHOLDS } from '../../src/core/policy/defaults';
import { verdict } from '../../src/core/room/aggregate';
import type { ProposalRecord, RoomDecision, VoteRecord } from '../../src/core/room/model';
import {
  allVoted,
  artifactOfKey,
  decided,
  decisionOf,
  escalated,
  hitlDecision,
  missingCritics,
  newRevision,
  newVote,
  policyVersionOf,
  repeatsRevision,
  revisionKey,
  revisionRefusal,
  sameVote,
  touched,
  type RevisionInput,
  type VoteContent,
} from '../../src/core/room/state';

/** The room's pure state part (src/core/room/state.ts): no store, no clock, no log. */

const T0 = Date.UTC(2026, 0, 1);
const PLAN = Buffer.from('{"steps":["design","build"]}');

const input: RevisionInput = {
  roomId: 'room-1',
  artifactId: 'plan-1',
  artifactType: 'PLAN',
  producerId: 'prod',
  contentType: 'application/json',
  artifact: PLAN,
  requestedCritics: ['c1', 'c2'],
  createdAt: null,
};

function revision(extra: Partial<ProposalRecord> = {}): ProposalRecord {
  return { ...newRevision(input, undefined, { version: 3, voteTimeoutMs: 60_000 }, T0), ...extra };
}

const content = (extra: Partial<VoteContent> = {}): VoteContent => ({
  score: 8,
  confidence: 0.9,
  passed: true,
  strengths: ['clear'],
  weaknesses: [],
  recommendations: [],
  ...extra,
});

function vote(criticId: string, extra: Partial<VoteContent> = {}): VoteRecord {
  return newVote(revision(), criticId, content(extra), null, undefined, T0 + 1);
}

function invocation(
  decision: HitlDecision | null,
  state: HitlInvocation['state'] = 'decided',
): Pick<HitlInvocation, 'id' | 'state' | 'decision'> {
  return { id: 'inv-1', state, decision };
}

function by(
  kind: HitlDecision['origin']['kind'],
  action: HitlDecision['action'],
  extra: Partial<HitlDecision['origin']> = {},
): HitlDecision {
  return {
    action,
    rationale: 'because',
    payload: null,
    decidedAt: T0 + 5,
    origin: { kind, by: kind === 'human' ? 'editor:alice' : 'policy', automatic: kind !== 'human', ...extra },
  };
}

describe('room state (pure)', () => {
  describe('revisions', () => {
    it('a first revision is revision 1, voting, with its deadline and policy version', () => {
      const p = newRevision(input, undefined, { version: 3, voteTimeoutMs: 60_000 }, T0);
      assert.equal(p.revision, 1);
      assert.equal(p.state, 'voting');
      assert.equal(p.closed, false);
      assert.equal(p.invocationId, null);
      assert.equal(p.submittedAt, T0);
      assert.equal(p.createdAt, T0, 'no created_at: the submission time');
      assert.equal(p.voteDeadlineAt, T0 + 60_000);
      assert.equal(p.policyVersion, 'v3');
      assert.notEqual(p.artifact, PLAN, 'the bytes are copied');
      assert.ok(p.artifact.equals(PLAN));
    });

    it('the next revision follows the latest; no vote timeout means no deadline; created_at is kept', () => {
      const p = newRevision({ ...input, createdAt: T0 - 10 }, { revision: 4 }, { version: 1, voteTimeoutMs: 0 }, T0);
      assert.equal(p.revision, 5);
      assert.equal(p.voteDeadlineAt, 0);
      assert.equal(p.createdAt, T0 - 10);
    });

    it('a retry repeats the latest revision whatever the order of its critics; any other change does not', () => {
      const latest = revision();
      assert.ok(repeatsRevision(latest, { ...input, requestedCritics: ['c2', 'c1'] }));
      assert.ok(!repeatsRevision(latest, { ...input, artifact: Buffer.from('other') }));
      assert.ok(!repeatsRevision(latest, { ...input, contentType: 'text/plain' }));
      assert.ok(!repeatsRevision(latest, { ...input, requestedCritics: ['c1'] }));
    });

    it('a new revision follows only a decided, unapproved, open revision of the same type', () => {
      assert.equal(
        revisionRefusal(revision({ state: 'decided' }), { outcome: 'REVISION_REQUESTED' }, 'PLAN'),
        undefined,
      );
      assert.match(revisionRefusal(revision({ state: 'voting' }), undefined, 'PLAN')!.message, /still being voted on/);
      assert.match(
        revisionRefusal(revision({ state: 'escalated' }), undefined, 'PLAN')!.message,
        /escalated to a human/,
      );
      const closed = revisionRefusal(
        revision({ state: 'decided', closed: true }),
        { outcome: 'REVISION_REQUESTED' },
        'PLAN',
      );
      assert.equal(closed?.kind, 'precondition');
      assert.match(closed!.message, /rejected by a person/);
      assert.match(
        revisionRefusal(revision({ state: 'decided' }), { outcome: 'APPROVED' }, 'PLAN')!.message,
        /was approved/,
      );
      const retyped = revisionRefusal(revision({ state: 'decided' }), { outcome: 'REVISION_REQUESTED' }, 'CODE');
      assert.equal(retyped?.kind, 'invalid');
    });

    it('transitions answer a new record and leave the one given as it was', () => {
      const p = revision();
      const t = touched(p, T0 + 7);
      assert.equal(t.updatedAt, T0 + 7);
      const e = escalated(t, 'inv-1', T0 + 8);
      assert.deepEqual([e.state, e.invocationId, e.updatedAt], ['escalated', 'inv-1', T0 + 8]);
      const d = decided(e, { closed: true, decidedAt: T0 + 9 });
      assert.deepEqual([d.state, d.closed, d.updatedAt, d.invocationId], ['decided', true, T0 + 9, 'inv-1']);
      assert.deepEqual([p.state, p.updatedAt, p.invocationId, p.closed], ['voting', T0, null, false]);
    });

    it('policyVersionOf reads v<n>, nothing else', () => {
      assert.equal(policyVersionOf({ policyVersion: 'v12' }), 12);
      assert.equal(policyVersionOf({ policyVersion: '12' }), undefined);
      assert.equal(policyVersionOf({ policyVersion: 'v1.2' }), undefined);
    });

    it('a revision key names its artifact', () => {
      const k = revisionKey('a#b', 3);
      assert.equal(k, '3#a#b');
      assert.equal(artifactOfKey(k), 'a#b');
    });
  });

  describe('votes', () => {
    it('a vote counts the votes it replaced and takes voted_at, else the time it arrived', () => {
      const first = newVote(revision(), 'c1', content(), null, undefined, T0 + 1);
      assert.deepEqual([first.replaced, first.votedAt, first.revision, first.roomId], [0, T0 + 1, 1, 'room-1']);
      const second = newVote(revision(), 'c1', content({ score: 3 }), T0 + 2, first, T0 + 3);
      assert.deepEqual([second.replaced, second.votedAt, second.score], [1, T0 + 2, 3]);
    });

    it('the same vote is the same score, confidence, passed and texts in order', () => {
      const v = vote('c1', { strengths: ['a', 'b'] });
      assert.ok(sameVote(v, content({ strengths: ['a', 'b'] })));
      assert.ok(!sameVote(v, content({ strengths: ['b', 'a'] })));
      assert.ok(!sameVote(v, content({ strengths: ['a', 'b'], passed: false })));
      assert.ok(!sameVote(undefined, content()));
    });

    it('every requested critic voted, or who is missing', () => {
      const p = revision();
      assert.ok(!allVoted(p, [vote('c1')]));
      assert.deepEqual(missingCritics(p, [vote('c1')]), ['c2']);
      assert.ok(allVoted(p, [vote('c2'), vote('c1'), vote('other')]));
      assert.deepEqual(missingCritics(p, []), ['c1', 'c2']);
    });
  });

  describe('decisions', () => {
    const votes = [vote('c1'), vote('c2', { score: 9 })];
    const v = verdict(votes, DEFAULT_ROOM_THRESHOLDS, []);
    const escalation: RoomDecision = decisionOf(revision(), votes, v, 'v3', {
      outcome: 'ESCALATED_TO_HITL',
      reason: 'Escalated to a human: test.',
      decidedBy: 'policy',
      final: false,
      closed: false,
      decidedAt: T0 + 4,
      hitl: { invocationId: 'inv-1', state: 'pending', action: '', origin: '', by: '', rationale: '' },
    });
    const unread = (): VoteRecord[] => assert.fail('the votes are read only without an escalation');

    it("a person's deny closes the artifact", () => {
      const d = hitlDecision(revision(), escalation, invocation(by('human', 'deny')), unread, T0 + 6);
      assert.deepEqual(
        [d.outcome, d.decidedBy, d.closed, d.final, d.decidedAt],
        ['REVISION_REQUESTED', 'hitl', true, true, T0 + 5],
      );
      assert.equal(d.hitl?.by, 'editor:alice');
      assert.match(
        d.reason,
        /^Escalated to a human: test\. Decided by editor:alice \(a person\): rejected: no further revision is accepted — because\.$/,
      );
      assert.deepEqual(d.votes, votes);
    });

    it("a person's approval approves; modify asks for a revision without closing", () => {
      assert.equal(
        hitlDecision(revision(), escalation, invocation(by('human', 'approve')), unread, T0).outcome,
        'APPROVED',
      );
      const m = hitlDecision(revision(), escalation, invocation(by('human', 'modify')), unread, T0);
      assert.deepEqual([m.outcome, m.closed], ['REVISION_REQUESTED', false]);
    });

    it("a fallback's deny is a fallback asking for a revision, never closed", () => {
      const d = hitlDecision(
        revision(),
        escalation,
        invocation(by('fallback', 'deny', { policy: 'DENY_BY_DEFAULT', trigger: 'deadline' }), 'timed_out'),
        unread,
        T0,
      );
      assert.deepEqual([d.outcome, d.decidedBy, d.closed], ['REVISION_REQUESTED', 'fallback', false]);
      assert.deepEqual(
        [d.hitl?.state, d.hitl?.fallbackPolicy, d.hitl?.trigger],
        ['timed_out', 'DENY_BY_DEFAULT', 'deadline'],
      );
      assert.match(d.reason, /the HITL fallback DENY_BY_DEFAULT \(the decision deadline passed\), not a person/);
    });

    it("an operator's auto rule decides as policy", () => {
      const d = hitlDecision(
        revision(),
        escalation,
        invocation(by('rule', 'approve', { rule: 'trusted' })),
        unread,
        T0,
      );
      assert.deepEqual([d.outcome, d.decidedBy], ['APPROVED', 'policy']);
      assert.match(d.reason, /the HITL auto rule 'trusted'/);
    });

    it('an invocation gone (no decision, no escalation) is a cancelled deny: the votes read, decided at now', () => {
      const read = [vote('c1')];
      const d = hitlDecision(revision(), undefined, invocation(null, 'pending'), () => read, T0 + 42);
      assert.deepEqual(
        [d.outcome, d.decidedBy, d.closed, d.decidedAt],
        ['REVISION_REQUESTED', 'fallback', false, T0 + 42],
      );
      assert.equal(d.hitl?.state, 'cancelled');
      assert.equal(d.policyVersion, 'v3');
      assert.deepEqual(d.votes, read);
      assert.equal(d.aggregate.voteCount, 1);
      assert.match(
        d.reason,
        /^Escalated to a human\. Decided by nobody: the invocation was cancelled: denied: revision requested\.$/,
      );
    });
  });
});
