import { strict as assert } from 'node:assert';
import { DEFAULT_BASE_POLICY } from '../../src/core/policy/defaults';
import type { EffectivePolicy, NegotiationPolicy } from '../../src/core/policy/model';
import { NegotiationError } from '../../src/core/policy/speaker';
import type { HitlDecision } from '../../src/core/hitl/model';
import type { RoundEvaluation } from '../../src/core/negotiation/model';
import {
  aborted,
  checkEvaluation,
  checkLive,
  checkRound,
  consensusRound,
  deadlines,
  decided,
  engineScored,
  eventSent,
  hitlOutcome,
  nextEvent,
  newRound,
  noteBest,
  openedRecord,
  paused,
  resumed,
  stopAfterRound,
  superseded,
  takeRound,
  tieBreakOutcome,
  timedOutAt,
  verdictOn,
  waitsBehind,
  withEvaluation,
  type NegotiationRecord,
  type RoundRecord,
} from '../../src/core/negotiation/state';

/** The pure state part of the negotiation area: records and rounds as plain data, no store, no clock, no timers. */
describe('negotiation: the pure state (state.ts)', () => {
  const A = 'agent-a';
  const B = 'agent-b';
  const C = 'agent-c';
  const T0 = 1_700_000_000_000;

  const policy = (over: Partial<NegotiationPolicy> = {}): NegotiationPolicy => ({
    ...DEFAULT_BASE_POLICY,
    maxRounds: 4,
    scoreThreshold: 0.8,
    roundTimeoutMs: 60_000,
    tokenBudgetPerRound: 100,
    totalTokenBudget: 250,
    oscillationLimit: 1,
    hitl: 'None',
    ...over,
    scoring: { ...DEFAULT_BASE_POLICY.scoring, llmWeight: 0, ...over.scoring },
  });
  const record = (
    over: Partial<NegotiationPolicy> = {},
    participants = [A, B, C],
    debateTimeoutMs = 600_000,
  ): NegotiationRecord => {
    const effective: EffectivePolicy = {
      policy: policy(over),
      applied: {},
      profile: '',
      policyVersion: 'v3',
      debateTimeoutMs,
    };
    return openedRecord({
      id: 'n1',
      correlationId: 'n1',
      topic: 'price',
      participants,
      effective,
      schema: '',
      policySchema: '',
      openedBy: 'operator',
      opener: undefined,
      openDigest: 'digest',
      now: T0,
    });
  };
  const refused = (fn: () => unknown, code: string) =>
    assert.throws(fn, (err: unknown) => err instanceof NegotiationError && err.code === code);
  const delta = { magnitude: 1, changedPaths: [], pathCount: 0, method: 'none' as const };
  const round = (rec: NegotiationRecord, n: number, from: string, text: string, at = T0 + n) =>
    newRound(
      rec,
      n,
      n === 1 ? 'propose' : 'counter',
      from,
      'application/json',
      Buffer.from(text),
      Math.ceil(text.length / 4),
      delta,
      false,
      at,
    );
  const evaluation = (from: string, score: number, llmConfidence: number | null = null): RoundEvaluation => ({
    from,
    score,
    llmConfidence,
    notes: '',
    source: 'evaluate',
    at: T0,
  });
  const evaluated = (rec: NegotiationRecord, r: RoundRecord, ...scores: Array<[string, number]>): RoundRecord => {
    let current = r;
    for (const [from, score] of scores)
      current = withEvaluation(rec, current, evaluation(from, score), () => false).round;
    return current;
  };
  const decision = (
    action: HitlDecision['action'],
    origin: HitlDecision['origin'],
    payload: unknown = null,
  ): HitlDecision => ({ action, rationale: 'because', payload, decidedAt: T0, origin });
  const human = { kind: 'human', by: 'editor:alice', automatic: false } as const;

  it('a new record is open with no rounds, its deadline the debate timeout from now; the operator opener asks HITL as itself', () => {
    const rec = record();
    assert.deepEqual(
      [
        rec.state,
        rec.rounds,
        rec.events,
        rec.deadlineAt - rec.openedAt,
        rec.roundStartedAt,
        rec.hitlRequester,
        rec.openedByAgent,
      ],
      ['open', 0, 0, 600_000, T0, 'operator', undefined],
    );
    assert.equal('policySchema' in rec, false, 'no policy schema beside its own: the field is absent');
    const effective = rec.effective;
    const byAgent = openedRecord({
      id: 'n2',
      correlationId: 'n2',
      topic: 't',
      participants: [A, B],
      effective,
      schema: '{}',
      policySchema: '{"type":"object"}',
      openedBy: 'agent A',
      opener: A,
      openDigest: 'd',
      now: T0,
    });
    assert.deepEqual([byAgent.openedByAgent, byAgent.hitlRequester, byAgent.policySchema], [A, A, '{"type":"object"}']);
  });

  it('round rules: Propose first, then Counters, within max_rounds and the per-round budget; ended and paused debates take no calls', () => {
    const rec = record();
    checkRound(rec, 'propose', 0, 10, 40);
    refused(() => checkRound(rec, 'counter', 0, 10, 40), 'OUT_OF_ORDER');
    refused(() => checkRound(rec, 'propose', 1, 10, 40), 'OUT_OF_ORDER');
    refused(() => checkRound(rec, 'counter', 4, 10, 40), 'MAX_ROUNDS');
    refused(() => checkRound(rec, 'counter', 1, 101, 404), 'TOKEN_BUDGET_EXCEEDED');
    checkLive(rec, false);
    paused(rec, 'inv-1', 'deadlock', 'max_rounds');
    refused(() => checkLive(rec, false), 'NEGOTIATION_PAUSED');
    checkLive(rec, true);
    aborted(rec, 'no', 'aborted', 'operator', 'aborted', null, T0);
    refused(() => checkLive(rec, true), 'NEGOTIATION_CLOSED');
  });

  it('a round taken counts its tokens and oscillations and restarts the round timeout; the stop rules: oscillation, then total tokens', () => {
    const rec = record();
    takeRound(rec, round(rec, 1, A, 'x'.repeat(400), T0 + 5));
    assert.deepEqual([rec.rounds, rec.tokensUsed, rec.oscillations, rec.roundStartedAt], [1, 100, 0, T0 + 5]);
    assert.equal(stopAfterRound(rec), undefined);
    takeRound(rec, { ...round(rec, 2, B, 'y'.repeat(400)), oscillation: true });
    takeRound(rec, { ...round(rec, 3, A, 'x'.repeat(400)), oscillation: true });
    assert.equal(rec.oscillations, 2);
    assert.equal(
      stopAfterRound(rec),
      'oscillation',
      'oscillation_limit 1 is beyond, and checked before the budget (300 > 250 too)',
    );
    const budget = record({ oscillationLimit: 5 });
    for (const n of [1, 2, 3]) takeRound(budget, round(budget, n, n % 2 ? A : B, 'z'.repeat(400)));
    assert.equal(stopAfterRound(budget), 'budget');
    const pending = { ...round(rec, 2, B, '{}'), llm: 'pending' as const };
    assert.deepEqual(
      [superseded(pending, 3).llm, superseded(pending, 3).llmNotes],
      ['failed', 'superseded by round 3 before the inference engine answered'],
    );
  });

  it('evaluations: only the others, once each; complete when every other participant evaluated; the engine asked only then, with llm_weight > 0', () => {
    const rec = record({ scoring: { ...DEFAULT_BASE_POLICY.scoring, llmWeight: 0.5 } });
    const r1 = round(rec, 1, A, '{"p":1}');
    refused(() => checkEvaluation(rec, undefined, B), 'OUT_OF_ORDER');
    refused(() => checkEvaluation(rec, r1, A), 'OUT_OF_ORDER');
    let asked = 0;
    const online = () => {
      asked++;
      return true;
    };
    const first = withEvaluation(rec, r1, evaluation(B, 1.7, 0.4), online);
    assert.deepEqual(
      [first.complete, first.askEngine, asked, first.round.evaluations[0]?.score],
      [false, false, 0, 1],
      'clamped; the engine not asked before complete',
    );
    assert.deepEqual(
      [first.round.deterministicScore, first.round.llmConfidence, first.round.score],
      [1, 0.4, 0.7],
      "a report's own llm_confidence blends in meanwhile",
    );
    refused(() => checkEvaluation(rec, first.round, B), 'ALREADY_EXISTS');
    const second = withEvaluation(rec, first.round, evaluation(C, 0.5), online);
    assert.deepEqual(
      [second.complete, second.askEngine, asked, second.round.llm, second.round.score],
      [true, true, 1, 'pending', 0.75],
      'pending: the deterministic score until it answers',
    );
    const answered = engineScored(rec, second.round, 0.25, 'fine');
    assert.deepEqual([answered.llm, answered.llmConfidence, answered.score], ['answered', 0.25, 0.5]);
    const failed = engineScored(rec, second.round, null, 'down');
    assert.deepEqual([failed.llm, failed.llmConfidence, failed.score, failed.llmNotes], ['failed', null, 0.75, 'down']);
  });

  it('the best round is the highest scored, the later one on a tie', () => {
    const rec = record();
    const r1 = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 0.6], [C, 0.6]);
    const r2 = evaluated(rec, round(rec, 2, B, '{"p":2}'), [A, 0.6], [C, 0.6]);
    noteBest(rec, [r1, r2], r2);
    assert.deepEqual([rec.bestRound, rec.bestScore], [2, 0.6]);
    const r2low = evaluated(rec, round(rec, 2, B, '{"p":2}'), [A, 0.2], [C, 0.2]);
    noteBest(rec, [r1, r2], r2low);
    assert.deepEqual([rec.bestRound, rec.bestScore], [1, 0.6], 'the round as rescored counts, not the stored one');
  });

  it('acceptance is unanimous: every other participant at or above the threshold, and the score too; else max_rounds, a between-rounds pause, or on', () => {
    const rec = record();
    const accepted = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 0.9], [C, 0.8]);
    const verdict = verdictOn(rec, accepted, T0 + 9);
    assert.equal(verdict.kind, 'accept');
    if (verdict.kind === 'accept') {
      assert.deepEqual(
        [
          verdict.decision.decidedBy,
          verdict.decision.round,
          verdict.decision.stopReason,
          verdict.decision.policyVersion,
          verdict.decision.at,
        ],
        ['consensus', 1, 'threshold_met', 'v3', T0 + 9],
      );
    }
    const oneShort = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 1], [C, 0.7]);
    assert.equal(oneShort.score !== null && oneShort.score >= 0.8, true, 'the mean clears the threshold…');
    assert.equal(verdictOn(rec, oneShort, T0).kind, 'continue', '…but one participant did not accept');
    assert.equal(verdictOn(rec, { ...oneShort, n: 4 }, T0).kind, 'stop', 'the last round: max_rounds');
    assert.equal(verdictOn(record({ hitl: 'PauseBetweenRounds' }), oneShort, T0).kind, 'pause');
    assert.equal(verdictOn(record({ hitl: 'PauseOnFinalAccept' }), accepted, T0).kind, 'confirm');
  });

  it('the tie-break: hitl asks, highest_score decides the best round (rounds read only then), abort aborts', () => {
    const rec = record();
    let reads = 0;
    const roundsOf = (list: RoundRecord[]) => () => {
      reads++;
      return list;
    };
    assert.deepEqual(tieBreakOutcome(rec, 'max_rounds', 'hitl', roundsOf([]), T0), { kind: 'hitl' });
    assert.deepEqual(tieBreakOutcome(rec, 'max_rounds', 'abort', roundsOf([]), T0), {
      kind: 'abort',
      reason: 'stopped (max_rounds) without consensus: tie-break abort',
    });
    assert.deepEqual(tieBreakOutcome(rec, 'budget', 'highest_score', roundsOf([]), T0), {
      kind: 'abort',
      reason: 'stopped (budget) without consensus: tie-break highest_score found no scored round',
    });
    assert.equal(reads, 0, 'no best round: the rounds are not read');
    const r1 = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 0.5], [C, 0.5]);
    noteBest(rec, [r1], r1);
    const outcome = tieBreakOutcome(rec, 'timeout', 'highest_score', roundsOf([r1]), T0 + 1);
    assert.equal(outcome.kind, 'decide');
    if (outcome.kind === 'decide')
      assert.deepEqual(
        [
          outcome.decision.decidedBy,
          outcome.decision.round,
          outcome.decision.stopReason,
          outcome.decision.result.toString(),
        ],
        ['policy', 1, 'timeout', '{"p":1}'],
      );
  });

  it('the states: paused (a between-rounds pause is no stop), resumed, decided, aborted', () => {
    const rec = record();
    paused(rec, 'inv-1', 'pause_between_rounds', 'hitl');
    assert.deepEqual(
      [rec.state, rec.pending, rec.stopReason],
      ['paused', { invocationId: 'inv-1', why: 'pause_between_rounds', stopReason: 'hitl' }, null],
    );
    resumed(rec, T0 + 50);
    assert.deepEqual([rec.state, rec.pending, rec.roundStartedAt], ['open', null, T0 + 50]);
    paused(rec, 'inv-2', 'deadlock', 'max_rounds');
    assert.equal(rec.stopReason, 'max_rounds');
    const ended = record();
    paused(ended, 'inv-3', 'final_accept', 'threshold_met');
    decided(ended, {
      decidedBy: 'hitl',
      contentType: 'text/plain',
      result: Buffer.from('x'),
      round: 0,
      finalScore: 0,
      rationale: '',
      stopReason: 'threshold_met',
      policyVersion: 'v3',
      fallback: null,
      at: T0,
    });
    assert.deepEqual([ended.state, ended.pending, ended.stopReason], ['decided', null, 'threshold_met']);
    const gone = record();
    aborted(gone, 'why', 'hitl_timeout', 'policy', 'hitl', { policy: 'DENY_BY_DEFAULT', trigger: 'deadline' }, T0 + 7);
    assert.deepEqual(
      [gone.state, gone.stopReason, gone.abort],
      [
        'aborted',
        'hitl',
        {
          reason: 'why',
          errorCode: 'hitl_timeout',
          by: 'policy',
          at: T0 + 7,
          fallback: { policy: 'DENY_BY_DEFAULT', trigger: 'deadline' },
        },
      ],
    );
  });

  it('a HITL answer: approve resumes, accepts the last round (final_accept) or the best (deadlock); modify decides the payload; deny and fallbacks abort', () => {
    const rec = record();
    const r1 = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 0.9], [C, 0.9]);
    const r2 = evaluated(rec, round(rec, 2, B, '{"p":2}'), [A, 0.1], [C, 0.1]);
    noteBest(rec, [r1, r2], r2);
    const pending = (why: 'deadlock' | 'pause_between_rounds' | 'final_accept') => ({
      invocationId: 'inv',
      why,
      stopReason: why === 'deadlock' ? ('max_rounds' as const) : ('hitl' as const),
    });
    assert.equal(
      hitlOutcome(rec, pending('pause_between_rounds'), decision('approve', human), [r1, r2], T0).kind,
      'resume',
    );
    const best = hitlOutcome(rec, pending('deadlock'), decision('approve', human), [r1, r2], T0);
    assert.ok(best.kind === 'decide');
    assert.deepEqual(
      [best.decision.round, best.decision.decidedBy, best.by, best.decision.stopReason, best.decision.rationale],
      [1, 'hitl', 'editor:alice', 'max_rounds', 'editor:alice decided approve: round 1 accepted. because'],
    );
    const last = hitlOutcome(
      rec,
      pending('final_accept'),
      decision('approve', { kind: 'rule', by: 'policy', automatic: true, rule: 'ok' }),
      [r1, r2],
      T0,
    );
    assert.ok(last.kind === 'decide');
    assert.deepEqual([last.decision.round, last.decision.decidedBy], [2, 'policy'], "a rule's answer is the policy's");
    const none = hitlOutcome(record(), pending('deadlock'), decision('approve', human), [], T0);
    assert.deepEqual(none.kind === 'abort' && [none.errorCode, none.by], ['no_scored_round', 'coordinator']);
    const modified = hitlOutcome(rec, pending('deadlock'), decision('modify', human, { p: 1.5 }), [r1, r2], T0);
    assert.ok(modified.kind === 'decide');
    assert.deepEqual(
      [modified.decision.contentType, modified.decision.result.toString(), modified.decision.round],
      ['application/json', '{"p":1.5}', 0],
    );
    const text = hitlOutcome(rec, pending('deadlock'), decision('modify', human, 'plain'), [r1, r2], T0);
    assert.deepEqual(text.kind === 'decide' && text.decision.contentType, 'text/plain');
    const denied = hitlOutcome(rec, pending('deadlock'), decision('deny', human), [r1, r2], T0);
    assert.deepEqual(denied.kind === 'abort' && [denied.errorCode, denied.by, denied.fallback], [
      'hitl_denied',
      'editor:alice',
      null,
    ]);
    const deferred = hitlOutcome(rec, pending('deadlock'), decision('defer', human), [r1, r2], T0);
    assert.deepEqual(deferred.kind === 'abort' && deferred.errorCode, 'hitl_deferred');
    const timedOut = hitlOutcome(
      rec,
      pending('deadlock'),
      decision('deny', {
        kind: 'fallback',
        by: 'policy',
        automatic: true,
        policy: 'DENY_BY_DEFAULT',
        trigger: 'deadline',
      }),
      [r1, r2],
      T0,
    );
    assert.deepEqual(timedOut.kind === 'abort' && [timedOut.errorCode, timedOut.fallback], [
      'hitl_timeout',
      { policy: 'DENY_BY_DEFAULT', trigger: 'deadline' },
    ]);
    const nobody = hitlOutcome(
      rec,
      pending('deadlock'),
      decision('deny', {
        kind: 'fallback',
        by: 'policy',
        automatic: true,
        policy: 'DENY_BY_DEFAULT',
        trigger: 'hitl_unavailable',
      }),
      [r1, r2],
      T0,
    );
    assert.deepEqual(nobody.kind === 'abort' && nobody.errorCode, 'hitl_unavailable');
  });

  it('a participant decides by consensus only on a round every other participant (its author and the decider aside) accepted: the latest such', () => {
    const rec = record();
    const r1 = evaluated(rec, round(rec, 1, A, '{"p":1}'), [B, 0.9]);
    const r2 = evaluated(rec, round(rec, 2, B, '{"p":1}'), [A, 0.9]);
    assert.equal(
      consensusRound(rec, [r1, r2], C, Buffer.from('{"p":1}'), 'application/json'),
      2,
      "the decider's Decide is its own acceptance: both rounds qualify, the latest counts",
    );
    refused(() => consensusRound(rec, [r1, r2], A, Buffer.from('{"p":1}'), 'application/json'), 'FAILED_PRECONDITION'); // C evaluated neither
    refused(() => consensusRound(rec, [r1, r2], C, Buffer.from('{"p":9}'), 'application/json'), 'FAILED_PRECONDITION');
    refused(() => consensusRound(rec, [r1, r2], C, Buffer.from('{"p":1}'), 'text/plain'), 'FAILED_PRECONDITION');
  });

  it('timeouts: the round one from its start and the debate deadline, only while open; a timeout applies only for the same due time, once reached', () => {
    const rec = record();
    assert.deepEqual(deadlines(rec), [
      { which: 'round', due: T0 + 60_000 },
      { which: 'debate', due: T0 + 600_000 },
    ]);
    assert.deepEqual(deadlines(record({ roundTimeoutMs: 0 }, [A, B], 0)), [], 'no round timeout, no deadline');
    assert.equal(timedOutAt(rec, 'round', T0 + 60_000, T0 + 59_999), false, 'not yet');
    assert.equal(timedOutAt(rec, 'round', T0 + 60_000, T0 + 60_000), true);
    takeRound(rec, round(rec, 1, A, '{}', T0 + 10));
    assert.equal(timedOutAt(rec, 'round', T0 + 60_000, T0 + 60_000), false, 'a new round moved it');
    assert.equal(timedOutAt(rec, 'debate', T0 + 600_000, T0 + 600_000), true);
    paused(rec, 'inv', 'deadlock', 'timeout');
    assert.deepEqual(
      [deadlines(rec), timedOutAt(rec, 'debate', T0 + 600_000, T0 + 600_000)],
      [[], false],
      'paused: no timeouts',
    );
  });

  it('event copies: each event takes the next sequence number; copies that could not go are kept in order, later ones wait behind them', () => {
    const rec = record();
    const open = nextEvent(rec, { kind: 'open' }, T0);
    eventSent(rec, open, []);
    const propose = nextEvent(rec, { kind: 'propose', round: 1 }, T0 + 1);
    assert.deepEqual(propose, { kind: 'propose', round: 1, seq: 2, at: T0 + 1 });
    assert.equal(waitsBehind(rec, B), false);
    eventSent(rec, propose, [{ to: B, code: 'BUFFER_FULL', attempts: 1 }]);
    assert.equal(rec.events, 2);
    assert.deepEqual(rec.undelivered, [
      {
        to: B,
        kind: 'propose',
        round: 1,
        seq: 2,
        at: T0 + 1,
        firstRefusedAt: T0 + 1,
        code: 'BUFFER_FULL',
        attempts: 1,
      },
    ]);
    assert.deepEqual([waitsBehind(rec, B), waitsBehind(rec, C)], [true, false]);
  });
});
