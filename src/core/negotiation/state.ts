import type { HitlDecision } from '../hitl/model';
import type { EffectivePolicy, TieBreak } from '../policy/model';
import { fail, LIMITS } from './checks';
import type {
  DeltaSummary,
  NegotiationDecision,
  NegotiationEventKind,
  NegotiationRecord,
  RoundEvaluation,
  RoundRecord,
  StopReason,
  UndeliveredEvent,
} from './model';
import { bestRound, blend, clampScore, deterministicScore, reportedConfidence } from './scoring';

/**
 * The pure state of a debate: the record and its rounds as plain data, and the transitions between states as functions
 * over them. A transition takes the working copy of a record (read from the store for this one transition) and changes
 * it, or answers what the rules decide; nothing here reads or writes the store, arms a timer, tells a listener or logs.
 * `now` is always an argument. The engine's parts (open.ts, propose.ts, …) write what these decide.
 */

export type { NegotiationRecord, RoundRecord } from './model';

type Fallback = { readonly policy: string; readonly trigger: string } | null;

/** Why a debate waits on a person (NegotiationRecord.pending.why). */
export type PauseWhy = 'deadlock' | 'pause_between_rounds' | 'final_accept';

/** What an Open decided: the new record's fields. */
export interface OpenedFields {
  readonly id: string;
  readonly correlationId: string;
  readonly topic: string;
  readonly participants: readonly string[];
  readonly effective: EffectivePolicy;
  /** The proposal schema ('' = none) and the policy's one for the topic when the opener gave its own too ('' = none). */
  readonly schema: string;
  readonly policySchema: string;
  /** The opener's name (the operator's label or the agent's) and the participant an agent opener acts as. */
  readonly openedBy: string;
  readonly opener: string | undefined;
  readonly openDigest: string;
  readonly now: number;
}

/** A new debate: open, no rounds, its deadline the effective debate timeout from now. */
export function openedRecord(o: OpenedFields): NegotiationRecord {
  return {
    id: o.id,
    correlationId: o.correlationId,
    topic: o.topic,
    participants: [...o.participants],
    intensity: o.effective.profile,
    openedBy: o.openedBy,
    openedAt: o.now,
    ...(o.opener !== undefined ? { openedByAgent: o.opener } : {}),
    hitlRequester: o.opener ?? o.openedBy,
    deadlineAt: o.now + o.effective.debateTimeoutMs,
    effective: o.effective,
    schema: o.schema,
    ...(o.policySchema !== '' ? { policySchema: o.policySchema } : {}),
    openDigest: o.openDigest,
    state: 'open',
    rounds: 0,
    tokensUsed: 0,
    oscillations: 0,
    roundStartedAt: o.now,
    pending: null,
    decision: null,
    abort: null,
    events: 0,
    bestRound: 0,
    bestScore: null,
    stopReason: null,
    undelivered: [],
    updatedAt: o.now,
  };
}

/** Refuses a call on a debate that takes no more (ended), or none while it waits on a person (unless `pausedOk`). */
export function checkLive(rec: NegotiationRecord, pausedOk: boolean): void {
  if (rec.state === 'decided' || rec.state === 'aborted') {
    throw fail(
      'precondition',
      'NEGOTIATION_CLOSED',
      `negotiation '${rec.id}' is ${rec.state}${rec.stopReason ? ` (${rec.stopReason})` : ''}; it takes no more calls`,
    );
  }
  if (rec.state === 'paused' && !pausedOk) {
    throw fail(
      'precondition',
      'NEGOTIATION_PAUSED',
      `negotiation '${rec.id}' waits on the HITL invocation ${rec.pending?.invocationId ?? ''} (${rec.pending?.why ?? ''})`,
    );
  }
}

// ------------------------------------------------------------------ rounds

/** Refuses a Propose / Counter the round rules do not allow: round 1 is the Propose, then Counters, max_rounds, the per-round budget. */
export function checkRound(
  rec: NegotiationRecord,
  kind: 'propose' | 'counter',
  roundsSoFar: number,
  tokens: number,
  bytes: number,
): void {
  if (kind === 'propose' && roundsSoFar > 0) {
    throw fail(
      'precondition',
      'OUT_OF_ORDER',
      `negotiation '${rec.id}' has ${roundsSoFar} round(s): round 1 is the only Propose; send a Counter`,
    );
  }
  if (kind === 'counter' && roundsSoFar === 0) {
    throw fail('precondition', 'OUT_OF_ORDER', `negotiation '${rec.id}' has no proposal yet: round 1 is a Propose`);
  }
  const policy = rec.effective.policy;
  if (roundsSoFar >= policy.maxRounds) {
    throw fail(
      'precondition',
      'MAX_ROUNDS',
      `negotiation '${rec.id}' has had its ${policy.maxRounds} rounds (max_rounds)`,
    );
  }
  if (policy.tokenBudgetPerRound > 0 && tokens > policy.tokenBudgetPerRound) {
    throw fail(
      'exhausted',
      'TOKEN_BUDGET_EXCEEDED',
      `the payload is ${tokens} tokens (⌈${bytes} bytes / 4⌉); token_budget_per_round is ${policy.tokenBudgetPerRound}; no round was used`,
    );
  }
}

/** Round n as sent: not evaluated yet. */
export function newRound(
  rec: NegotiationRecord,
  n: number,
  kind: 'propose' | 'counter',
  from: string,
  contentType: string,
  payload: Buffer,
  tokens: number,
  delta: DeltaSummary,
  oscillation: boolean,
  now: number,
): RoundRecord {
  return {
    negotiationId: rec.id,
    n,
    kind,
    from,
    contentType,
    payload: Buffer.from(payload),
    tokens,
    at: now,
    delta,
    evaluations: [],
    deterministicScore: null,
    llmConfidence: null,
    score: null,
    oscillation,
    llm: 'none',
    llmNotes: '',
  };
}

/** The debate took `round`: its counters, and the round timeout runs from it. */
export function takeRound(rec: NegotiationRecord, round: RoundRecord): void {
  rec.rounds = round.n;
  rec.tokensUsed += round.tokens;
  if (round.oscillation) rec.oscillations++;
  rec.roundStartedAt = round.at;
}

/** A round still waiting on the engine when the next one came: its answer would no longer count. */
export function superseded(round: RoundRecord, by: number): RoundRecord {
  return { ...round, llm: 'failed', llmNotes: `superseded by round ${by} before the inference engine answered` };
}

/** The stop rule a new round broke, if any: the oscillation limit, then the total token budget. */
export function stopAfterRound(rec: NegotiationRecord): StopReason | undefined {
  const policy = rec.effective.policy;
  if (rec.oscillations > policy.oscillationLimit) return 'oscillation';
  if (policy.totalTokenBudget > 0 && rec.tokensUsed > policy.totalTokenBudget) return 'budget';
  return undefined;
}

// ------------------------------------------------------------------ evaluations and scores

/** The participants who evaluate `round`: every one but its author. */
export function othersOf(rec: NegotiationRecord, round: RoundRecord): string[] {
  return rec.participants.filter((p) => p !== round.from);
}

/** Refuses an evaluation of the current round that is not the evaluator's to give (its own round, twice, none yet). */
export function checkEvaluation(
  rec: NegotiationRecord,
  current: RoundRecord | undefined,
  from: string,
): asserts current is RoundRecord {
  if (!current) throw fail('precondition', 'OUT_OF_ORDER', `negotiation '${rec.id}' has no proposal to evaluate yet`);
  if (current.from === from)
    throw fail('precondition', 'OUT_OF_ORDER', `${from} wrote round ${current.n}; the other participants evaluate it`);
  if (current.evaluations.some((e) => e.from === from)) {
    throw fail('exists', 'ALREADY_EXISTS', `${from} has evaluated round ${current.n} already`);
  }
}

/**
 * The current round with one more evaluation, scored: deterministic first; once every other participant evaluated it
 * (`complete`), the engine is asked when llm_weight > 0 and `engineOnline()` (the score is then the deterministic one
 * until it answers), else the reports' own llm_confidence blends in.
 */
export function withEvaluation(
  rec: NegotiationRecord,
  current: RoundRecord,
  evaluation: RoundEvaluation,
  engineOnline: () => boolean,
): { readonly round: RoundRecord; readonly complete: boolean; readonly askEngine: boolean } {
  const evaluations = [...current.evaluations, { ...evaluation, score: clampScore(evaluation.score) }];
  const det = deterministicScore(evaluations);
  const policy = rec.effective.policy;
  const complete = othersOf(rec, current).every((p) => evaluations.some((e) => e.from === p));
  const askEngine = complete && policy.scoring.llmWeight > 0 && engineOnline();
  const llm = askEngine ? null : reportedConfidence(evaluations);
  const round: RoundRecord = {
    ...current,
    evaluations,
    deterministicScore: det,
    llmConfidence: llm,
    score: det === null ? null : blend(det, llm, policy.scoring.llmWeight),
    llm: askEngine ? 'pending' : 'none',
  };
  return { round, complete, askEngine };
}

/** The engine's answer for a pending round (`confidence` null: it failed, the deterministic score stands). */
export function engineScored(
  rec: NegotiationRecord,
  current: RoundRecord,
  confidence: number | null,
  notes: string,
): RoundRecord {
  const ok = confidence !== null && Number.isFinite(confidence);
  const llm = ok ? clampScore(confidence) : null;
  return {
    ...current,
    llm: ok ? 'answered' : 'failed',
    llmConfidence: llm,
    llmNotes: notes.slice(0, LIMITS.notes),
    score:
      current.deterministicScore === null
        ? null
        : blend(current.deterministicScore, llm, rec.effective.policy.scoring.llmWeight),
  };
}

/** After `round` was (re)scored: the best-scored round of all `rounds` (with `round` as now; the later one on a tie). */
export function noteBest(rec: NegotiationRecord, rounds: readonly RoundRecord[], round: RoundRecord): void {
  if (round.score === null) return;
  const best = bestRound(rounds.map((r) => (r.n === round.n ? round : r)));
  rec.bestRound = best?.n ?? 0;
  rec.bestScore = best?.score ?? null;
}

// ------------------------------------------------------------------ acceptance and stops

/** What the rules decide once every other participant evaluated a round and its score is final. */
export type Verdict =
  | { readonly kind: 'accept'; readonly decision: NegotiationDecision }
  /** Accepted, but PauseOnFinalAccept: a person confirms (final_accept, threshold_met). */
  | { readonly kind: 'confirm' }
  /** Not accepted on the last round: the max_rounds stop. */
  | { readonly kind: 'stop' }
  /** Not accepted, PauseBetweenRounds: a person lets the next round start. */
  | { readonly kind: 'pause' }
  | { readonly kind: 'continue' };

/** Acceptance is unanimous (RFC §17): every other participant's own evaluation at or above the threshold, and the blended score too. */
export function verdictOn(rec: NegotiationRecord, round: RoundRecord, now: number): Verdict {
  const policy = rec.effective.policy;
  const score = round.score ?? 0;
  const unanimous = othersOf(rec, round).every((p) =>
    round.evaluations.some((e) => e.from === p && e.score >= policy.scoreThreshold),
  );
  if (unanimous && score >= policy.scoreThreshold) {
    if (policy.hitl === 'PauseOnFinalAccept') return { kind: 'confirm' };
    return {
      kind: 'accept',
      decision: {
        decidedBy: 'consensus',
        contentType: round.contentType,
        result: round.payload,
        round: round.n,
        finalScore: score,
        rationale: `Every other participant evaluated round ${round.n} (by ${round.from}) at or above score_threshold ${policy.scoreThreshold}; its score ${score.toFixed(3)} too.`,
        stopReason: 'threshold_met',
        policyVersion: rec.effective.policyVersion,
        fallback: null,
        at: now,
      },
    };
  }
  if (round.n >= policy.maxRounds) return { kind: 'stop' };
  if (policy.hitl === 'PauseBetweenRounds') return { kind: 'pause' };
  return { kind: 'continue' };
}

/** The version number of the policy set a debate runs under (`v<N>`), NaN when it names none. */
export function policyVersionNumber(rec: NegotiationRecord): number {
  return Number(/^v(\d+)$/.exec(rec.effective.policyVersion)?.[1] ?? NaN);
}

/** What a stop without acceptance (a deadlock) comes to under the tie-break. */
export type TieBreakOutcome =
  | { readonly kind: 'hitl' }
  | { readonly kind: 'decide'; readonly decision: NegotiationDecision }
  | { readonly kind: 'abort'; readonly reason: string };

/** The tie-break: hitl asks a person; highest_score decides on the best-scored round (`roundsOf` read only then); else abort. */
export function tieBreakOutcome(
  rec: NegotiationRecord,
  reason: StopReason,
  tieBreak: TieBreak,
  roundsOf: () => readonly RoundRecord[],
  now: number,
): TieBreakOutcome {
  if (tieBreak === 'hitl') return { kind: 'hitl' };
  if (tieBreak === 'highest_score' && rec.bestRound > 0) {
    const best = roundsOf().find((r) => r.n === rec.bestRound);
    if (best) {
      return {
        kind: 'decide',
        decision: {
          decidedBy: 'policy',
          contentType: best.contentType,
          result: best.payload,
          round: best.n,
          finalScore: best.score ?? 0,
          rationale: `Stopped (${reason}) without consensus; tie-break highest_score chose round ${best.n} (score ${(best.score ?? 0).toFixed(3)}).`,
          stopReason: reason,
          policyVersion: rec.effective.policyVersion,
          fallback: null,
          at: now,
        },
      };
    }
  }
  const why = tieBreak === 'abort' ? 'tie-break abort' : 'tie-break highest_score found no scored round';
  return { kind: 'abort', reason: `stopped (${reason}) without consensus: ${why}` };
}

// ------------------------------------------------------------------ the states

/** It waits on a person: the HITL invocation `invocationId`. A between-rounds pause is no stop. */
export function paused(rec: NegotiationRecord, invocationId: string, why: PauseWhy, stopReason: StopReason): void {
  rec.state = 'paused';
  rec.pending = { invocationId, why, stopReason };
  rec.stopReason = why === 'pause_between_rounds' ? null : stopReason;
}

/** A person let the next round start: open again, the round timeout from now. */
export function resumed(rec: NegotiationRecord, now: number): void {
  rec.pending = null;
  rec.state = 'open';
  rec.roundStartedAt = now;
}

export function decided(rec: NegotiationRecord, decision: NegotiationDecision): void {
  rec.state = 'decided';
  rec.decision = decision;
  rec.stopReason = decision.stopReason;
  rec.pending = null;
}

export function aborted(
  rec: NegotiationRecord,
  reason: string,
  errorCode: string,
  by: string,
  stopReason: StopReason,
  fallback: Fallback,
  now: number,
): void {
  rec.state = 'aborted';
  rec.abort = { reason, errorCode, by, at: now, fallback };
  rec.stopReason = stopReason;
  rec.pending = null;
}

// ------------------------------------------------------------------ the HITL answer

/** What a settled HITL invocation of a paused debate comes to. */
export type HitlOutcome =
  | { readonly kind: 'resume'; readonly how: string; readonly fallback: Fallback }
  | { readonly kind: 'decide'; readonly decision: NegotiationDecision; readonly by: string }
  | {
      readonly kind: 'abort';
      readonly reason: string;
      readonly errorCode: string;
      readonly by: string;
      readonly stopReason: StopReason;
      readonly fallback: Fallback;
    };

/** How a decision came about, as the record and the log say it. */
export function decisionHow(decision: HitlDecision): string {
  const origin = decision.origin;
  return origin.kind === 'human'
    ? `${origin.by} decided ${decision.action}`
    : origin.kind === 'fallback'
      ? `fallback ${origin.policy} (${origin.trigger}) applied ${decision.action}`
      : origin.kind === 'rule'
        ? `rule '${origin.rule}' applied ${decision.action}`
        : `cancelled by ${origin.by}`;
}

/**
 * approve: the next round may start (a between-rounds pause), or the round accepted (the last one for final_accept, the
 * best-scored one for a deadlock); modify: the person's payload decides; anything else aborts. A rule's or a fallback's
 * answer is recorded as the policy's (and the fallback named).
 */
export function hitlOutcome(
  rec: NegotiationRecord,
  pending: NonNullable<NegotiationRecord['pending']>,
  decision: HitlDecision,
  rounds: readonly RoundRecord[],
  now: number,
): HitlOutcome {
  const origin = decision.origin;
  const fallback = origin.kind === 'fallback' ? { policy: origin.policy ?? '', trigger: origin.trigger ?? '' } : null;
  const decidedBy = origin.kind === 'human' ? 'hitl' : 'policy';
  const how = decisionHow(decision);
  if (decision.action === 'approve') {
    if (pending.why === 'pause_between_rounds') return { kind: 'resume', how, fallback };
    const chosen = pending.why === 'final_accept' ? rounds.at(-1) : rounds.find((r) => r.n === rec.bestRound);
    if (!chosen)
      return {
        kind: 'abort',
        reason: `${how}, but no round has a score to accept`,
        errorCode: 'no_scored_round',
        by: 'coordinator',
        stopReason: pending.stopReason,
        fallback,
      };
    return {
      kind: 'decide',
      by: origin.by,
      decision: {
        decidedBy,
        contentType: chosen.contentType,
        result: chosen.payload,
        round: chosen.n,
        finalScore: chosen.score ?? 0,
        rationale: `${how}: round ${chosen.n} accepted. ${decision.rationale}`.trim(),
        stopReason: pending.stopReason,
        policyVersion: rec.effective.policyVersion,
        fallback,
        at: now,
      },
    };
  }
  if (decision.action === 'modify') {
    const text = typeof decision.payload === 'string';
    const result = Buffer.from(text ? (decision.payload as string) : JSON.stringify(decision.payload ?? null), 'utf8');
    return {
      kind: 'decide',
      by: origin.by,
      decision: {
        decidedBy,
        contentType: text ? 'text/plain' : 'application/json',
        result,
        round: 0,
        finalScore: rec.bestScore ?? 0,
        rationale: `${how}: the person's payload decides. ${decision.rationale}`.trim(),
        stopReason: pending.stopReason,
        policyVersion: rec.effective.policyVersion,
        fallback,
        at: now,
      },
    };
  }
  const errorCode = fallback
    ? fallback.trigger === 'hitl_unavailable'
      ? 'hitl_unavailable'
      : 'hitl_timeout'
    : decision.action === 'defer'
      ? 'hitl_deferred'
      : 'hitl_denied';
  return {
    kind: 'abort',
    reason: `${how}: ${decision.rationale}`,
    errorCode,
    by: origin.by,
    stopReason: pending.stopReason,
    fallback,
  };
}

// ------------------------------------------------------------------ a participant's Decide

/**
 * A participant's Decide by consensus: its result must be the bytes (and content type) of a round that every
 * participant other than the round's author and the decider evaluated at or above score_threshold (the decider's
 * Decide is its own acceptance). Answers that round's number (the latest such); FAILED_PRECONDITION saying why otherwise.
 */
export function consensusRound(
  rec: NegotiationRecord,
  rounds: readonly RoundRecord[],
  decider: string,
  result: Buffer,
  contentType: string,
): number {
  const threshold = rec.effective.policy.scoreThreshold;
  const same = rounds.filter((r) => r.payload.equals(result) && r.contentType === contentType);
  if (same.length === 0) {
    throw fail(
      'precondition',
      'FAILED_PRECONDITION',
      `a participant decides by consensus only on a round's contract: the result equals no round of '${rec.id}' (bytes and content_type)`,
    );
  }
  const missing: string[] = [];
  for (const r of same.reverse()) {
    const short = rec.participants.filter(
      (p) => p !== r.from && p !== decider && !r.evaluations.some((e) => e.from === p && e.score >= threshold),
    );
    if (short.length === 0) return r.n;
    missing.push(`round ${r.n}: ${short.join(', ')}`);
  }
  throw fail(
    'precondition',
    'FAILED_PRECONDITION',
    `not a consensus: every other participant must have evaluated the round at or above score_threshold ${threshold}; not yet (${missing.join('; ')})`,
  );
}

// ------------------------------------------------------------------ timeouts

export type TimeoutKind = 'round' | 'debate';

/** When an open debate times out: its round (round_timeout_ms > 0) and the whole debate (a deadline set). None unless open. */
export function deadlines(rec: NegotiationRecord): Array<{ readonly which: TimeoutKind; readonly due: number }> {
  if (rec.state !== 'open') return [];
  const out: Array<{ which: TimeoutKind; due: number }> = [];
  if (rec.effective.policy.roundTimeoutMs > 0)
    out.push({ which: 'round', due: rec.roundStartedAt + rec.effective.policy.roundTimeoutMs });
  if (rec.deadlineAt > rec.openedAt) out.push({ which: 'debate', due: rec.deadlineAt });
  return out;
}

/** Whether a timeout armed for `due` still applies at `now`: the debate open, the same due time, and reached. */
export function timedOutAt(rec: NegotiationRecord, which: TimeoutKind, due: number, now: number): boolean {
  if (rec.state !== 'open') return false;
  const stillDue = which === 'round' ? rec.roundStartedAt + rec.effective.policy.roundTimeoutMs : rec.deadlineAt;
  return stillDue === due && now >= due;
}

// ------------------------------------------------------------------ event copies

/** What an event reported, enough to rebuild its bytes (an UndeliveredEvent holds this, not the bytes). */
export interface EventRef {
  readonly kind: NegotiationEventKind;
  readonly seq: number;
  /** When it was first sent (its `ts`). */
  readonly at: number;
  /** propose / counter / evaluate: the round. */
  readonly round?: number;
  /** evaluate: the evaluator. */
  readonly from?: string;
}

/** The next event's reference: the next sequence number. */
export function nextEvent(
  rec: NegotiationRecord,
  event: { kind: NegotiationEventKind; round?: number; from?: string },
  at: number,
): EventRef {
  return { ...event, seq: rec.events + 1, at };
}

/** One event sent: its sequence number taken, and the copies that could not go now kept (in order) for redelivery. */
export function eventSent(
  rec: NegotiationRecord,
  ref: EventRef,
  deferred: ReadonlyArray<{ readonly to: string; readonly code: string; readonly attempts: number }>,
): void {
  rec.events = ref.seq;
  for (const d of deferred)
    rec.undelivered.push({
      to: d.to,
      ...ref,
      firstRefusedAt: ref.at,
      code: d.code,
      attempts: d.attempts,
    } satisfies UndeliveredEvent);
}

/** Whether a copy to `to` must wait behind an earlier one still undelivered (order per participant). */
export function waitsBehind(rec: NegotiationRecord, to: string): boolean {
  return rec.undelivered.some((u) => u.to === to);
}
