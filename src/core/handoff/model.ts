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
export const TERMINAL_HANDOFF_STATES: ReadonlySet<HandoffState> = new Set(['REJECTED', 'COMPLETED', 'EXPIRED', 'CANCELLED']);

/** The content types a context snapshot may declare (gRPC metadata `sw4rm-context-content-type`; README, "Handoffs"). */
export const HANDOFF_CONTEXT_CONTENT_TYPE = 'application/vnd.sw4rm.handoff-context+json';

/** One target tried: who, when, and how it ended (accepted, rejected with reason and code, expired, redirected). */
export interface HandoffAttempt {
  readonly agentId: string;
  readonly at: number;
  /** '' while this attempt is the current one. */
  outcome: '' | 'accepted' | 'rejected' | 'expired' | 'redirected' | 'cancelled' | 'left';
  reason: string;
  code: string;
  endedAt: number | null;
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
  /** The context snapshot's bytes, as sent. */
  readonly context: Buffer;
  /** '' (opaque bytes), 'application/json', or HANDOFF_CONTEXT_CONTENT_TYPE (validated against the HandoffContext schema). */
  readonly contextContentType: string;
  readonly capabilitiesRequired: readonly string[];
  readonly priority: number;
  /** How long each target has to answer (ms) — from `timeout`, else the default; cut to the budget's deadline. */
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
  state: HandoffState;
  /** PENDING and waiting for a person (no agent could take it and policy routes it to the operator). */
  awaitingOperator: boolean;
  readonly attempts: HandoffAttempt[];
  /** Who accepted (an agent id, or `operator:<name>`); '' until then. */
  acceptedBy: string;
  rejectionReason: string;
  rejectionCode: string;
  /** When the current target's time runs out (epoch ms), null when not PENDING. */
  expiresAt: number | null;
  readonly requestedAt: number;
  updatedAt: number;
  endedAt: number | null;
}

export interface HandoffRepository {
  put(record: HandoffRecord): void;
  get(requestId: string): HandoffRecord | undefined;
  /** Every handoff not terminal (restore after a restart). */
  listOpen(): HandoffRecord[];
  /** The newest `limit` handoffs, open ones first, then by updatedAt descending. */
  listRecent(limit: number): HandoffRecord[];
  /** Terminal handoffs ended before `before`, at most `limit` deleted; answers how many. */
  pruneEnded(before: number, limit: number): number;
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
 * origin, else undefined. O(1): it runs on every message.
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
