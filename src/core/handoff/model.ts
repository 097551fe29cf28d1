import type { Event } from '../events';
import type { Transactions } from '../store/store';

/**
 * RFC §17.6 handoff states (handoff.proto HandoffStatus). PENDING: waiting for the current target (or, when no agent
 * can take it and policy says so, for a person: `awaitingOperator`); ACCEPTED: the target took ownership; REJECTED: the
 * last target declined and no next candidate was tried; COMPLETED: the work was transferred (the origin may no longer
 * act on it); EXPIRED: nobody accepted within the timeout; CANCELLED: CancelDelegation (our state; the wire has none,
 * GetPendingHandoffs simply stops listing it).
 */
export const HANDOFF_STATES = ['PENDING', 'ACCEPTED', 'REJECTED', 'COMPLETED', 'EXPIRED', 'CANCELLED'] as const;
export type HandoffState = (typeof HANDOFF_STATES)[number];
export const TERMINAL_HANDOFF_STATES: ReadonlySet<HandoffState> = new Set([
  'REJECTED',
  'COMPLETED',
  'EXPIRED',
  'CANCELLED',
]);

/**
 * The content types a context snapshot may declare (gRPC metadata `sw4rm-context-content-type`; README, "Handoffs"):
 * this one is validated against the HandoffContext JSON Schema (handoff-context.txt), `application/json` must be
 * bounded valid JSON, any other MIME type (or none) is opaque bytes.
 */
export const HANDOFF_CONTEXT_CONTENT_TYPE = 'application/vnd.sw4rm.handoff-context+json';

/** One target tried: who, when, and how it ended (accepted, rejected with reason and code, expired, redirected). */
export interface HandoffAttempt {
  readonly agentId: string;
  readonly at: number;
  /** '' while this attempt is the current one. */
  outcome: '' | 'accepted' | 'rejected' | 'expired' | 'redirected' | 'cancelled' | 'left' | 'completed';
  reason: string;
  code: string;
  endedAt: number | null;
  /** How the agent became the target: named by the requester, capability routing, a redirect, or the operator. */
  via?: 'requested' | 'capability' | 'redirect' | 'operator';
  /** RejectHandoff's retry_after_ms (recorded; README, "Handoffs"). */
  retryAfterMs?: number;
  /** RejectHandoff's redirect_to_agent_id, as given. */
  redirectTo?: string;
  /**
   * When this target's answer window (HandoffOptions.answerWindowMs) ended with nobody else to offer the handoff to:
   * it keeps the offer until the requester's wait ends (`expiresAt`). Absent while the window runs.
   */
  windowEndedAt?: number;
}

/**
 * `sw4rm-handoff-worktree: carry`: the requester's worktree when it asked (repository and worktree), and what became of
 * the carry when the handoff was accepted (README, "Handoffs").
 */
export interface HandoffWorktree {
  readonly repoId: string;
  readonly worktreeId: string;
  /**
   * '' until accepted; `bound`: the receiver was UNBOUND and is now bound with it as its home (BIND); `switch_pending`:
   * the receiver was bound at its own home in the same repository and asked to switch into it (SWITCH_REQUEST, decided
   * through HITL WORKTREE_OVERRIDE: `invocationId`), then — followed while the handoff is ACCEPTED — `switched` (granted:
   * it works there) or `switch_refused` (denied, cancelled or timed out: it stays in its home), or `withdrawn` (the
   * handoff was cancelled first: the switch was withdrawn); `already_there`: the receiver works in it already;
   * `not_applicable`: the operator accepted (no agent to bind). Back to '' when the handoff returns to PENDING.
   */
  outcome:
    '' | 'bound' | 'switch_pending' | 'switched' | 'switch_refused' | 'withdrawn' | 'already_there' | 'not_applicable';
  detail: string;
  invocationId: string;
}

/** SW4-004 BudgetEnvelope as received (uint64 as numbers; 0 = not given). */
export interface HandoffBudget {
  readonly tokenBudgetRemaining: number;
  readonly wallTimeRemainingMs: number;
  readonly deadlineEpochMs: number;
  readonly currentDepth: number;
  readonly maxDelegationDepth: number;
}

/** SW4-004/005 SwarmDelegationPolicy as received. */
export interface HandoffDelegationPolicy {
  readonly maxRetriesOnOverloaded: number;
  readonly initialBackoffMs: number;
  readonly backoffMultiplier: number;
  readonly maxBackoffMs: number;
  readonly allowSpilloverRouting: boolean;
  readonly maxRedirects: number;
}

/** One handoff as the handoff area keeps (and persists) it. */
export interface HandoffRecord {
  readonly requestId: string;
  readonly fromAgent: string;
  /** What the requester asked for: an agent id, or '' for capability-based routing. */
  readonly requestedTo: string;
  /** The current (or last) target; '' while it waits for an operator or when nobody could be chosen. */
  toAgent: string;
  readonly reason: string;
  /**
   * The context snapshot's bytes, as sent. Records listed by HandoffRepository.listRecent hold only its first
   * LISTED_CONTEXT_BYTES (what the editor shows); `contextBytes` is always the whole size.
   */
  readonly context: Buffer;
  readonly contextBytes: number;
  /** '' (opaque bytes), 'application/json', or HANDOFF_CONTEXT_CONTENT_TYPE (validated against the HandoffContext schema). */
  readonly contextContentType: string;
  readonly capabilitiesRequired: readonly string[];
  readonly priority: number;
  /**
   * How long the requester waits for an acceptance in all (ms; RFC §17.6 `timeout`: "maximum duration to wait for
   * acceptance") — from `timeout`, else the default; cut to the budget's deadline. Every target's answer window ends by then.
   */
  readonly timeoutMs: number;
  readonly budget: HandoffBudget | null;
  readonly delegationPolicy: HandoffDelegationPolicy | null;
  /** The scheduler task being handed off ('' when none): closed when the handoff COMPLETES. */
  readonly taskId: string;
  /** The correlation id of the transferred work: sends by the origin about it are refused after COMPLETED. */
  readonly correlationId: string;
  /** The delegation this one was made under (CancelDelegation cascades to children), '' when none. */
  readonly parentRequestId: string;
  /** The requester asked that the receiving agent be bound to its worktree (README, "Handoffs"). */
  readonly carryWorktree: boolean;
  /** With carryWorktree: the worktree carried and the outcome; null otherwise. */
  readonly worktree: HandoffWorktree | null;
  /** sha256 of everything the request asked (a retry with the same request_id and digest is the same request). */
  readonly requestDigest: string;
  state: HandoffState;
  /** PENDING and waiting for a person (no agent could take it and policy routes it to the operator). */
  awaitingOperator: boolean;
  readonly attempts: HandoffAttempt[];
  /** Who accepted (an agent id, or `operator:<name>`); '' until then. */
  acceptedBy: string;
  rejectionReason: string;
  rejectionCode: string;
  /** Why it ended EXPIRED or CANCELLED (and who), '' otherwise. */
  endReason: string;
  /** Who completed it (an agent id, or `operator:<name>`), '' until COMPLETED. */
  completedBy: string;
  /**
   * When the requester's wait ends (epoch ms): requestedAt + timeoutMs (again from when it went back to PENDING because
   * its accepting agent left), never past the budget's deadline; then it is EXPIRED. null when not PENDING. The current
   * target's own answer window may end sooner (Handoffs.answerBy).
   */
  expiresAt: number | null;
  readonly requestedAt: number;
  updatedAt: number;
  endedAt: number | null;
}

/** A listed record's context holds at most this many bytes (the editor shows 64 KiB; one more says it was cut). */
export const LISTED_CONTEXT_BYTES = 64 * 1024 + 1;

/** A COMPLETED handoff as the router's TransferredWork needs it. */
export interface TransferredEntry {
  readonly requestId: string;
  readonly fromAgent: string;
  readonly correlationId: string;
  readonly acceptedBy: string;
}

export interface HandoffRepository {
  /** Inserts or updates; the context bytes are written only by the insert (they never change). */
  put(record: HandoffRecord): void;
  get(requestId: string): HandoffRecord | undefined;
  /** Every handoff not terminal (restore after a restart), without their context bytes (`context` empty; get() reads it). */
  listOpen(): HandoffRecord[];
  /** The newest `limit` handoffs, open ones first, then by updatedAt descending; contexts cut to LISTED_CONTEXT_BYTES. */
  listRecent(limit: number): HandoffRecord[];
  /** The newest `limit` COMPLETED handoffs, newest first (the router's TransferredWork is rebuilt from them at start). */
  listTransferred(limit: number): TransferredEntry[];
  /** The newest COMPLETED handoff of `fromAgent` with `correlationId` (an indexed lookup), or undefined. */
  transferred(fromAgent: string, correlationId: string): TransferredEntry | undefined;
  /**
   * Terminal handoffs ended before `before`, at most `limit` deleted; answers how many, whether more are due, and the
   * COMPLETED ones among them (their transferred-work refusals end with them).
   */
  pruneEnded(
    before: number,
    limit: number,
  ): { readonly deleted: number; readonly more: boolean; readonly transferred: readonly TransferredEntry[] };
}

export interface HandoffStorage extends Transactions {
  readonly handoffs: HandoffRepository;
}

/** A handoff changed (requested, routed, accepted, rejected, completed, expired, cancelled); fired after the commit. */
export interface HandoffChange {
  readonly requestId: string;
  readonly state: HandoffState;
}

/**
 * The router asks this before it admits a message: after a handoff COMPLETED, its origin may no longer act on the
 * transferred work (RFC §17.6). Answers the refusal's text when `producerId` sending about `correlationId` is such an
 * origin, else undefined. It runs on every message: a map lookup (the newest transfers; an indexed store lookup on a
 * miss only once more were completed than memory keeps).
 */
export interface TransferredWork {
  refusalFor(producerId: string, correlationId: string): string | undefined;
}

/** What the editor reads (through CoordinatorApi). */
export interface HandoffQueries {
  recent(limit: number): HandoffRecord[];
  get(requestId: string): HandoffRecord | undefined;
  readonly onDidChange: Event<HandoffChange>;
}
