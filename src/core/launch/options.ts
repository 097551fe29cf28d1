/** The launched agents' options and their bounds, apart so the editor's settings load no launch code. */
export interface LaunchesOptions {
  /**
   * How often a RUNNING launched agent's liveness is recorded in the registry (its process runs: it is present).
   * Below the registry's heartbeat debounce, so that it never shows unavailable while its terminal is open.
   */
  readonly livenessIntervalMs: number;
  /**
   * The ACK timeout of messages to an agent launched with the MCP bridge (`pullsInbox`: its profile wires the bridge, or it
   * is a custom command): it pulls its inbox with read_inbox between steps of its work, minutes apart, where an agent with an inbox stream acknowledges
   * RECEIVED at once; the RFC's 10 s default would time out every message to it. Given to the router
   * (RecipientAckTimeouts) from its launch on, and again at each start, for as long as its launch record exists (EXITED
   * included: its messages wait this long for a relaunch). Bounds: BRIDGED_ACK_TIMEOUT_BOUNDS_MS.
   */
  readonly bridgedAckTimeoutMs: number;
}

/** bridgedAckTimeoutMs: from 10 s (the RFC's default) to 24 h. */
export const BRIDGED_ACK_TIMEOUT_BOUNDS_MS = { min: 10_000, max: 24 * 3_600_000 } as const;
/** sw4rm.agents.inboxAckTimeoutMinutes and --inbox-ack-timeout-minutes: whole minutes, 1 to 1440 (24 h). */
export const INBOX_ACK_TIMEOUT_MINUTES = { min: 1, max: BRIDGED_ACK_TIMEOUT_BOUNDS_MS.max / 60_000 } as const;

export const DEFAULT_LAUNCHES_OPTIONS: LaunchesOptions = {
  livenessIntervalMs: 10_000,
  bridgedAckTimeoutMs: 30 * 60_000,
};
