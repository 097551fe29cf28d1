/** The handoff area's options and bounds (settings and flags give them; tests shorten them). */

export interface HandoffOptions {
  /** How long the requester waits for an acceptance in all when the request names no `timeout` (ms). */
  readonly defaultTimeoutMs: number;
  /**
   * How long one target has to answer before the handoff is offered to the next candidate (rerouting allowed, one
   * available), within the requester's wait; with nobody else, the target keeps it until the wait ends.
   */
  readonly answerWindowMs: number;
  /** The longest `timeout` a request may ask (ms); a longer one is refused. */
  readonly maxTimeoutMs: number;
  /** On a rejection or a timeout, offer the handoff to the next capable agent (README, "Handoffs", "Routing"). */
  readonly reroute: boolean;
  /** When no agent can take it, the handoff waits for a person (awaitingOperator) instead of being refused or ended. */
  readonly routeToOperator: boolean;
  /** Ended handoffs are deleted this many days after they ended (their transferred-work refusals end with them). */
  readonly retentionDays: number;
  /** Open (PENDING or ACCEPTED) handoffs at most, in all and per requesting agent; beyond, RequestHandoff is refused BUFFER_FULL. */
  readonly maxOpen: number;
  readonly maxOpenPerAgent: number;
  /**
   * PENDING handoffs waiting for one agent's answer at most: a named target beyond it is refused BUFFER_FULL, capability
   * routing and redirects pass it by (GetPendingHandoffs stays answerable).
   */
  readonly maxPendingPerTarget: number;
  /**
   * Completed transfers the router's refusal keeps in memory (the newest); once more were ever completed, a message that
   * misses memory is looked up in the store (an indexed lookup).
   */
  readonly maxTransfersInMemory: number;
}

export const DEFAULT_HANDOFF_OPTIONS: HandoffOptions = {
  defaultTimeoutMs: 300_000,
  answerWindowMs: 60_000,
  maxTimeoutMs: 86_400_000,
  reroute: true,
  routeToOperator: false,
  retentionDays: 30,
  maxOpen: 10_000,
  maxOpenPerAgent: 256,
  maxPendingPerTarget: 64,
  maxTransfersInMemory: 100_000,
};

/** The bounds of the options a setting or a flag may give. */
export const HANDOFF_OPTION_BOUNDS = {
  defaultTimeoutSeconds: { min: 1, max: 86_400 },
  retentionDays: { min: 1, max: 3650 },
} as const;

/**
 * GetPendingHandoffs answers at most this many bytes of handoffs (contexts and fields, estimated): most gRPC clients
 * receive 4 MiB at most. One handoff is always answered, however large (its context is at most 1 MiB).
 */
export const PENDING_ANSWER_BYTES = 3.5 * 1024 * 1024;
/** Targets tried at most per handoff (the first included); then it ends as if no agent could take it. */
export const MAX_ATTEMPTS = 32;
/** CancelDelegation's grace_period_ms at most (forwarded to the parties; README, "Handoffs"). */
export const MAX_GRACE_PERIOD_MS = 3_600_000;
/** A timeout whose transaction failed is decided again this much later (ms). */
export const EXPIRY_RETRY_MS = 1_000;
/** How often retention runs and how many ended handoffs one run deletes at most. */
export const HANDOFF_RETENTION_INTERVAL_MS = 3_600_000;
export const HANDOFF_RETENTION_BATCH = 100;
