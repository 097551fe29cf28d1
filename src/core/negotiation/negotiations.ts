import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { Artifact } from '../activity/model';
import type { NegotiationPolicies } from '../policy/policies';
import type { AgentPreferences, DebateIntensity, EffectivePolicy } from '../policy/model';
import type { Speaker } from '../policy/speaker';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import type { NegotiationChange, NegotiationDetail, NegotiationQueries, NegotiationRecord, NegotiationStorage, NegotiationSummary, RoundRecord } from './model';

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
}

/**
 * Debates (RFC §17, §17.1–§17.4): open, rounds, evaluations, scoring, stop rules, deadlock → tie-break or HITL
 * DEBATE_DEADLOCK, every event fanned out as a NEGOTIATION envelope. Skeleton on the base branch: part D builds it.
 */
export class Negotiations implements NegotiationQueries, Disposable {
  private readonly changed = new Emitter<NegotiationChange>();
  readonly onDidChange: Event<NegotiationChange> = this.changed.event;

  constructor(protected readonly deps: NegotiationDeps) {}

  open(input: OpenInput, speaker: Speaker, ctx: CallContext): NegotiationRecord { void input; void speaker; void ctx; throw new Error('not built yet'); }
  propose(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord { void input; void speaker; void ctx; throw new Error('not built yet'); }
  counter(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord { void input; void speaker; void ctx; throw new Error('not built yet'); }
  evaluate(input: EvaluationInput, speaker: Speaker, ctx: CallContext): void { void input; void speaker; void ctx; throw new Error('not built yet'); }
  decide(input: DecisionInput, speaker: Speaker, ctx: CallContext): NegotiationRecord { void input; void speaker; void ctx; throw new Error('not built yet'); }
  abort(negotiationId: string, reason: string, speaker: Speaker, ctx: CallContext): NegotiationRecord { void negotiationId; void reason; void speaker; void ctx; throw new Error('not built yet'); }
  submitEvaluation(negotiationId: string, report: EvaluationReportInput, speaker: Speaker, ctx: CallContext): { readonly accepted: boolean; readonly reason: string } { void negotiationId; void report; void speaker; void ctx; throw new Error('not built yet'); }
  /** SchedulerPolicyService.HitlAction: decides the pending HITL invocation of this negotiation. */
  hitlAction(negotiationId: string, action: string, rationale: string, speaker: Speaker, ctx: CallContext): { readonly ok: boolean; readonly reason: string } { void negotiationId; void action; void rationale; void speaker; void ctx; throw new Error('not built yet'); }
  effectivePolicy(negotiationId: string): EffectivePolicy | undefined { void negotiationId; throw new Error('not built yet'); }
  get(negotiationId: string): NegotiationRecord | undefined { void negotiationId; throw new Error('not built yet'); }
  list(limit?: number): NegotiationSummary[] { void limit; return []; }
  detail(id: string): NegotiationDetail | undefined { void id; return undefined; }
  /** At start: timers re-armed, HITL invocations settled while stopped applied. */
  restore(ctx: CallContext): void { void ctx; }

  dispose(): void {
    this.changed.dispose();
  }
}
