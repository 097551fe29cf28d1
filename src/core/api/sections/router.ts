import type { Event } from '../../events';
import type { InboxStats, SendResult, StoreUsage } from '../../router/router';
import type { CoordinatorSendInput, MessageDetail, MessageQuery, MessageSummary } from '../../router/router';

export type { StoreUsage };

/**
 * The router (RFC §11–§13): inboxes, routed messages (the Messages view, Send Message…), its metrics and the store
 * it fills. Part of CoordinatorApi (coordinatorApi.ts).
 */
export interface RouterApi {
  /** An agent's inbox counts (zeros for an agent that has none yet). */
  inboxStats(agentId: string): Promise<InboxStats>;
  /**
   * How many times a message from an agent (or one the coordinator sent through the router) was delivered to its
   * recipient's inbox stream since this coordinator started; ACKs, NACKs, replies, heartbeats and notices do not
   * count. Changes arrive as `onDidChangeInbox`.
   */
  deliveredMessageCount(): Promise<number>;
  /** The router's back-pressure metrics (RFC §13) in the Prometheus text format. */
  metricsText(): Promise<string>;
  /** Where the store lives, for messages to the user. */
  storeLocation(): Promise<string>;
  /**
   * The store's size against its disk budget (RouterOptions.storeBudgetBytes): the running estimate admission
   * checks, read back from the store every few seconds. Poll it at a low rate (the status bar warns at 80%).
   */
  storeUsage(): Promise<StoreUsage>;
  /** An agent's inbox changed (admitted, delivered, acknowledged…); fires often, listeners coalesce. */
  readonly onDidChangeInbox: Event<InboxChange>;
  /**
   * Recent routed messages matching `query` (agent as producer or recipient, correlation id, state, message type),
   * newest first, at most `query.limit` (200; 1,000 at most), among the newest MESSAGE_SCAN_WINDOW messages. They
   * change with every inbox change (`onDidChangeInbox`): refresh throttled.
   */
  messages(query?: MessageQuery): Promise<MessageSummary[]>;
  /** A message's envelope, payload as text (or why it is no longer stored) and lifecycle history; undefined once pruned. */
  message(messageId: string): Promise<MessageDetail | undefined>;
  /**
   * Sends a DATA message as `coordinator` to a registered agent through the router's normal admission path. A
   * refusal is an answer (its SW4RM code and reason), not an error.
   */
  sendMessage(message: CoordinatorSendInput, by: string): Promise<SendResult>;
}

export interface InboxChange {
  readonly agentId: string;
}
