import type { AgentPreferences, DebateIntensity } from '../policy/model';

/** What the calls of NegotiationService and SchedulerPolicyService give a debate (the server's parse of the wire). */

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
