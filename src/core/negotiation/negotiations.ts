import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import type { HitlService } from '../hitl/hitlService';
import type { HitlDiff, HitlInvocation, InvocationRequest } from '../hitl/model';
import type { IdSource } from '../ids';
import { parseBoundedJson } from '../json';
import type { EventLog } from '../log/eventLog';
import type { Artifact } from '../activity/model';
import type { NegotiationPolicies } from '../policy/policies';
import { MIN_DEBATE_TIMEOUT_MS } from '../policy/defaults';
import { DEBATE_INTENSITIES, type AgentPreferences, type DebateIntensity, type EffectivePolicy, type NegotiationPolicy, type TieBreak } from '../policy/model';
import { NegotiationError, type NegotiationErrorKind, type Speaker } from '../policy/speaker';
import type { AgentDirectory } from '../registry/model';
import { baseContentType, modalityAccepts } from '../router/envelope';
import type { CoordinatorOutbox } from '../router/model';
import { schedulePruning } from '../retention';
import { compileSchemaText, compileSchemaTextAsync } from '../tools/descriptors';
import { canonicalJson, isJsonContentType, jsonDeltaSummary, jsonSame, textDeltaSummary, unifiedDiff } from './delta';
import type {
  DeltaSummary, NegotiationChange, NegotiationDecision, NegotiationDetail, NegotiationEventKind, NegotiationQueries, NegotiationRecord,
  NegotiationStorage, NegotiationSummary, RoundEvaluation, RoundRecord, StopReason, UndeliveredEvent,
} from './model';

/** What an event reported, enough to rebuild its bytes (an UndeliveredEvent holds this, not the bytes). */
interface EventRef {
  readonly kind: NegotiationEventKind;
  readonly seq: number;
  /** When it was first sent (its `ts`). */
  readonly at: number;
  /** propose / counter / evaluate: the round. */
  readonly round?: number;
  /** evaluate: the evaluator. */
  readonly from?: string;
}
import { bestRound, blend, clampScore, deterministicScore, reportedConfidence, tokensOf } from './scoring';

export interface OpenInput {
  readonly negotiationId: string;
  /** '' = the negotiation id; anything else must equal it (RFC §17: correlation_id = negotiation_id). */
  readonly correlationId: string;
  readonly topic: string;
  readonly participants: readonly string[];
  readonly intensity: DebateIntensity | '';
  /** 0 = the profile's. */
  readonly debateTimeoutMs: number;
  /** gRPC metadata `sw4rm-negotiation-profile`, '' = none. */
  readonly profileHint: string;
  /** gRPC metadata `sw4rm-negotiation-preferences` (JSON: agent id → AgentPreferences, proto field names). */
  readonly preferences: Readonly<Record<string, Partial<AgentPreferences>>>;
  /** gRPC metadata `sw4rm-proposal-schema` (a JSON Schema as text), '' = the policy's for the topic, if any. */
  readonly schema: string;
}

export interface ProposalInput {
  readonly negotiationId: string;
  readonly fromAgent: string;
  readonly contentType: string;
  readonly payload: Buffer;
}

export interface EvaluationInput {
  readonly negotiationId: string;
  readonly fromAgent: string;
  /** 0..1; 0 when absent. */
  readonly confidenceScore: number;
  readonly notes: string;
}

export interface DecisionInput {
  readonly negotiationId: string;
  /** consensus | hitl | policy ('' = consensus for a participant, hitl for the operator). */
  readonly decidedBy: string;
  readonly contentType: string;
  readonly result: Buffer;
}

/** SchedulerPolicyService.SubmitEvaluation's EvaluationReport. */
export interface EvaluationReportInput {
  readonly fromAgent: string;
  readonly deterministicScore: number;
  /** 0 = absent. */
  readonly llmConfidence: number;
  readonly notes: string;
}

export interface NegotiationDeps {
  readonly store: NegotiationStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly hitl: HitlService;
  /** ActivityBuffer.appendArtifact: contract_vN / diff / reports. */
  readonly artifacts: { appendArtifact(artifact: Artifact, ctx: CallContext): { readonly ok: boolean; readonly reason: string } };
  /** The reasoning proxy (InferenceEngine): asked only when an engine agent is online and llm_weight > 0. */
  readonly inference: {
    engineAgent(): string | undefined;
    evaluateDebate(request: { negotiationId: string; proposalA: string; proposalB: string; intensity: string }, ctx: CallContext): Promise<{ confidence: number; notes: string }>;
  };
  readonly policies: NegotiationPolicies;
  /** Retention of finished negotiations (defaults: NEGOTIATION_RETENTION). */
  readonly retention?: Partial<NegotiationRetention>;
}

export interface NegotiationRetention {
  /** A decided or aborted negotiation (and its rounds) is deleted this long after its last change… */
  readonly maxAgeMs: number;
  /** …or once more than this many newer ones have finished. */
  readonly maxFinished: number;
  /** How often pruning runs, and how many negotiations one run deletes at most (a backlog: catch-up runs). */
  readonly intervalMs: number;
  readonly batch: number;
}

/** README, "Debates": finished debates are kept 30 days, at most 10,000; pruned hourly, 100 per run. */
export const NEGOTIATION_RETENTION: NegotiationRetention = { maxAgeMs: 30 * 86_400_000, maxFinished: 10_000, intervalMs: 3_600_000, batch: 100 };

const LIMITS = FIELD_LIMITS.negotiation;
const ACTOR = 'negotiation';
/** The HITL component name (origin `internal`) and requester of the invocations a debate opens. */
export const NEGOTIATION_HITL_COMPONENT = 'negotiation';
/** A refused event copy is retried this often, and given up (logged ERROR) after this long. */
export const UNDELIVERED_RETRY_MS = 1_000;
export const UNDELIVERED_GIVE_UP_MS = 10 * 60_000;
/**
 * Proposals larger than this are not put into a HITL invocation's diff (the contract artifacts hold them): the HITL
 * webview diffs beforeJson/afterJson itself (jsondiffpatch), so they stay small.
 */
export const HITL_DIFF_MAX_BYTES = 4 * 1024;
const DECIDED_BY = ['consensus', 'hitl', 'policy'] as const;
/** Debates one agent may have open (not decided or aborted) at once, as their opener: beyond, Open is refused BUFFER_FULL. */
export const MAX_OPEN_PER_OPENER = 32;
/** Compiled proposal schemas kept (an LRU shared by all negotiations; a 64 KiB schema takes up to a second to compile). */
export const VALIDATOR_CACHE_SIZE = 32;

/** A DEBATE_DEADLOCK / gate invocation's proposed actions (what each does: README, "Debates"). */
export const NEGOTIATION_HITL_ACTIONS = ['approve', 'modify', 'deny'] as const;

/** policy.proto NegotiationPolicy with proto field names: the `policy` event's `policy`. */
export function policyWire(p: NegotiationPolicy): Record<string, unknown> {
  return {
    max_rounds: p.maxRounds, score_threshold: p.scoreThreshold, diff_tolerance: p.diffTolerance, round_timeout_ms: p.roundTimeoutMs,
    token_budget_per_round: p.tokenBudgetPerRound, total_token_budget: p.totalTokenBudget, oscillation_limit: p.oscillationLimit,
    hitl: { mode: p.hitl },
    scoring: { require_schema_valid: p.scoring.requireSchemaValid, require_examples_pass: p.scoring.requireExamplesPass, llm_weight: p.scoring.llmWeight },
  };
}

/** What one call may still undo: an event copy accepted by the router cannot be taken back. */
interface Op {
  /**
   * Open, Propose, Counter, Evaluate: the call is refused when no copy of its events could be sent because the router
   * refused every one (NO_ROUTE aside). Decide, Abort, timers and HITL answers are never refused for delivery.
   */
  readonly refusable: boolean;
  accepted: number;
  /** Work for after the commit. */
  readonly after: Array<() => void>;
}

const fail = (kind: NegotiationErrorKind, code: string, message: string) => new NegotiationError(kind, code, message);

function routerKind(code: string): NegotiationErrorKind {
  switch (code) {
    case 'BUFFER_FULL': case 'OVERLOADED': return 'exhausted';
    case 'OVERSIZE_PAYLOAD': case 'VALIDATION_ERROR': return 'invalid';
    case 'UNSUPPORTED_MESSAGE_TYPE': case 'PERMISSION_DENIED': return 'precondition';
    default: return 'unavailable';
  }
}

function checkId(field: string, value: string, max: number): void {
  if (value.trim() === '') throw fail('invalid', 'VALIDATION_ERROR', `${field} is required`);
  const refusal = identifierRefusal(field, value, max);
  if (refusal) throw fail('invalid', 'VALIDATION_ERROR', refusal);
}

function checkText(field: string, value: string, max: number): void {
  if (value.length > max) throw fail('invalid', 'VALIDATION_ERROR', `${field} is longer than ${max} characters (${value.length})`);
}

function checkContentType(field: string, contentType: string): void {
  checkText(field, contentType, LIMITS.content_type);
  if (contentType === '' || baseContentType(contentType) === undefined || /[\u0000-\u001f\u007f]/.test(contentType)) {
    throw fail('invalid', 'VALIDATION_ERROR', `${field} '${contentType.slice(0, 80)}' is not a MIME type (e.g. application/json)`);
  }
}

function actsAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || speaker.mayActAs(agentId);
}

function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

/** What makes two Opens the same Open (the ids aside): everything asked, canonical. */
function openDigest(input: OpenInput): string {
  return createHash('sha256').update(canonicalJson({
    topic: input.topic, participants: input.participants, intensity: input.intensity, debate_timeout_ms: input.debateTimeoutMs,
    profile: input.profileHint, preferences: input.preferences, schema: input.schema,
  })).digest('hex');
}

/**
 * Debates (RFC §17, §17.1–§17.4; README, "Debates"): open, rounds (Propose then Counter), early JSON Schema validation,
 * a DeltaSummary per round, evaluations scored deterministically first and blended with the inference engine's confidence,
 * acceptance and the stop rules of the EffectivePolicy, deadlock → the tie-break or a HITL DEBATE_DEADLOCK invocation,
 * every event fanned out as a NEGOTIATION envelope to every participant inside the transaction of its state change.
 */
export class Negotiations implements NegotiationQueries, Disposable {
  private readonly changed = new Emitter<NegotiationChange>();
  readonly onDidChange: Event<NegotiationChange> = this.changed.event;
  private readonly timers = new Map<string, Disposable[]>();
  /** Compiled proposal schemas by sha256 of the schema text, most recently used last (VALIDATOR_CACHE_SIZE). */
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly waiting = new Set<string>();
  /** Negotiations with event copies waiting for redelivery (NegotiationRecord.undelivered). */
  private readonly redeliver = new Set<string>();
  private retryTimer: Disposable | undefined;
  /** Redelivery attempts per deferred copy (negotiation, recipient, seq), kept in memory between record writes. */
  private readonly attempts = new Map<string, number>();
  private disposed = false;

  private readonly pruning: Disposable;
  private readonly retention: NegotiationRetention;

  constructor(protected readonly deps: NegotiationDeps) {
    this.retention = { ...NEGOTIATION_RETENTION, ...deps.retention };
    this.pruning = schedulePruning(deps.clock, this.retention.intervalMs, () => this.pruneFinished());
  }

  /** One bounded pruning run (logged `negotiation.pruned`); answers whether it left more. */
  pruneFinished(): boolean {
    if (this.disposed) return false;
    try {
      const before = this.deps.clock.now() - this.retention.maxAgeMs;
      return this.deps.store.transaction(() => {
        const result = this.deps.store.negotiation.pruneFinished(before, this.retention.maxFinished, this.retention.batch);
        if (result.deleted > 0) {
          this.deps.log.record({
            correlationId: this.deps.ids.uuid(), actor: ACTOR, eventType: 'negotiation.pruned',
            details: { negotiations: result.deleted, rounds: result.rounds, updated_before: isoUtc(before), max_finished: this.retention.maxFinished },
          });
        }
        return result.more;
      });
    } catch (err) {
      this.deps.log.internalError(ACTOR, 'negotiation-retention', err);
      return false;
    }
  }

  // ------------------------------------------------------------------ RPCs

  /**
   * The proposal schemas an Open (`open` given) or a Propose / Counter of `negotiationId` will compile, compiled
   * beforehand on the schema worker, off the event loop: the server awaits this, then makes the call, which finds them
   * cached (ajv held the event loop 0.6–0.7 s for a 64 KiB schema). Never throws: the call itself refuses.
   */
  async compileSchemas(negotiationId: string, open?: OpenInput): Promise<void> {
    const texts: string[] = [];
    if (open) {
      if (open.schema.trim() !== '' && Buffer.byteLength(open.schema) <= LIMITS.schema_bytes) texts.push(open.schema);
      try {
        const debateTimeoutMs = open.debateTimeoutMs > 0 ? Math.max(open.debateTimeoutMs, MIN_DEBATE_TIMEOUT_MS) : open.debateTimeoutMs;
        const { schema } = this.deps.policies.effectiveFor({ intensity: open.intensity, profileHint: open.profileHint, preferences: open.preferences, debateTimeoutMs, topic: open.topic });
        if (schema.trim() !== '') texts.push(schema);
      } catch {
        // Refused by the call itself.
      }
    } else {
      const rec = this.deps.store.negotiation.get(negotiationId);
      if (rec) texts.push(...[rec.schema, rec.policySchema ?? ''].filter((t) => t.trim() !== ''));
    }
    for (const text of texts) {
      if (!this.validators.has(createHash('sha256').update(text).digest('hex'))) await compileSchemaTextAsync(text, 'output');
    }
  }

  open(input: OpenInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('open', input.negotiationId, ctx, () => this.openNow(input, speaker, ctx));
  }

  propose(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    return this.refusing('propose', input.negotiationId, ctx, () => this.round('propose', input, speaker, ctx));
  }

  counter(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    return this.refusing('counter', input.negotiationId, ctx, () => this.round('counter', input, speaker, ctx));
  }

  evaluate(input: EvaluationInput, speaker: Speaker, ctx: CallContext): void {
    this.refusing('evaluate', input.negotiationId, ctx, () => {
      if (!Number.isFinite(input.confidenceScore) || input.confidenceScore < 0 || input.confidenceScore > 1) {
        throw fail('invalid', 'VALIDATION_ERROR', `confidence_score must be in [0, 1], not ${input.confidenceScore}`);
      }
      this.evaluation(input.negotiationId, {
        from: input.fromAgent, score: input.confidenceScore, llmConfidence: null, notes: input.notes, source: 'evaluate', at: this.deps.clock.now(),
      }, speaker, ctx);
    });
  }

  /** SchedulerPolicyService.SubmitEvaluation: an EvaluationReport counts as the agent's evaluation of the current round. */
  submitEvaluation(negotiationId: string, report: EvaluationReportInput, speaker: Speaker, ctx: CallContext): { readonly accepted: boolean; readonly reason: string } {
    try {
      this.refusing('submit_evaluation', negotiationId, ctx, () => {
        for (const [field, value] of [['deterministic_score', report.deterministicScore], ['llm_confidence', report.llmConfidence]] as const) {
          if (!Number.isFinite(value) || value < 0 || value > 1) throw fail('invalid', 'VALIDATION_ERROR', `report.${field} must be in [0, 1], not ${value}`);
        }
        this.evaluation(negotiationId, {
          from: report.fromAgent, score: report.deterministicScore, llmConfidence: report.llmConfidence > 0 ? report.llmConfidence : null,
          notes: report.notes, source: 'report', at: this.deps.clock.now(),
        }, speaker, ctx);
      });
      return { accepted: true, reason: '' };
    } catch (err) {
      if (err instanceof NegotiationError) return { accepted: false, reason: `${err.code}: ${err.message}` };
      throw err;
    }
  }

  decide(input: DecisionInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('decide', input.negotiationId, ctx, () => {
      const repeat = this.repeatedEnd(input.negotiationId, speaker, (r, who) => r.decision !== null
        && r.decision.decidedBy === (input.decidedBy || (who === undefined ? 'hitl' : 'consensus')) && r.decision.contentType === input.contentType
        && r.decision.result.equals(input.result) && r.decision.stopReason === 'decided');
      if (repeat) return repeat;
      // A participant may not end a debate that waits on a person; the operator may.
      const rec = this.live(input.negotiationId, speaker.kind !== 'agent');
      const participant = this.participantOrOperator(rec, speaker, 'decide');
      checkText('decided_by', input.decidedBy, LIMITS.decided_by);
      const decidedBy = input.decidedBy === '' ? (participant === undefined ? 'hitl' : 'consensus') : input.decidedBy;
      if (!(DECIDED_BY as readonly string[]).includes(decidedBy)) {
        throw fail('invalid', 'VALIDATION_ERROR', `decided_by must be one of ${DECIDED_BY.join(', ')}, not '${decidedBy.slice(0, 40)}'`);
      }
      if (input.result.byteLength > LIMITS.payload_bytes) throw fail('invalid', 'OVERSIZE_PAYLOAD', `result is larger than ${LIMITS.payload_bytes} bytes (${input.result.byteLength})`);
      if (input.result.byteLength > 0 || input.contentType !== '') checkContentType('content_type', input.contentType);
      let round = 0;
      if (participant !== undefined) {
        if (decidedBy !== 'consensus') {
          throw fail('permission', 'PERMISSION_DENIED', `decided_by '${decidedBy}' is the coordinator's or the operator's (a person decides through HITL); a participant decides by consensus only`);
        }
        round = this.agreedRound(rec, participant, input);
      }
      const op = this.op(false);
      const now = this.deps.clock.now();
      const pendingId = rec.pending?.invocationId;
      this.deps.store.transaction(() => {
        this.finish(rec, {
          decidedBy, contentType: input.contentType, result: Buffer.from(input.result), round, finalScore: rec.bestScore ?? 0,
          rationale: `Decide by ${participant ?? speakerName(speaker)}`, stopReason: 'decided', policyVersion: rec.effective.policyVersion, fallback: null, at: now,
        }, participant ?? speakerName(speaker), ctx, op);
        // After the event went out (a refusal before that leaves the invocation as it was).
        this.cancelPending(pendingId, speakerName(speaker), 'decided by Decide', ctx);
      });
      this.committed(rec, op);
      return rec;
    });
  }

  abort(negotiationId: string, reason: string, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('abort', negotiationId, ctx, () => {
      checkText('reason', reason, LIMITS.reason);
      const repeat = this.repeatedEnd(negotiationId, speaker, (r, who) => r.abort !== null && r.abort.errorCode === 'aborted'
        && r.abort.reason === reason && r.abort.by === (who ?? speakerName(speaker)));
      if (repeat) return repeat;
      const rec = this.live(negotiationId, true);
      const participant = this.participantOrOperator(rec, speaker, 'abort');
      const op = this.op(false);
      const pendingId = rec.pending?.invocationId;
      this.deps.store.transaction(() => {
        this.abortNow(rec, reason, 'aborted', participant ?? speakerName(speaker), 'aborted', ctx, op);
        this.cancelPending(pendingId, speakerName(speaker), 'aborted', ctx);
      });
      this.committed(rec, op);
      return rec;
    });
  }

  /** SchedulerPolicyService.HitlAction: decides the pending HITL invocation of this negotiation (the operator only). */
  hitlAction(negotiationId: string, action: string, rationale: string, speaker: Speaker, ctx: CallContext): { readonly ok: boolean; readonly reason: string } {
    const rec = this.deps.store.negotiation.get(negotiationId);
    if (!rec) return { ok: false, reason: `NOT_FOUND: no negotiation '${negotiationId.slice(0, LIMITS.negotiation_id)}'` };
    if (speaker.kind === 'agent') return { ok: false, reason: 'PERMISSION_DENIED: a HITL action is a person\'s: use the operator token (or the editor)' };
    if (!rec.pending) return { ok: false, reason: `FAILED_PRECONDITION: negotiation '${negotiationId}' waits on no HITL invocation (state ${rec.state})` };
    if (action.trim().toLowerCase() === 'modify') {
      return { ok: false, reason: 'VALIDATION_ERROR: modify needs the payload the person gives: decide the invocation in the editor or through HitlService' };
    }
    try {
      this.deps.hitl.decide(rec.pending.invocationId, { action, rationale }, speakerName(speaker), ctx);
      return { ok: true, reason: '' };
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'FAILED_PRECONDITION';
      return { ok: false, reason: `${code}: ${(err as Error).message}` };
    }
  }

  effectivePolicy(negotiationId: string): EffectivePolicy | undefined {
    return this.deps.store.negotiation.get(negotiationId)?.effective;
  }

  get(negotiationId: string): NegotiationRecord | undefined {
    return this.deps.store.negotiation.get(negotiationId);
  }

  list(limit = 200): NegotiationSummary[] {
    return this.deps.store.negotiation.list(limit).map((r) => ({
      id: r.id, topic: r.topic, participants: r.participants, intensity: r.intensity, state: r.state, rounds: r.rounds,
      bestScore: r.bestScore, stopReason: r.stopReason, pendingInvocationId: r.pending?.invocationId ?? null, openedAt: r.openedAt, updatedAt: r.updatedAt,
    }));
  }

  detail(id: string): NegotiationDetail | undefined {
    const record = this.deps.store.negotiation.get(id);
    return record ? { record, rounds: this.deps.store.negotiation.rounds(id) } : undefined;
  }

  /** At start: timers re-armed, HITL invocations settled while stopped applied, pending inference asked again. */
  restore(ctx: CallContext): void {
    // Event copies still waiting, of running and of ended negotiations alike (the newest 10,000).
    for (const rec of this.deps.store.negotiation.list(10_000)) if (rec.undelivered.length > 0) this.redeliver.add(rec.id);
    if (this.redeliver.size > 0) this.scheduleRetry();
    for (const rec of this.deps.store.negotiation.listUnfinished()) {
      try {
        if (rec.state === 'paused' && rec.pending) {
          const invocation = this.deps.hitl.get(rec.pending.invocationId);
          if (!invocation) {
            const op = this.op(false);
            this.deps.store.transaction(() => this.abortNow(rec, `the HITL invocation ${rec.pending?.invocationId} is gone`, 'hitl_unavailable', 'coordinator', rec.pending?.stopReason ?? 'hitl', ctx, op));
            this.committed(rec, op);
            continue;
          }
          if (invocation.state !== 'pending') this.applyHitl(rec.id, invocation);
          else this.waitFor(rec.id, invocation.id);
          continue;
        }
        this.arm(rec);
        const current = this.deps.store.negotiation.latestRound(rec.id);
        if (current?.llm === 'pending') this.askEngine(rec, current, ctx);
      } catch (err) {
        this.deps.log.internalError(ACTOR, rec.id, err);
      }
    }
  }

  dispose(): void {
    this.disposed = true;
    for (const list of this.timers.values()) for (const t of list) t.dispose();
    this.timers.clear();
    this.retryTimer?.dispose();
    this.pruning.dispose();
    this.changed.dispose();
  }

  // ------------------------------------------------------------------ open

  private openNow(input: OpenInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    const { negotiation } = this.deps.store;
    checkId('negotiation_id', input.negotiationId, LIMITS.negotiation_id);
    const correlationId = input.correlationId === '' ? input.negotiationId : input.correlationId;
    if (correlationId !== input.negotiationId) {
      throw fail('invalid', 'VALIDATION_ERROR', 'correlation_id must equal negotiation_id (RFC §17), or be empty');
    }
    if (input.topic.trim() === '') throw fail('invalid', 'VALIDATION_ERROR', 'topic is required');
    checkText('topic', input.topic, LIMITS.topic);
    if (input.participants.length > LIMITS.participants) {
      throw fail('invalid', 'VALIDATION_ERROR', `participants has ${input.participants.length} entries; at most ${LIMITS.participants}`);
    }
    for (const p of input.participants) checkId('participants entry', p, FIELD_LIMITS.registry.agent_id);
    if (new Set(input.participants).size !== input.participants.length) throw fail('invalid', 'VALIDATION_ERROR', 'participants lists an agent twice');
    if (input.participants.length < 2) throw fail('invalid', 'VALIDATION_ERROR', 'a negotiation needs at least two distinct participants');
    if (input.intensity !== '' && !DEBATE_INTENSITIES.includes(input.intensity)) {
      throw fail('invalid', 'VALIDATION_ERROR', `intensity must be one of ${DEBATE_INTENSITIES.join(', ')}`);
    }
    if (!Number.isFinite(input.debateTimeoutMs) || input.debateTimeoutMs < 0) throw fail('invalid', 'VALIDATION_ERROR', 'debate_timeout may not be negative');
    checkText('sw4rm-negotiation-profile', input.profileHint, LIMITS.profile);
    if (Buffer.byteLength(input.schema) > LIMITS.schema_bytes) {
      throw fail('invalid', 'VALIDATION_ERROR', `sw4rm-proposal-schema is larger than ${LIMITS.schema_bytes} bytes`);
    }
    if (speaker.kind === 'agent' && !input.participants.some((p) => speaker.mayActAs(p))) {
      throw fail('permission', 'PERMISSION_DENIED', `${speaker.label} may not open a negotiation it takes no part in: the opener is the operator or one of the participants`);
    }
    // Preferences are a participant's: an agent states only those of agents it may act as; the operator any participant's.
    for (const agent of Object.keys(input.preferences)) {
      const at = `preferences.${agent.slice(0, 64)}`;
      if (!input.participants.includes(agent)) throw fail('invalid', 'VALIDATION_ERROR', `${at}: '${agent.slice(0, 64)}' is not a participant of this negotiation`);
      if (speaker.kind === 'agent' && !speaker.mayActAs(agent)) throw fail('permission', 'PERMISSION_DENIED', `${at}: ${speaker.label} may not state preferences for ${agent.slice(0, 64)}`);
    }
    const existing = negotiation.get(input.negotiationId);
    if (existing) {
      if (existing.openDigest === openDigest(input)) return existing;
      throw fail('exists', 'ALREADY_EXISTS', `negotiation '${input.negotiationId}' exists with other content; choose another negotiation_id`);
    }
    // The agent that opens it (the operator: none): its open debates are capped, and it is the requester of the HITL
    // invocations the debate opens, so HitlPolicy.maxPendingPerRequester applies per opener.
    const opener = speaker.kind === 'agent' ? input.participants.find((p) => speaker.mayActAs(p)) : undefined;
    if (opener !== undefined) {
      const open = negotiation.countOpenBy(opener);
      if (open >= MAX_OPEN_PER_OPENER) {
        throw fail('exhausted', 'BUFFER_FULL', `${opener} has ${open} debates open that it opened (at most ${MAX_OPEN_PER_OPENER}): end one first`);
      }
    }
    for (const p of input.participants) {
      const agent = this.deps.agents.get(p);
      if (!agent) throw fail('not_found', 'NO_ROUTE', `participant '${p}' is not a registered agent; it must RegisterAgent first`);
      if (!modalityAccepts(agent.descriptor.modalitiesSupported, 'application/json')) {
        throw fail('precondition', 'UNSUPPORTED_MESSAGE_TYPE', `participant '${p}' does not accept application/json, the content type of NEGOTIATION events`);
      }
    }
    // A debate_timeout below the minimum is raised to it (a debate that times out at once would only make HITL work).
    const debateTimeoutMs = input.debateTimeoutMs > 0 ? Math.max(input.debateTimeoutMs, MIN_DEBATE_TIMEOUT_MS) : input.debateTimeoutMs;
    const { effective, schema: policySchema } = this.deps.policies.effectiveFor({
      intensity: input.intensity, profileHint: input.profileHint, preferences: input.preferences, debateTimeoutMs, topic: input.topic,
    });
    // The opener's schema does not replace the operator's for the topic: with both, a draft must satisfy both.
    const own = input.schema.trim() !== '';
    const schema = own ? input.schema : policySchema;
    const alsoPolicy = own && policySchema.trim() !== '' ? policySchema : '';
    // Compiled into locals: kept (cached) only once the Open is committed, so a refused Open leaves nothing behind.
    const compiled = [
      ...(schema.trim() !== '' ? [this.compiled(schema, own ? 'sw4rm-proposal-schema' : 'the policy\'s proposal schema')] : []),
      ...(alsoPolicy !== '' ? [this.compiled(alsoPolicy, 'the policy\'s proposal schema')] : []),
    ];
    const now = this.deps.clock.now();
    const rec: NegotiationRecord = {
      id: input.negotiationId, correlationId, topic: input.topic, participants: [...input.participants],
      intensity: effective.profile, openedBy: speakerName(speaker), openedAt: now,
      ...(opener !== undefined ? { openedByAgent: opener } : {}), hitlRequester: opener ?? speakerName(speaker),
      deadlineAt: now + effective.debateTimeoutMs, effective, schema, ...(alsoPolicy !== '' ? { policySchema: alsoPolicy } : {}), openDigest: openDigest(input), state: 'open', rounds: 0, tokensUsed: 0, oscillations: 0,
      roundStartedAt: now, pending: null, decision: null, abort: null, events: 0, bestRound: 0, bestScore: null, stopReason: null,
      undelivered: [], updatedAt: now,
    };
    const op = this.op(true);
    this.deps.store.transaction(() => {
      this.record(rec, 'negotiation.opened', {
        topic: rec.topic, participants: rec.participants, intensity: rec.intensity, opened_by: rec.openedBy, deadline: isoUtc(rec.deadlineAt),
        profile: effective.profile, policy_version: effective.policyVersion, policy: policyWire(effective.policy), applied: effective.applied,
        schema: schema === '' ? undefined : 'yes',
      }, ctx);
      this.fanout(rec, { kind: 'open' }, ctx, op);
      this.fanout(rec, { kind: 'policy' }, ctx, op);
      this.deps.store.negotiation.put(rec);
    });
    op.after.push(() => { for (const c of compiled) this.remember(c.key, c.validate); });
    this.committed(rec, op);
    return rec;
  }

  // ------------------------------------------------------------------ rounds

  private round(kind: 'propose' | 'counter', input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    // A retry of the call that made the latest round (same author, kind and bytes) is answered with that round, whatever
    // the state (the retried call itself may have ended or paused the debate).
    const known = this.known(input.negotiationId);
    if (known) {
      this.mustSpeakAs(known, input.fromAgent, speaker);
      const last = this.deps.store.negotiation.latestRound(known.id);
      if (last && last.kind === kind && last.from === input.fromAgent && last.contentType === input.contentType && last.payload.equals(input.payload)) return last;
    }
    const rec = this.live(input.negotiationId, false);
    this.mustSpeakAs(rec, input.fromAgent, speaker);
    checkContentType('content_type', input.contentType);
    if (input.payload.byteLength > LIMITS.payload_bytes) {
      throw fail('invalid', 'OVERSIZE_PAYLOAD', `payload is larger than ${LIMITS.payload_bytes} bytes (${input.payload.byteLength})`);
    }
    const rounds = this.deps.store.negotiation.rounds(rec.id);
    const latest = rounds.at(-1);
    if (kind === 'propose' && rounds.length > 0) {
      throw fail('precondition', 'OUT_OF_ORDER', `negotiation '${rec.id}' has ${rounds.length} round(s): round 1 is the only Propose; send a Counter`);
    }
    if (kind === 'counter' && rounds.length === 0) {
      throw fail('precondition', 'OUT_OF_ORDER', `negotiation '${rec.id}' has no proposal yet: round 1 is a Propose`);
    }
    const policy = rec.effective.policy;
    if (rounds.length >= policy.maxRounds) {
      throw fail('precondition', 'MAX_ROUNDS', `negotiation '${rec.id}' has had its ${policy.maxRounds} rounds (max_rounds)`);
    }
    const tokens = tokensOf(input.payload);
    if (policy.tokenBudgetPerRound > 0 && tokens > policy.tokenBudgetPerRound) {
      throw fail('exhausted', 'TOKEN_BUDGET_EXCEEDED', `the payload is ${tokens} tokens (⌈${input.payload.byteLength} bytes / 4⌉); token_budget_per_round is ${policy.tokenBudgetPerRound}; no round was used`);
    }
    const json = this.checkDraft(rec, input);
    const n = rounds.length + 1;
    const delta = this.deltaOf(latest, input.payload, json);
    const twoBack = rounds.length >= 2 ? rounds[rounds.length - 2] : undefined;
    const oscillation = twoBack !== undefined && this.sameContract(twoBack, input.contentType, input.payload, json);
    const now = this.deps.clock.now();
    const round: RoundRecord = {
      negotiationId: rec.id, n, kind, from: input.fromAgent, contentType: input.contentType, payload: Buffer.from(input.payload), tokens, at: now,
      delta: delta.summary, evaluations: [], deterministicScore: null, llmConfidence: null, score: null, oscillation, llm: 'none', llmNotes: '',
    };
    const op = this.op(true);
    this.deps.store.transaction(() => {
      rec.rounds = n;
      rec.tokensUsed += tokens;
      if (oscillation) rec.oscillations++;
      rec.roundStartedAt = now;
      // A round still waiting on the engine is superseded: its engine answer would no longer count.
      if (latest?.llm === 'pending') {
        this.deps.store.negotiation.putRound({ ...latest, llm: 'failed', llmNotes: `superseded by round ${n} before the inference engine answered` });
      }
      this.deps.store.negotiation.putRound(round);
      this.record(rec, 'negotiation.round', {
        superseded_pending: latest?.llm === 'pending' ? latest.n : undefined,
        round: n, kind, from: round.from, content_type: round.contentType, bytes: round.payload.byteLength, tokens, tokens_used: rec.tokensUsed,
        magnitude: delta.summary.magnitude, changed_paths: delta.summary.pathCount, oscillation, oscillations: rec.oscillations,
        converged: latest !== undefined && delta.summary.magnitude <= policy.diffTolerance,
      }, ctx);
      this.fanout(rec, { kind, round: n }, ctx, op, round);
      this.artifact(rec, 'contract', `v${n}`, round.contentType, round.payload, ctx);
      if (latest) this.artifact(rec, 'diff', `v${n - 1}_to_v${n}`, 'application/json', Buffer.from(JSON.stringify(delta.artifact)), ctx);
      const total = policy.totalTokenBudget;
      if (rec.oscillations > policy.oscillationLimit) this.stop(rec, 'oscillation', ctx, op);
      else if (total > 0 && rec.tokensUsed > total) this.stop(rec, 'budget', ctx, op);
      this.deps.store.negotiation.put(rec);
    });
    this.committed(rec, op);
    return round;
  }

  /** JSON drafts parsed; validated against the negotiation's schema (early validation, RFC §17.3). Throws VALIDATION_ERROR. */
  private checkDraft(rec: NegotiationRecord, input: ProposalInput): { value: unknown } | undefined {
    const isJson = isJsonContentType(input.contentType);
    if (!isJson) {
      if (rec.schema !== '' && rec.effective.policy.scoring.requireSchemaValid) {
        throw fail('invalid', 'VALIDATION_ERROR', `negotiation '${rec.id}' has a proposal schema (require_schema_valid): proposals are application/json, not ${input.contentType}; no round was used`);
      }
      return undefined;
    }
    const parsed = parseBoundedJson(input.payload.toString('utf8'), { what: 'the payload', maxBytes: LIMITS.payload_bytes, maxValues: LIMITS.payload_json_values });
    if (!parsed.ok) throw fail('invalid', 'VALIDATION_ERROR', `${parsed.reason}; no round was used`);
    for (const [schema, which] of [[rec.schema, 'the proposal schema'], [rec.policySchema ?? '', 'the policy\'s proposal schema for the topic']] as const) {
      if (schema === '') continue;
      const validate = this.validatorFor(schema, which);
      if (!validate(parsed.value)) {
        const first = validate.errors?.[0];
        const where = first?.instancePath || '/';
        throw fail('invalid', 'VALIDATION_ERROR', `the draft does not match ${which} at ${where}: ${first?.message ?? 'is invalid'}; no round was used`);
      }
    }
    return { value: parsed.value };
  }

  /** The validator of a schema: from the cache, or compiled and cached. */
  private validatorFor(schema: string, what: string): ValidateFunction {
    const { key, validate } = this.compiled(schema, what);
    this.remember(key, validate);
    return validate;
  }

  /** The validator of a schema, from the cache or compiled, without caching it. Throws VALIDATION_ERROR. */
  private compiled(schema: string, what: string): { key: string; validate: ValidateFunction } {
    const key = createHash('sha256').update(schema).digest('hex');
    const cached = this.validators.get(key);
    if (cached) return { key, validate: cached };
    const verdict = compileSchemaText(schema, 'output');
    if (!verdict.ok) throw fail('invalid', 'VALIDATION_ERROR', `${what} is not a usable JSON Schema: ${verdict.why}`);
    return { key, validate: verdict.validate };
  }

  private remember(key: string, validate: ValidateFunction): void {
    this.validators.delete(key);
    this.validators.set(key, validate);
    while (this.validators.size > VALIDATOR_CACHE_SIZE) this.validators.delete(this.validators.keys().next().value as string);
  }

  private deltaOf(previous: RoundRecord | undefined, payload: Buffer, json: { value: unknown } | undefined): { summary: DeltaSummary; artifact: Record<string, unknown> } {
    if (!previous) return { summary: { magnitude: 1, changedPaths: [], pathCount: 0, method: 'none' }, artifact: {} };
    const header = { from: `v${previous.n}`, to: `v${previous.n + 1}` };
    if (json && isJsonContentType(previous.contentType)) {
      // A round of more values (stored before the limit) is compared as text.
      const before = parseBoundedJson(previous.payload.toString('utf8'), { what: 'the previous round', maxValues: LIMITS.payload_json_values });
      if (before.ok) {
        const { summary, delta } = jsonDeltaSummary(before.value, json.value);
        const artifact: Record<string, unknown> = { ...header, method: summary.method, magnitude: summary.magnitude, changed_paths: summary.changedPaths, path_count: summary.pathCount, delta: delta ?? null };
        if (summary.method === 'json-coarse') return { summary, artifact: { ...artifact, delta: null, delta_omitted: 'too large to diff structurally (README, "Debates")' } };
        if (Buffer.byteLength(JSON.stringify(artifact)) > FIELD_LIMITS.activity.artifact_content_bytes) {
          return { summary, artifact: { ...artifact, delta: null, delta_omitted: 'larger than an artifact may be' } };
        }
        return { summary, artifact };
      }
    }
    const a = previous.payload.toString('utf8');
    const b = payload.toString('utf8');
    const summary = textDeltaSummary(a, b);
    let unified = summary.method === 'text-coarse' ? '' : unifiedDiff(a, b, `contract_v${previous.n}`, `contract_v${previous.n + 1}`) ?? '';
    if (Buffer.byteLength(unified) > FIELD_LIMITS.activity.artifact_content_bytes / 2) unified = '';
    return { summary, artifact: { ...header, method: summary.method, magnitude: summary.magnitude, changed_paths: summary.changedPaths, path_count: summary.pathCount, unified } };
  }

  private sameContract(round: RoundRecord, contentType: string, payload: Buffer, json: { value: unknown } | undefined): boolean {
    if (round.payload.equals(payload)) return true;
    if (!json || !isJsonContentType(round.contentType) || !isJsonContentType(contentType)) return false;
    const other = parseBoundedJson(round.payload.toString('utf8'), { what: 'round', maxValues: LIMITS.payload_json_values });
    return other.ok && jsonSame(other.value, json.value);
  }

  // ------------------------------------------------------------------ evaluations and scoring

  private evaluation(negotiationId: string, evaluation: RoundEvaluation, speaker: Speaker, ctx: CallContext): void {
    // The same evaluation of the latest round again (a retry) is answered OK whatever the state (it may have ended it).
    const known = this.known(negotiationId);
    if (known) {
      this.mustSpeakAs(known, evaluation.from, speaker);
      const same = this.deps.store.negotiation.latestRound(known.id)?.evaluations.find((e) => e.from === evaluation.from);
      if (same && same.score === clampScore(evaluation.score) && same.notes === evaluation.notes && same.llmConfidence === evaluation.llmConfidence) return;
    }
    const rec = this.live(negotiationId, false);
    this.mustSpeakAs(rec, evaluation.from, speaker);
    checkText('notes', evaluation.notes, LIMITS.notes);
    const rounds = this.deps.store.negotiation.rounds(rec.id);
    const current = rounds.at(-1);
    if (!current) throw fail('precondition', 'OUT_OF_ORDER', `negotiation '${rec.id}' has no proposal to evaluate yet`);
    if (current.from === evaluation.from) throw fail('precondition', 'OUT_OF_ORDER', `${evaluation.from} wrote round ${current.n}; the other participants evaluate it`);
    const before = current.evaluations.find((e) => e.from === evaluation.from);
    if (before) {
      throw fail('exists', 'ALREADY_EXISTS', `${evaluation.from} has evaluated round ${current.n} already`);
    }
    const evaluations = [...current.evaluations, { ...evaluation, score: clampScore(evaluation.score) }];
    const det = deterministicScore(evaluations);
    const policy = rec.effective.policy;
    const complete = this.othersOf(rec, current).every((p) => evaluations.some((e) => e.from === p));
    const askEngine = complete && policy.scoring.llmWeight > 0 && this.deps.inference.engineAgent() !== undefined;
    const llm = askEngine ? null : reportedConfidence(evaluations);
    const round: RoundRecord = {
      ...current, evaluations, deterministicScore: det, llmConfidence: llm, score: det === null ? null : blend(det, llm, policy.scoring.llmWeight),
      llm: askEngine ? 'pending' : 'none',
    };
    const op = this.op(true);
    this.deps.store.transaction(() => {
      this.deps.store.negotiation.putRound(round);
      this.noteBest(rec, round);
      this.record(rec, 'negotiation.evaluated', {
        round: round.n, from: evaluation.from, source: evaluation.source, score: evaluation.score, deterministic_score: det, score_now: round.score,
        complete, llm: round.llm,
      }, ctx);
      this.fanout(rec, { kind: 'evaluate', round: round.n, from: evaluation.from }, ctx, op, round);
      this.artifact(rec, 'score', `v${round.n}:${evaluation.from}`.slice(0, FIELD_LIMITS.activity.artifact_version), 'application/json', Buffer.from(JSON.stringify({
        negotiation_id: rec.id, round: round.n, from_agent: evaluation.from, deterministic_score: evaluation.score,
        llm_confidence: evaluation.llmConfidence ?? 0, notes: evaluation.notes, delta: this.deltaWire(round.delta),
      })), ctx);
      if (complete && !askEngine) this.judge(rec, round, ctx, op);
      this.deps.store.negotiation.put(rec);
    });
    if (askEngine) op.after.push(() => this.askEngine(rec, round, ctx));
    this.committed(rec, op);
  }

  private othersOf(rec: NegotiationRecord, round: RoundRecord): string[] {
    return rec.participants.filter((p) => p !== round.from);
  }

  private askEngine(rec: NegotiationRecord, round: RoundRecord, ctx: CallContext): void {
    // No engine (e.g. none registered again after a restart): the round is judged on its deterministic score; a built-in
    // heuristic's answer is never recorded as the engine's.
    if (this.deps.inference.engineAgent() === undefined) {
      this.engineAnswered(rec.id, round.n, null, 'no inference engine is registered (any more): the deterministic score stands', ctx);
      return;
    }
    const rounds = this.deps.store.negotiation.rounds(rec.id);
    const previous = rounds.find((r) => r.n === round.n - 1);
    let answer: Promise<{ confidence: number; notes: string }>;
    try {
      answer = this.deps.inference.evaluateDebate({
        negotiationId: rec.id, proposalA: previous ? previous.payload.toString('utf8') : '', proposalB: round.payload.toString('utf8'), intensity: rec.intensity,
      }, ctx);
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer.then(
      (verdict) => this.engineAnswered(rec.id, round.n, verdict.confidence, verdict.notes, ctx),
      (err: unknown) => this.engineAnswered(rec.id, round.n, null, `the inference engine failed: ${err instanceof Error ? err.message : String(err)}`, ctx),
    ).catch((err: unknown) => this.deps.log.internalError(ACTOR, rec.id, err));
  }

  private engineAnswered(id: string, n: number, confidence: number | null, notes: string, ctx: CallContext): void {
    if (this.disposed) return;
    const rec = this.deps.store.negotiation.get(id);
    if (!rec || rec.state !== 'open') return;
    const current = this.deps.store.negotiation.rounds(id).at(-1);
    if (!current || current.n !== n || current.llm !== 'pending') return;
    const ok = confidence !== null && Number.isFinite(confidence);
    const llm = ok ? clampScore(confidence) : null;
    const round: RoundRecord = {
      ...current, llm: ok ? 'answered' : 'failed', llmConfidence: llm, llmNotes: notes.slice(0, LIMITS.notes),
      score: current.deterministicScore === null ? null : blend(current.deterministicScore, llm, rec.effective.policy.scoring.llmWeight),
    };
    const op = this.op(false);
    this.deps.store.transaction(() => {
      this.deps.store.negotiation.putRound(round);
      this.noteBest(rec, round);
      this.record(rec, 'negotiation.scored', {
        round: n, deterministic_score: round.deterministicScore, llm_confidence: llm, llm_weight: rec.effective.policy.scoring.llmWeight, score: round.score,
        llm: round.llm, notes: round.llmNotes || undefined,
      }, ctx, ok ? 'INFO' : 'WARN');
      this.judge(rec, round, ctx, op);
      this.deps.store.negotiation.put(rec);
    });
    this.committed(rec, op);
  }

  /** After `round` was (re)scored and stored: the best-scored round of all (the later one on a tie). */
  private noteBest(rec: NegotiationRecord, round: RoundRecord): void {
    if (round.score === null) return;
    const best = bestRound(this.deps.store.negotiation.rounds(rec.id).map((r) => (r.n === round.n ? round : r)));
    rec.bestRound = best?.n ?? 0;
    rec.bestScore = best?.score ?? null;
  }

  /** Every other participant evaluated `round` and its score is final: accept, pause, or stop on max_rounds. */
  private judge(rec: NegotiationRecord, round: RoundRecord, ctx: CallContext, op: Op): void {
    const policy = rec.effective.policy;
    const score = round.score ?? 0;
    // Unanimity (RFC §17): every other participant's own evaluation at or above the threshold, and the blended score too.
    const unanimous = this.othersOf(rec, round).every((p) => round.evaluations.some((e) => e.from === p && e.score >= policy.scoreThreshold));
    if (unanimous && score >= policy.scoreThreshold) {
      if (policy.hitl === 'PauseOnFinalAccept') {
        this.openHitl(rec, 'final_accept', 'threshold_met', ctx, op);
        return;
      }
      this.finish(rec, {
        decidedBy: 'consensus', contentType: round.contentType, result: round.payload, round: round.n, finalScore: score,
        rationale: `Every other participant evaluated round ${round.n} (by ${round.from}) at or above score_threshold ${policy.scoreThreshold}; its score ${score.toFixed(3)} too.`,
        stopReason: 'threshold_met', policyVersion: rec.effective.policyVersion, fallback: null, at: this.deps.clock.now(),
      }, 'coordinator', ctx, op);
      return;
    }
    if (round.n >= policy.maxRounds) {
      this.stop(rec, 'max_rounds', ctx, op);
      return;
    }
    if (policy.hitl === 'PauseBetweenRounds') this.openHitl(rec, 'pause_between_rounds', 'hitl', ctx, op);
  }

  // ------------------------------------------------------------------ stops, tie-break, HITL

  /** A stop without acceptance is a deadlock: the tie-break of the policy version the negotiation runs under. */
  private stop(rec: NegotiationRecord, reason: StopReason, ctx: CallContext, op: Op): void {
    const tieBreak = this.tieBreakOf(rec);
    if (tieBreak === 'hitl') {
      this.openHitl(rec, 'deadlock', reason, ctx, op);
      return;
    }
    if (tieBreak === 'highest_score' && rec.bestRound > 0) {
      const best = this.deps.store.negotiation.rounds(rec.id).find((r) => r.n === rec.bestRound);
      if (best) {
        this.finish(rec, {
          decidedBy: 'policy', contentType: best.contentType, result: best.payload, round: best.n, finalScore: best.score ?? 0,
          rationale: `Stopped (${reason}) without consensus; tie-break highest_score chose round ${best.n} (score ${(best.score ?? 0).toFixed(3)}).`,
          stopReason: reason, policyVersion: rec.effective.policyVersion, fallback: null, at: this.deps.clock.now(),
        }, 'coordinator', ctx, op);
        return;
      }
    }
    const why = tieBreak === 'abort' ? 'tie-break abort' : 'tie-break highest_score found no scored round';
    this.abortNow(rec, `stopped (${reason}) without consensus: ${why}`, reason, 'coordinator', reason, ctx, op);
  }

  private tieBreakOf(rec: NegotiationRecord): TieBreak {
    const version = Number(/^v(\d+)$/.exec(rec.effective.policyVersion)?.[1] ?? NaN);
    const set = Number.isFinite(version) ? this.deps.policies.version(version) : undefined;
    return (set ?? this.deps.policies.current()).tieBreak;
  }

  private openHitl(rec: NegotiationRecord, why: 'deadlock' | 'pause_between_rounds' | 'final_accept', stopReason: StopReason, ctx: CallContext, op: Op): void {
    const rounds = this.deps.store.negotiation.rounds(rec.id);
    const latest = rounds.at(-1);
    const best = rounds.find((r) => r.n === rec.bestRound);
    const focus = why === 'deadlock' ? best ?? latest : latest;
    const summaries = {
      deadlock: `Debate "${rec.topic}" stopped (${stopReason}) after ${rec.rounds} round(s) without consensus. Approve accepts the best-scored round${best ? ` (round ${best.n}, score ${(best.score ?? 0).toFixed(3)})` : ''}; modify decides with the payload you give; deny aborts.`,
      final_accept: `Debate "${rec.topic}": round ${latest?.n ?? 0} reached the score threshold (PauseOnFinalAccept). Approve accepts it; modify decides with the payload you give; deny aborts.`,
      pause_between_rounds: `Debate "${rec.topic}": round ${latest?.n ?? 0} was evaluated (score ${(latest?.score ?? 0).toFixed(3)}, PauseBetweenRounds). Approve lets the next round start; modify decides with the payload you give; deny aborts.`,
    };
    const request: InvocationRequest = {
      reasonType: why === 'deadlock' ? 'DEBATE_DEADLOCK' : 'MANUAL_OVERRIDE',
      requester: rec.hitlRequester ?? NEGOTIATION_HITL_COMPONENT,
      correlationId: rec.id,
      subject: { repoId: '', worktreeId: '', taskId: '' },
      context: {
        summary: summaries[why],
        facts: {
          negotiation_id: rec.id, topic: rec.topic, participants: rec.participants, why, stop_reason: stopReason, rounds: rec.rounds,
          best_round: rec.bestRound, best_score: rec.bestScore, tokens_used: rec.tokensUsed, oscillations: rec.oscillations,
          policy_version: rec.effective.policyVersion, profile: rec.effective.profile,
          scores: rounds.map((r) => ({ round: r.n, from: r.from, score: r.score, magnitude: r.delta.magnitude })),
        },
        diffs: focus ? this.hitlDiffs(rounds, focus) : [],
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
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.open(request, { kind: 'internal', component: NEGOTIATION_HITL_COMPONENT }, ctx).invocation;
    } catch (err) {
      // No invocation could be opened (e.g. too many pending): as with no human available, deny by default.
      this.abortNow(rec, `no HITL invocation could be opened: ${(err as Error).message}`, 'hitl_unavailable', 'coordinator', stopReason, ctx, op);
      return;
    }
    rec.state = 'paused';
    rec.pending = { invocationId: invocation.id, why, stopReason };
    rec.stopReason = why === 'pause_between_rounds' ? null : stopReason;
    this.record(rec, 'negotiation.paused', { why, stop_reason: stopReason, invocation_id: invocation.id, reason_type: request.reasonType, best_round: rec.bestRound }, ctx);
    op.after.push(() => this.waitFor(rec.id, invocation.id));
  }

  private hitlDiffs(rounds: readonly RoundRecord[], focus: RoundRecord): HitlDiff[] {
    const previous = rounds.find((r) => r.n === focus.n - 1);
    const title = previous ? `round ${previous.n} → round ${focus.n} (${focus.from})` : `round ${focus.n} (${focus.from})`;
    if (focus.payload.byteLength > HITL_DIFF_MAX_BYTES || (previous && previous.payload.byteLength > HITL_DIFF_MAX_BYTES)) {
      return [{ title: `${title}: too large to show here; see the contract_v${focus.n}.json artifact`, before: '', after: '' }];
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

  private waitFor(id: string, invocationId: string): void {
    const key = `${id}\u0000${invocationId}`;
    if (this.waiting.has(key)) return;
    this.waiting.add(key);
    this.deps.hitl.whenSettled(invocationId).then(
      (invocation) => {
        this.waiting.delete(key);
        this.applyHitl(id, invocation);
      },
      (err: unknown) => {
        this.waiting.delete(key);
        if (!this.disposed) this.deps.log.internalError(ACTOR, id, err);
      },
    );
  }

  /** A settled HITL invocation of a paused negotiation: approve / modify / deny, a rule's or a fallback's answer recorded as such. */
  private applyHitl(id: string, invocation: HitlInvocation): void {
    if (this.disposed) return;
    const rec = this.deps.store.negotiation.get(id);
    if (!rec || rec.state !== 'paused' || rec.pending?.invocationId !== invocation.id || !invocation.decision) return;
    const pending = rec.pending;
    const decision = invocation.decision;
    const origin = decision.origin;
    const fallback = origin.kind === 'fallback' ? { policy: origin.policy ?? '', trigger: origin.trigger ?? '' } : null;
    const decidedBy = origin.kind === 'human' ? 'hitl' : 'policy';
    const how = origin.kind === 'human' ? `${origin.by} decided ${decision.action}` : origin.kind === 'fallback'
      ? `fallback ${origin.policy} (${origin.trigger}) applied ${decision.action}` : origin.kind === 'rule' ? `rule '${origin.rule}' applied ${decision.action}` : `cancelled by ${origin.by}`;
    const ctx: CallContext = { correlationId: rec.id };
    const op = this.op(false);
    const now = this.deps.clock.now();
    try {
      this.deps.store.transaction(() => {
        rec.pending = null;
        const rounds = this.deps.store.negotiation.rounds(rec.id);
        if (decision.action === 'approve') {
          if (pending.why === 'pause_between_rounds') {
            rec.state = 'open';
            rec.roundStartedAt = now;
            this.record(rec, 'negotiation.resumed', { invocation_id: invocation.id, how, rationale: decision.rationale, fallback: fallback ?? undefined }, ctx);
            this.deps.store.negotiation.put(rec);
            return;
          }
          const chosen = pending.why === 'final_accept' ? rounds.at(-1) : rounds.find((r) => r.n === rec.bestRound);
          if (!chosen) {
            this.abortNow(rec, `${how}, but no round has a score to accept`, 'no_scored_round', 'coordinator', pending.stopReason, ctx, op, fallback);
            return;
          }
          this.finish(rec, {
            decidedBy, contentType: chosen.contentType, result: chosen.payload, round: chosen.n, finalScore: chosen.score ?? 0,
            rationale: `${how}: round ${chosen.n} accepted. ${decision.rationale}`.trim(), stopReason: pending.stopReason,
            policyVersion: rec.effective.policyVersion, fallback, at: now,
          }, origin.by, ctx, op);
          return;
        }
        if (decision.action === 'modify') {
          const text = typeof decision.payload === 'string';
          const result = Buffer.from(text ? (decision.payload as string) : JSON.stringify(decision.payload ?? null), 'utf8');
          this.finish(rec, {
            decidedBy, contentType: text ? 'text/plain' : 'application/json', result, round: 0, finalScore: rec.bestScore ?? 0,
            rationale: `${how}: the person's payload decides. ${decision.rationale}`.trim(), stopReason: pending.stopReason,
            policyVersion: rec.effective.policyVersion, fallback, at: now,
          }, origin.by, ctx, op);
          return;
        }
        const errorCode = fallback ? (fallback.trigger === 'hitl_unavailable' ? 'hitl_unavailable' : 'hitl_timeout') : decision.action === 'defer' ? 'hitl_deferred' : 'hitl_denied';
        this.abortNow(rec, `${how}: ${decision.rationale}`, errorCode, origin.by, pending.stopReason, ctx, op, fallback);
      });
    } catch (err) {
      this.deps.log.internalError(ACTOR, rec.id, err);
      return;
    }
    this.committed(rec, op);
  }

  /** Decide or Abort while a HITL invocation waits: it is withdrawn. */
  private cancelPending(id: string | undefined, by: string, why: string, ctx: CallContext): void {
    if (id === undefined) return;
    if (this.deps.hitl.get(id)?.state === 'pending') this.deps.hitl.cancel(id, by, `negotiation ${why}`, ctx);
  }

  // ------------------------------------------------------------------ ends

  private finish(rec: NegotiationRecord, decision: NegotiationDecision, by: string, ctx: CallContext, op: Op): void {
    rec.state = 'decided';
    rec.decision = decision;
    rec.stopReason = decision.stopReason;
    rec.pending = null;
    this.record(rec, 'negotiation.decided', {
      decided_by: decision.decidedBy, by, round: decision.round, final_score: decision.finalScore, stop_reason: decision.stopReason,
      policy_version: decision.policyVersion, fallback: decision.fallback ?? undefined, content_type: decision.contentType, bytes: decision.result.byteLength,
    }, ctx, decision.fallback ? 'WARN' : 'INFO');
    this.fanout(rec, { kind: 'decide' }, ctx, op);
    this.artifact(rec, 'decision', 'final', 'application/json', Buffer.from(JSON.stringify({
      negotiation_id: rec.id, decided_by: decision.decidedBy, final_score: decision.finalScore, rationale: decision.rationale, stop_reason: decision.stopReason,
      policy_version: decision.policyVersion, round: decision.round, content_type: decision.contentType, fallback: decision.fallback, decided_at: isoUtc(decision.at),
    })), ctx);
    this.deps.store.negotiation.put(rec);
  }

  private abortNow(rec: NegotiationRecord, reason: string, errorCode: string, by: string, stopReason: StopReason, ctx: CallContext, op: Op,
    fallback: { readonly policy: string; readonly trigger: string } | null = null): void {
    const now = this.deps.clock.now();
    rec.state = 'aborted';
    rec.abort = { reason, errorCode, by, at: now, fallback };
    rec.stopReason = stopReason;
    rec.pending = null;
    this.record(rec, 'negotiation.aborted', { reason, error_code: errorCode, by, stop_reason: stopReason, fallback: fallback ?? undefined }, ctx, by === 'coordinator' || fallback ? 'WARN' : 'INFO');
    this.fanout(rec, { kind: 'abort' }, ctx, op);
    this.artifact(rec, 'decision', 'final', 'application/json', Buffer.from(JSON.stringify({
      negotiation_id: rec.id, decided_by: fallback ? 'policy' : by === 'coordinator' ? 'policy' : 'abort', final_score: rec.bestScore ?? 0, rationale: reason,
      stop_reason: stopReason, policy_version: rec.effective.policyVersion, aborted: true, error_code: errorCode, fallback, decided_at: isoUtc(now),
    })), ctx);
    this.deps.store.negotiation.put(rec);
  }

  // ------------------------------------------------------------------ timers

  private arm(rec: NegotiationRecord): void {
    this.disarm(rec.id);
    if (rec.state !== 'open' || this.disposed) return;
    const now = this.deps.clock.now();
    const list: Disposable[] = [];
    const policy = rec.effective.policy;
    if (policy.roundTimeoutMs > 0) {
      const due = rec.roundStartedAt + policy.roundTimeoutMs;
      list.push(this.deps.clock.setTimer(Math.max(0, due - now), () => this.timedOut(rec.id, 'round', due)));
    }
    if (rec.deadlineAt > rec.openedAt) {
      list.push(this.deps.clock.setTimer(Math.max(0, rec.deadlineAt - now), () => this.timedOut(rec.id, 'debate', rec.deadlineAt)));
    }
    this.timers.set(rec.id, list);
  }

  private disarm(id: string): void {
    for (const t of this.timers.get(id) ?? []) t.dispose();
    this.timers.delete(id);
  }

  private timedOut(id: string, which: 'round' | 'debate', due: number): void {
    if (this.disposed) return;
    try {
      const rec = this.deps.store.negotiation.get(id);
      if (!rec || rec.state !== 'open') return;
      const now = this.deps.clock.now();
      const stillDue = which === 'round' ? rec.roundStartedAt + rec.effective.policy.roundTimeoutMs : rec.deadlineAt;
      if (stillDue !== due || now < due) return;
      const ctx: CallContext = { correlationId: rec.id };
      const op = this.op(false);
      this.deps.store.transaction(() => {
        this.deps.log.record({
          correlationId: rec.id, actor: ACTOR, eventType: 'negotiation.timeout', level: 'WARN',
          details: { negotiation_id: rec.id, which, round: rec.rounds, due: isoUtc(due), limit_ms: which === 'round' ? rec.effective.policy.roundTimeoutMs : rec.effective.debateTimeoutMs },
        });
        this.stop(rec, 'timeout', ctx, op);
        rec.updatedAt = now;
        this.deps.store.negotiation.put(rec);
      });
      this.committed(rec, op);
    } catch (err) {
      this.deps.log.internalError(ACTOR, id, err);
    }
  }

  // ------------------------------------------------------------------ fan-out

  /**
   * One §17.1 event to every participant, as a NEGOTIATION envelope from `coordinator` (correlation_id = negotiation_id),
   * inside the caller's transaction. Every copy goes to the recipient's STANDARD lane (the coordinator's), FIFO per
   * recipient, so events arrive in the order sent. A refusable call (Op.refusable) whose copies were ALL refused by the
   * router (none accepted, at least one refused with a code other than NO_ROUTE) is refused with the router's code and
   * nothing of it is kept. Otherwise a refused copy, a copy to a participant that is no longer registered (NO_ROUTE) and
   * a copy behind an earlier waiting one are kept in `undelivered` and retried in order (given up after
   * UNDELIVERED_GIVE_UP_MS), each logged WARN `negotiation.event_deferred`.
   */
  private fanout(rec: NegotiationRecord, event: { kind: NegotiationEventKind; round?: number; from?: string }, ctx: CallContext, op: Op, round?: RoundRecord): void {
    const seq = rec.events + 1;
    const at = this.deps.clock.now();
    const ref: EventRef = { ...event, seq, at };
    const payload = this.eventPayload(rec, ref, round ? [round] : undefined);
    if (!payload) throw new Error(`the ${event.kind} event of '${rec.id}' has nothing to report`);
    const kind = event.kind;
    const deferred: Array<{ to: string; code: string; reason: string; attempts: number }> = [];
    let refusal: { to: string; code: string; reason: string } | undefined;
    let acceptedNow = 0;
    for (const to of rec.participants) {
      const behind = rec.undelivered.some((u) => u.to === to);
      if (behind) {
        deferred.push({ to, code: 'ORDER', reason: 'an earlier event to this participant waits', attempts: 0 });
        continue;
      }
      const result = this.send(rec, to, payload, ctx);
      if (result.accepted) {
        acceptedNow++;
        continue;
      }
      if (result.code !== 'NO_ROUTE') refusal ??= { to, code: result.code, reason: result.reason };
      deferred.push({ to, code: result.code, reason: result.reason, attempts: 1 });
    }
    if (op.refusable && op.accepted === 0 && acceptedNow === 0 && refusal) {
      throw fail(routerKind(refusal.code), refusal.code, `the ${kind} event could not be sent to any participant (${refusal.to}: ${refusal.reason})`);
    }
    op.accepted += acceptedNow;
    rec.events = seq;
    for (const d of deferred) {
      // A reference, not the bytes: they are rebuilt from the record and its rounds when retried.
      rec.undelivered.push({ to: d.to, ...ref, firstRefusedAt: at, code: d.code, attempts: d.attempts });
      this.deps.log.record({
        correlationId: rec.id, actor: ACTOR, eventType: 'negotiation.event_deferred', level: 'WARN',
        details: { negotiation_id: rec.id, to: d.to, seq, kind, code: d.code, reason: d.reason.slice(0, 500) },
      });
    }
    if (deferred.length > 0) {
      op.after.push(() => {
        this.redeliver.add(rec.id);
        this.scheduleRetry();
      });
    }
  }

  /**
   * The bytes of one event, from the record (and the round it reports): the same bytes when first sent and when a
   * deferred copy is retried, since what an event reports never changes afterwards. Undefined when it cannot be rebuilt.
   */
  private eventPayload(rec: NegotiationRecord, ref: EventRef, rounds?: readonly RoundRecord[]): Buffer | undefined {
    let fields: Record<string, unknown>;
    const roundOf = () => (rounds ?? this.deps.store.negotiation.rounds(rec.id)).find((r) => r.n === ref.round);
    switch (ref.kind) {
      case 'open':
        fields = { topic: rec.topic, corr: rec.correlationId };
        break;
      case 'policy': {
        const e = rec.effective;
        fields = { negotiation_id: rec.id, ...(e.profile !== '' ? { profile: e.profile } : {}), policy: policyWire(e.policy), policy_version: e.policyVersion, debate_timeout_ms: e.debateTimeoutMs };
        break;
      }
      case 'propose': case 'counter': {
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
        fields = { by: d.decidedBy, ct: d.contentType, result_b64: d.result.toString('base64'), round: d.round, stop_reason: d.stopReason };
        break;
      }
      case 'abort': {
        const a = rec.abort;
        if (!a) return undefined;
        fields = { reason: a.reason, error_code: a.errorCode, stop_reason: rec.stopReason };
        break;
      }
    }
    return Buffer.from(JSON.stringify({ kind: ref.kind, ts: isoUtc(ref.at), ...fields, negotiation_id: rec.id, seq: ref.seq }), 'utf8');
  }

  private send(rec: NegotiationRecord, to: string, payload: Buffer, ctx: CallContext): ReturnType<CoordinatorOutbox['sendToAgent']> {
    return this.deps.outbox.sendToAgent({ to, messageType: 'NEGOTIATION', contentType: 'application/json', payload, correlationId: rec.id, ackTimeout: false }, ctx);
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.disposed) return;
    this.retryTimer = this.deps.clock.setTimer(UNDELIVERED_RETRY_MS, () => {
      this.retryTimer = undefined;
      this.retryUndelivered();
    });
  }

  private retryUndelivered(): void {
    if (this.disposed) return;
    for (const id of [...this.redeliver]) {
      const rec = this.deps.store.negotiation.get(id);
      if (!rec || rec.undelivered.length === 0) {
        this.redeliver.delete(id);
        continue;
      }
      const ctx: CallContext = { correlationId: rec.id };
      try {
        this.deps.store.transaction(() => {
          const now = this.deps.clock.now();
          const blocked = new Set<string>();
          const kept: UndeliveredEvent[] = [];
          const payloads = new Map<number, Buffer | undefined>();
          let rounds: RoundRecord[] | undefined;
          let changed = false;
          for (const u of rec.undelivered) {
            if (blocked.has(u.to)) { kept.push(u); continue; }
            const key = `${rec.id}\u0000${u.to}\u0000${u.seq}`;
            if (!payloads.has(u.seq)) {
              const legacy = (u as { payload?: string }).payload;
              if (legacy !== undefined) payloads.set(u.seq, Buffer.from(legacy, 'base64'));
              else {
                if ((u.kind === 'propose' || u.kind === 'counter' || u.kind === 'evaluate') && !rounds) rounds = this.deps.store.negotiation.rounds(rec.id);
                payloads.set(u.seq, this.eventPayload(rec, u, rounds));
              }
            }
            const payload = payloads.get(u.seq);
            const attempts = (this.attempts.get(key) ?? u.attempts) + 1;
            const result = payload ? this.send(rec, u.to, payload, ctx) : { accepted: false as const, code: 'INTERNAL', reason: 'the event could not be rebuilt from the record' };
            if (result.accepted) {
              this.deps.log.record({ correlationId: rec.id, actor: ACTOR, eventType: 'negotiation.event_redelivered', details: { negotiation_id: rec.id, to: u.to, seq: u.seq, kind: u.kind, attempts } });
              this.attempts.delete(key);
              changed = true;
              continue;
            }
            if (!payload || now - u.firstRefusedAt >= UNDELIVERED_GIVE_UP_MS) {
              this.deps.log.record({
                correlationId: rec.id, actor: ACTOR, eventType: 'negotiation.event_undeliverable', level: 'ERROR',
                details: { negotiation_id: rec.id, to: u.to, seq: u.seq, kind: u.kind, code: result.code, reason: result.reason.slice(0, 500), attempts },
              });
              this.attempts.delete(key);
              changed = true;
              continue;
            }
            // Attempts are counted in memory: the record is written only when an entry goes or its code changes.
            this.attempts.set(key, attempts);
            if (u.code !== result.code) {
              u.code = result.code;
              changed = true;
            }
            blocked.add(u.to);
            kept.push(u);
          }
          if (changed) {
            rec.undelivered = kept;
            this.deps.store.negotiation.put(rec);
          }
        });
      } catch (err) {
        this.deps.log.internalError(ACTOR, rec.id, err);
      }
      if (rec.undelivered.length === 0) this.redeliver.delete(id);
    }
    if (this.redeliver.size > 0) this.scheduleRetry();
  }

  // ------------------------------------------------------------------ helpers

  private op(refusable: boolean): Op {
    return { refusable, accepted: 0, after: [] };
  }

  /** After the transaction: timers, follow-up work, the change announced once committed. */
  private committed(rec: NegotiationRecord, op: Op): void {
    this.arm(rec);
    for (const fn of op.after) fn();
    const change: NegotiationChange = { negotiationId: rec.id, state: rec.state };
    this.deps.store.afterCommit(() => {
      if (!this.disposed) this.changed.fire(change);
    });
  }

  private record(rec: NegotiationRecord, eventType: string, details: Record<string, unknown>, ctx: CallContext, level: 'INFO' | 'WARN' = 'INFO'): void {
    rec.updatedAt = this.deps.clock.now();
    this.deps.log.record({ correlationId: rec.id, actor: ACTOR, eventType, level, details: { negotiation_id: rec.id, state: rec.state, call: ctx.correlationId, ...details } });
  }

  private artifact(rec: NegotiationRecord, kind: string, version: string, contentType: string, content: Buffer, ctx: CallContext): void {
    const result = this.deps.artifacts.appendArtifact({ negotiationId: rec.id, kind, version, contentType, content, createdAt: '' }, { correlationId: rec.id, principal: ctx.principal });
    if (!result.ok) {
      this.deps.log.record({
        correlationId: rec.id, actor: ACTOR, eventType: 'negotiation.artifact_refused', level: 'WARN',
        details: { negotiation_id: rec.id, kind, version, reason: result.reason.slice(0, 500) },
      });
    }
  }

  private deltaWire(delta: DeltaSummary): Record<string, unknown> {
    return { magnitude: delta.magnitude, changed_paths: delta.changedPaths };
  }

  /**
   * A Decide or Abort sent again after it ended the negotiation (a retry after a lost answer): the ended record when
   * the same caller ended it the same way, else undefined (and the call goes on to be refused NEGOTIATION_CLOSED).
   */
  private repeatedEnd(id: string, speaker: Speaker, same: (rec: NegotiationRecord, participant: string | undefined) => boolean): NegotiationRecord | undefined {
    const rec = this.deps.store.negotiation.get(id);
    if (!rec || (rec.state !== 'decided' && rec.state !== 'aborted')) return undefined;
    let participant: string | undefined;
    try {
      participant = this.participantOrOperator(rec, speaker, 'end');
    } catch {
      return undefined;
    }
    return same(rec, participant) ? rec : undefined;
  }

  /** The negotiation, if the id is well-formed and known (any state). */
  private known(id: string): NegotiationRecord | undefined {
    checkId('negotiation_id', id, LIMITS.negotiation_id);
    return this.deps.store.negotiation.get(id);
  }

  /** The negotiation, live: NOT_FOUND, ended (NEGOTIATION_CLOSED), paused (unless `pausedOk`). */
  private live(id: string, pausedOk: boolean): NegotiationRecord {
    checkId('negotiation_id', id, LIMITS.negotiation_id);
    const rec = this.deps.store.negotiation.get(id);
    if (!rec) throw fail('not_found', 'NOT_FOUND', `no negotiation '${id}'; Open it first`);
    if (rec.state === 'decided' || rec.state === 'aborted') {
      throw fail('precondition', 'NEGOTIATION_CLOSED', `negotiation '${id}' is ${rec.state}${rec.stopReason ? ` (${rec.stopReason})` : ''}; it takes no more calls`);
    }
    if (rec.state === 'paused' && !pausedOk) {
      throw fail('precondition', 'NEGOTIATION_PAUSED', `negotiation '${id}' waits on the HITL invocation ${rec.pending?.invocationId ?? ''} (${rec.pending?.why ?? ''})`);
    }
    return rec;
  }

  private mustSpeakAs(rec: NegotiationRecord, agentId: string, speaker: Speaker): void {
    checkId('from_agent', agentId, FIELD_LIMITS.registry.agent_id);
    if (!rec.participants.includes(agentId)) {
      throw fail('permission', 'PERMISSION_DENIED', `${agentId} is not a participant of negotiation '${rec.id}' (${rec.participants.join(', ')})`);
    }
    if (!actsAs(speaker, agentId)) throw fail('permission', 'PERMISSION_DENIED', `${speakerName(speaker)} may not act as ${agentId}`);
  }

  /**
   * A participant's Decide by consensus: its result must be the bytes (and content type) of a round that every
   * participant other than the round's author and the decider evaluated at or above score_threshold (the decider's
   * Decide is its own acceptance). Answers that round's number; FAILED_PRECONDITION saying why otherwise.
   */
  private agreedRound(rec: NegotiationRecord, decider: string, input: DecisionInput): number {
    const threshold = rec.effective.policy.scoreThreshold;
    const rounds = this.deps.store.negotiation.rounds(rec.id).filter((r) => r.payload.equals(input.result) && r.contentType === input.contentType);
    if (rounds.length === 0) {
      throw fail('precondition', 'FAILED_PRECONDITION', `a participant decides by consensus only on a round's contract: the result equals no round of '${rec.id}' (bytes and content_type)`);
    }
    const missing: string[] = [];
    for (const r of rounds.reverse()) {
      const short = rec.participants.filter((p) => p !== r.from && p !== decider && !r.evaluations.some((e) => e.from === p && e.score >= threshold));
      if (short.length === 0) return r.n;
      missing.push(`round ${r.n}: ${short.join(', ')}`);
    }
    throw fail('precondition', 'FAILED_PRECONDITION', `not a consensus: every other participant must have evaluated the round at or above score_threshold ${threshold}; not yet (${missing.join('; ')})`);
  }

  /** Decide / Abort: the operator (undefined) or the participant the agent speaks as. */
  private participantOrOperator(rec: NegotiationRecord, speaker: Speaker, what: string): string | undefined {
    if (speaker.kind !== 'agent') return undefined;
    const participant = rec.participants.find((p) => speaker.mayActAs(p));
    if (participant === undefined) throw fail('permission', 'PERMISSION_DENIED', `only a participant of '${rec.id}' or the operator may ${what} it; ${speaker.label} is neither`);
    return participant;
  }

  /** Runs a public call; a refusal is logged (`negotiation.refused`, outside any transaction) and thrown. */
  private refusing<T>(call: string, negotiationId: string, ctx: CallContext, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof NegotiationError) {
        this.deps.log.record({
          correlationId: negotiationId.slice(0, LIMITS.negotiation_id) || ctx.correlationId, actor: ACTOR, eventType: 'negotiation.refused', level: 'WARN',
          details: { call, negotiation_id: negotiationId.slice(0, LIMITS.negotiation_id), code: err.code, reason: err.message.slice(0, 500) },
        });
      }
      throw err;
    }
  }
}
