import { isoUtc } from '../clock';
import type { HitlDiff, InvocationRequest } from '../hitl/model';
import { parseBoundedJson } from '../json';
import type { NegotiationPolicy } from '../policy/model';
import { isJsonContentType } from './delta';
import type {
  DeltaSummary,
  NegotiationDecision,
  NegotiationRecord,
  RoundEvaluation,
  RoundRecord,
  StopReason,
} from './model';
import type { EventRef, PauseWhy } from './state';

/**
 * What a debate tells: the bytes of its §17.1 events (NEGOTIATION envelopes), the contents of its artifacts, the HITL
 * invocation it opens (summary, facts, diffs and their titles). Pure: from the record and its rounds.
 */

/** The HITL component name (origin `internal`) and requester of the invocations a debate opens. */
export const NEGOTIATION_HITL_COMPONENT = 'negotiation';

/** A DEBATE_DEADLOCK / gate invocation's proposed actions (what each does: README, "Debates"). */
export const NEGOTIATION_HITL_ACTIONS = ['approve', 'modify', 'deny'] as const;

/**
 * Proposals larger than this are not put into a HITL invocation's diff (the contract artifacts hold them): the HITL
 * webview diffs beforeJson/afterJson itself (jsondiffpatch), so they stay small.
 */
export const HITL_DIFF_MAX_BYTES = 4 * 1024;

/** policy.proto NegotiationPolicy with proto field names: the `policy` event's `policy`. */
export function policyWire(p: NegotiationPolicy): Record<string, unknown> {
  return {
    max_rounds: p.maxRounds,
    score_threshold: p.scoreThreshold,
    diff_tolerance: p.diffTolerance,
    round_timeout_ms: p.roundTimeoutMs,
    token_budget_per_round: p.tokenBudgetPerRound,
    total_token_budget: p.totalTokenBudget,
    oscillation_limit: p.oscillationLimit,
    hitl: { mode: p.hitl },
    scoring: {
      require_schema_valid: p.scoring.requireSchemaValid,
      require_examples_pass: p.scoring.requireExamplesPass,
      llm_weight: p.scoring.llmWeight,
    },
  };
}

/**
 * The bytes of one event, from the record (and the round it reports: `rounds()` is asked only for round events): the
 * same bytes when first sent and when a deferred copy is retried, since what an event reports never changes afterwards.
 * Undefined when it cannot be rebuilt.
 */
export function eventPayload(
  rec: NegotiationRecord,
  ref: EventRef,
  rounds: () => readonly RoundRecord[],
): Buffer | undefined {
  let fields: Record<string, unknown>;
  const roundOf = () => rounds().find((r) => r.n === ref.round);
  switch (ref.kind) {
    case 'open':
      fields = { topic: rec.topic, corr: rec.correlationId };
      break;
    case 'policy': {
      const e = rec.effective;
      fields = {
        negotiation_id: rec.id,
        ...(e.profile !== '' ? { profile: e.profile } : {}),
        policy: policyWire(e.policy),
        policy_version: e.policyVersion,
        debate_timeout_ms: e.debateTimeoutMs,
      };
      break;
    }
    case 'propose':
    case 'counter': {
      const r = roundOf();
      if (!r) return undefined;
      fields = { from: r.from, ct: r.contentType, payload_b64: r.payload.toString('base64'), round: r.n };
      break;
    }
    case 'evaluate': {
      const e = roundOf()?.evaluations.find((x) => x.from === ref.from);
      if (!e) return undefined;
      fields = { from: e.from, score: e.score, notes: e.notes, round: ref.round };
      break;
    }
    case 'decide': {
      const d = rec.decision;
      if (!d) return undefined;
      fields = {
        by: d.decidedBy,
        ct: d.contentType,
        result_b64: d.result.toString('base64'),
        round: d.round,
        stop_reason: d.stopReason,
      };
      break;
    }
    case 'abort': {
      const a = rec.abort;
      if (!a) return undefined;
      fields = { reason: a.reason, error_code: a.errorCode, stop_reason: rec.stopReason };
      break;
    }
  }
  return Buffer.from(
    JSON.stringify({ kind: ref.kind, ts: isoUtc(ref.at), ...fields, negotiation_id: rec.id, seq: ref.seq }),
    'utf8',
  );
}

/** A DeltaSummary on the wire (artifacts). */
export function deltaWire(delta: DeltaSummary): Record<string, unknown> {
  return { magnitude: delta.magnitude, changed_paths: delta.changedPaths };
}

/** The `score` artifact of one evaluation. */
export function scoreArtifact(rec: NegotiationRecord, round: RoundRecord, evaluation: RoundEvaluation): Buffer {
  return Buffer.from(
    JSON.stringify({
      negotiation_id: rec.id,
      round: round.n,
      from_agent: evaluation.from,
      deterministic_score: evaluation.score,
      llm_confidence: evaluation.llmConfidence ?? 0,
      notes: evaluation.notes,
      delta: deltaWire(round.delta),
    }),
  );
}

/** The `decision` artifact of a decided debate. */
export function decisionArtifact(rec: NegotiationRecord, decision: NegotiationDecision): Buffer {
  return Buffer.from(
    JSON.stringify({
      negotiation_id: rec.id,
      decided_by: decision.decidedBy,
      final_score: decision.finalScore,
      rationale: decision.rationale,
      stop_reason: decision.stopReason,
      policy_version: decision.policyVersion,
      round: decision.round,
      content_type: decision.contentType,
      fallback: decision.fallback,
      decided_at: isoUtc(decision.at),
    }),
  );
}

/** The `decision` artifact of an aborted debate (`rec.abort` set). */
export function abortArtifact(rec: NegotiationRecord): Buffer {
  const a = rec.abort;
  if (!a) throw new Error(`negotiation '${rec.id}' is not aborted`);
  return Buffer.from(
    JSON.stringify({
      negotiation_id: rec.id,
      decided_by: a.fallback ? 'policy' : a.by === 'coordinator' ? 'policy' : 'abort',
      final_score: rec.bestScore ?? 0,
      rationale: a.reason,
      stop_reason: rec.stopReason,
      policy_version: rec.effective.policyVersion,
      aborted: true,
      error_code: a.errorCode,
      fallback: a.fallback,
      decided_at: isoUtc(a.at),
    }),
  );
}

/** The HITL invocation a deadlock or a gate opens: what the person sees (summary, facts, the focus round's diff). */
export function hitlRequest(
  rec: NegotiationRecord,
  rounds: readonly RoundRecord[],
  why: PauseWhy,
  stopReason: StopReason,
): InvocationRequest {
  const latest = rounds.at(-1);
  const best = rounds.find((r) => r.n === rec.bestRound);
  const focus = why === 'deadlock' ? (best ?? latest) : latest;
  const summaries = {
    deadlock: `Debate "${rec.topic}" stopped (${stopReason}) after ${rec.rounds} round(s) without consensus. Approve accepts the best-scored round${best ? ` (round ${best.n}, score ${(best.score ?? 0).toFixed(3)})` : ''}; modify decides with the payload you give; deny aborts.`,
    final_accept: `Debate "${rec.topic}": round ${latest?.n ?? 0} reached the score threshold (PauseOnFinalAccept). Approve accepts it; modify decides with the payload you give; deny aborts.`,
    pause_between_rounds: `Debate "${rec.topic}": round ${latest?.n ?? 0} was evaluated (score ${(latest?.score ?? 0).toFixed(3)}, PauseBetweenRounds). Approve lets the next round start; modify decides with the payload you give; deny aborts.`,
  };
  return {
    reasonType: why === 'deadlock' ? 'DEBATE_DEADLOCK' : 'MANUAL_OVERRIDE',
    requester: rec.hitlRequester ?? NEGOTIATION_HITL_COMPONENT,
    correlationId: rec.id,
    subject: { repoId: '', worktreeId: '', taskId: '' },
    context: {
      summary: summaries[why],
      facts: {
        negotiation_id: rec.id,
        topic: rec.topic,
        participants: rec.participants,
        why,
        stop_reason: stopReason,
        rounds: rec.rounds,
        best_round: rec.bestRound,
        best_score: rec.bestScore,
        tokens_used: rec.tokensUsed,
        oscillations: rec.oscillations,
        policy_version: rec.effective.policyVersion,
        profile: rec.effective.profile,
        scores: rounds.map((r) => ({ round: r.n, from: r.from, score: r.score, magnitude: r.delta.magnitude })),
      },
      diffs: focus ? hitlDiffs(rounds, focus) : [],
      risk: { level: 'medium', notes: [] },
      priorAttempts: [],
      inference: {},
      score: why === 'pause_between_rounds' ? (latest?.score ?? null) : (focus?.score ?? null),
    },
    proposedActions: [...NEGOTIATION_HITL_ACTIONS],
    suggestedAction: focus?.score !== null && focus?.score !== undefined ? 'approve' : 'deny',
    priority: 5,
    requestedFallback: '',
  };
}

/** The diff of the focus round against the one before (JSON for the webview to diff, else text), titled; small ones only. */
export function hitlDiffs(rounds: readonly RoundRecord[], focus: RoundRecord): HitlDiff[] {
  const previous = rounds.find((r) => r.n === focus.n - 1);
  const title = previous
    ? `round ${previous.n} → round ${focus.n} (${focus.from})`
    : `round ${focus.n} (${focus.from})`;
  if (
    focus.payload.byteLength > HITL_DIFF_MAX_BYTES ||
    (previous && previous.payload.byteLength > HITL_DIFF_MAX_BYTES)
  ) {
    return [
      { title: `${title}: too large to show here; see the contract_v${focus.n}.json artifact`, before: '', after: '' },
    ];
  }
  const json = (r: RoundRecord) => {
    if (!isJsonContentType(r.contentType)) return undefined;
    const parsed = parseBoundedJson(r.payload.toString('utf8'), { what: 'round' });
    return parsed.ok ? { value: parsed.value } : undefined;
  };
  const after = json(focus);
  const before = previous ? json(previous) : undefined;
  if (after && (before || !previous)) return [{ title, beforeJson: before?.value ?? null, afterJson: after.value }];
  return [{ title, before: previous ? previous.payload.toString('utf8') : '', after: focus.payload.toString('utf8') }];
}
