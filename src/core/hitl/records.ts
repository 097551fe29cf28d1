/**
 * The invocation's own types (reasons, actions, states, requests, decisions), apart from model.ts so that request.ts and
 * policy.ts, which model.ts re-exports, need not import model.ts. Import them from model.ts.
 */

/** RFC §15: the eight reasons the coordinator asks a human. */
export const REASON_TYPES = [
  'CONFLICT',
  'SECURITY_APPROVAL',
  'TASK_ESCALATION',
  'MANUAL_OVERRIDE',
  'WORKTREE_OVERRIDE',
  'DEBATE_DEADLOCK',
  'TOOL_PRIVILEGE_ESCALATION',
  'CONNECTOR_APPROVAL',
] as const;
export type ReasonType = (typeof REASON_TYPES)[number];

/** RFC §15.1: the four actions of a HITL_DECISION. */
export const HITL_ACTIONS = ['approve', 'deny', 'modify', 'defer'] as const;
export type HitlAction = (typeof HITL_ACTIONS)[number];

/**
 * pending → decided (a human or a rule answered) | timed_out (a fallback was applied because the deadline
 * passed or no human was available) | cancelled (withdrawn; the requester is answered `deny`).
 */
export type InvocationState = 'pending' | 'decided' | 'timed_out' | 'cancelled';

/** RFC §15.4 fallback policies, applied per reason type. */
export type FallbackPolicyName = 'DENY_BY_DEFAULT' | 'AUTO_DECIDE_THRESHOLD' | 'EXTEND_TIMEOUT';
export const FALLBACK_POLICIES: readonly FallbackPolicyName[] = [
  'DENY_BY_DEFAULT',
  'AUTO_DECIDE_THRESHOLD',
  'EXTEND_TIMEOUT',
];

/** Where an invocation came from, so that its decision reaches the requester the same way. */
export type InvocationOrigin =
  /** HitlService.Decide: the caller is blocked on the RPC. */
  | { readonly kind: 'rpc' }
  /** A HITL_INVOCATION envelope to `coordinator`: the decision goes back as an envelope. */
  | { readonly kind: 'envelope'; readonly messageId: string }
  /** Another part of the coordinator (scheduler, worktrees, tools, negotiation). */
  | { readonly kind: 'internal'; readonly component: string };

/** What the work is about (RFC §15.2 `subject`). */
export interface HitlSubject {
  readonly repoId: string;
  readonly worktreeId: string;
  readonly taskId: string;
}

/** One proposed change shown to the operator: text (unified/side-by-side) or JSON (structured). */
export interface HitlDiff {
  readonly title: string;
  /** Text diff: the text before and after. */
  readonly before?: string;
  readonly after?: string;
  /** A ready-made unified diff (e.g. `git diff` output), shown as such. */
  readonly unified?: string;
  /** JSON diff: the values before and after. */
  readonly beforeJson?: unknown;
  readonly afterJson?: unknown;
}

/** The context presented to the operator (RFC §15.1: facts, diffs, risk notes, prior attempts). */
export interface HitlContext {
  readonly summary: string;
  readonly facts: Readonly<Record<string, unknown>>;
  readonly diffs: readonly HitlDiff[];
  readonly risk: { readonly level: string; readonly notes: readonly string[] };
  readonly priorAttempts: readonly unknown[];
  /** Inference Engine metadata (model, confidence, …) when the requester sent it. */
  readonly inference: Readonly<Record<string, unknown>>;
  /** A confidence or score in [0,1], used by AUTO_DECIDE_THRESHOLD; null when none was given. */
  readonly score: number | null;
}

/** What the requester says, as both a request and the invocation opened from it keep it. */
export interface InvocationBasics {
  readonly reasonType: ReasonType;
  readonly requester: string;
  readonly correlationId: string;
  readonly subject: HitlSubject;
  readonly context: HitlContext;
  readonly proposedActions: readonly string[];
  readonly suggestedAction: string;
  readonly priority: number;
  /** The requester's own fallback wish; only `deny` is ever honoured over the configured policy. */
  readonly requestedFallback: string;
}

/** What a requester asks for; parsed and validated by `parseInvocationRequest`. */
export interface InvocationRequest extends InvocationBasics {
  /** A requester-chosen id (RFC §15.2 `invocation_id`); a retry with the same id and requester re-attaches. */
  readonly invocationId?: string;
  /** Absolute deadline (ms since epoch) the requester asked for; the policy's default applies when absent. */
  readonly deadlineAt?: number;
}

/** How a decision was made. */
export interface DecisionOrigin {
  /** human: an operator decided; rule: an auto-approve/deny rule; fallback: a fallback policy; cancel: withdrawn. */
  readonly kind: 'human' | 'rule' | 'fallback' | 'cancel';
  /** The operator (e.g. `editor:alice`, `cli:alice`), or `policy`. */
  readonly by: string;
  readonly automatic: boolean;
  /** For rules: the rule's name; for fallbacks: the policy applied. */
  readonly rule?: string;
  readonly policy?: FallbackPolicyName;
  /** For fallbacks: why it applied. */
  readonly trigger?: 'deadline' | 'hitl_unavailable' | 'requested_fallback';
}

export interface HitlDecision {
  readonly action: HitlAction;
  readonly rationale: string;
  /** For `modify`: the edited payload (JSON value); otherwise null. */
  readonly payload: unknown;
  readonly decidedAt: number;
  readonly origin: DecisionOrigin;
}

/** One invocation as the coordinator keeps (and persists) it. */
export interface HitlInvocation extends InvocationBasics {
  readonly id: string;
  readonly origin: InvocationOrigin;
  readonly createdAt: number;
  /** The deadline in force (moved by EXTEND_TIMEOUT). */
  deadlineAt: number;
  /** The deadline first set, for the audit and for EXTEND_TIMEOUT's default extension. */
  readonly originalDeadlineAt: number;
  /** EXTEND_TIMEOUT extensions applied so far. */
  extensions: number;
  state: InvocationState;
  decision: HitlDecision | null;
  updatedAt: number;
}

/** The fallback for one reason type (RFC §15.1 deadline fallback, §15.3/§15.4 no human available). */
export interface FallbackSetting {
  readonly policy: FallbackPolicyName;
  /** AUTO_DECIDE_THRESHOLD: approve when the invocation's score is at least this (0..1); else deny. */
  readonly threshold: number;
  /** EXTEND_TIMEOUT: how far each extension moves the deadline; 0 = the original timeout (RFC: 1×). */
  readonly extendMs: number;
  /** EXTEND_TIMEOUT: at most this many extensions, then deny (RFC: a cap is required, 3 recommended). */
  readonly maxExtensions: number;
}

/** An auto-approve / auto-deny rule. Globs (picomatch) match the requester and the subject. */
export interface AutoRule {
  readonly name: string;
  /** A reason type, or '*' for all. */
  readonly reasonType: ReasonType | '*';
  /** Glob on the requester (agent id). */
  readonly agent: string;
  /** Glob on the subject written as `repo_id/worktree_id/task_id`. */
  readonly subject: string;
  readonly action: Extract<HitlAction, 'approve' | 'deny'>;
}

export interface HitlPolicy {
  /** Deadline for invocations that do not ask for one. */
  readonly defaultDeadlineMs: number;
  /** Requested deadlines are capped at this. */
  readonly maxDeadlineMs: number;
  readonly fallbacks: Readonly<Record<ReasonType, FallbackSetting>>;
  readonly rules: readonly AutoRule[];
  /** "Pause all approvals": no rule decides; every new invocation waits for a human (or its fallback). */
  readonly paused: boolean;
  /** With no operator attached, the fallback applies after this long (RFC §15.4: detect within 5 s). */
  readonly unavailableAfterMs: number;
  /** Pending invocations one requester may hold; more are refused BUFFER_FULL (RFC §13: refuse, never drop). */
  readonly maxPendingPerRequester: number;
  /** A settled invocation and its audit trail are deleted this long after they settled (RFC §24: retention). */
  readonly settledRetentionMs: number;
}
