import { MIB, PAYLOAD_LIMITS } from '../limits';
import { DEFAULT_LANE_OPTIONS, type LaneOptions } from './lanes';
import { SETTLED_OUTCOMES_IN_MEMORY } from './outcomeCache';

export interface RouterOptions {
  /** RFC §13: messages admitted to an inbox and not yet READ. */
  readonly capacity: number;
  /** RFC §11/§20: time to RECEIVED before TIMED_OUT. */
  readonly ackTimeoutMs: number;
  /** A delivery not confirmed within the lease is sent again. */
  readonly leaseMs: number;
  readonly maxDeliveryAttempts: number;
  /** RFC §11.2: how long outcomes stay in the idempotency cache. */
  readonly dedupWindowMs: number;
  /** Settled outcomes also kept in memory (the store keeps all of them for the window). */
  readonly outcomesInMemory: number;
  /** RFC §14: interval of the coordinator's HEARTBEAT envelopes to streaming agents; 0 turns them off. */
  readonly heartbeatIntervalMs: number;
  /** RFC §5.5: deliveries remembered per agent for stream resumption. */
  readonly resumeBacklog: number;
  /** Tracked deliveries a stream may have unconfirmed at once; the rest wait in their lanes. */
  readonly deliveryWindow: number;
  readonly payloadLimits: Readonly<Record<string, number>>;
  readonly lanes: LaneOptions;
  readonly dlqMaxEntries: number;
  /** Payload bytes the DLQ keeps at most; its retention drops the oldest dead letters beyond them. */
  readonly dlqMaxBytes: number;
  readonly dlqRetentionMs: number;
  /**
   * The disk budget of the store (its pages in use, all areas): admission refuses a message that would take
   * the store over it with BUFFER_FULL. Checked against a running estimate, read from the store every few seconds.
   */
  readonly storeBudgetBytes: number;
  /**
   * The memory budget of the router (memoryBudget.ts): payloads in memory, written to streams and not yet
   * confirmed, or being validated. Admission refuses BUFFER_FULL beyond it; deliveries wait in the store while
   * what is in flight to streams would pass half of it.
   */
  readonly memoryBudgetBytes: number;
  /** Payload bytes one inbox stream may have written and not yet confirmed; at least one message always goes. */
  readonly deliveryWindowBytes: number;
  /** Validate large payloads on a worker thread (payloadChecker.ts); false keeps every check on the event loop. */
  readonly payloadWorker?: boolean;
  /**
   * The payload folder (`<data folder>/payloads`, CoordinatorHost sets it): payloads of FILE_PAYLOAD_MIN_BYTES or more
   * that come through Router.submit are written there as files, off the event loop (payloadFiles.ts). Without it,
   * every payload is stored in SQLite.
   */
  readonly payloadDir?: string;
  /**
   * Finished messages (terminal and delivered) stay in the store, queryable, for this long after their last
   * change, and never less than the deduplication window (retries and late ACKs look their attempts up).
   */
  readonly messageRetentionMs: number;
  /**
   * A message with no recipient (no `sw4rm-to`, no JSON `to`, not an ACK): `refuse` answers NO_ROUTE (RFC §12,
   * unicast only); `fanout` delivers a unicast copy to every other registered agent that accepts its content type
   * (what the reference router does with the reference examples' unaddressed envelopes).
   */
  readonly unaddressed: UnaddressedPolicy;
}

export type UnaddressedPolicy = 'refuse' | 'fanout';
export const UNADDRESSED_POLICIES: readonly UnaddressedPolicy[] = ['refuse', 'fanout'];

export const DEFAULT_ROUTER_OPTIONS: RouterOptions = {
  capacity: 10,
  ackTimeoutMs: 10_000,
  leaseMs: 30_000,
  maxDeliveryAttempts: 5,
  dedupWindowMs: 3_600_000,
  outcomesInMemory: SETTLED_OUTCOMES_IN_MEMORY,
  heartbeatIntervalMs: 10_000,
  resumeBacklog: 1000,
  deliveryWindow: 64,
  payloadLimits: PAYLOAD_LIMITS,
  lanes: DEFAULT_LANE_OPTIONS,
  dlqMaxEntries: 10_000,
  dlqMaxBytes: 256 * MIB,
  dlqRetentionMs: 7 * 24 * 3_600_000,
  messageRetentionMs: 24 * 3_600_000,
  storeBudgetBytes: 2048 * MIB,
  memoryBudgetBytes: 128 * MIB,
  deliveryWindowBytes: 16 * MIB,
  unaddressed: 'refuse',
};

/** The longest message retention the settings and the CLI accept: a year. */
export const MAX_MESSAGE_RETENTION_HOURS = 365 * 24;

/** The largest store budget the settings and the CLI accept, in MiB (1 TiB); the smallest is 16 MiB. */
export const MAX_STORE_BUDGET_MIB = 1024 * 1024;
export const MIN_STORE_BUDGET_MIB = 16;

/** The memory budget the settings and the CLI accept, in MiB: from 32 (two of the largest payloads) to 4096. */
export const MIN_MEMORY_BUDGET_MIB = 32;
export const MAX_MEMORY_BUDGET_MIB = 4096;
