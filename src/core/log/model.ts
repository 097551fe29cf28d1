import type { PruneResult } from '../retention';
import type { Transactions } from '../store/store';

export type EventLevel = 'INFO' | 'WARN' | 'ERROR';
export type EventSource = 'coordinator' | 'agent';

/** One structured observability event (RFC §19). */
export interface StructuredEvent {
  /** UTC ISO-8601. */
  readonly ts: string;
  readonly correlationId: string;
  readonly actor: string;
  readonly eventType: string;
  readonly level: EventLevel;
  readonly source: EventSource;
  readonly details: Readonly<Record<string, unknown>>;
}

export interface StoredEvent extends StructuredEvent {
  readonly id: number;
}

export interface EventQuery {
  readonly afterId?: number;
  readonly eventType?: string;
  readonly correlationId?: string;
  readonly actor?: string;
  /**
   * Events about this agent: it is the actor, or the details name it (`agent_id`, `to`, `producer_id`), looked for
   * among the newest AGENT_EVENTS_SCAN_WINDOW events only.
   */
  readonly agentId?: string;
  /** Newest `limit` events (in ascending order); default 1000. */
  readonly limit?: number;
}

export interface EventRepository {
  append(event: StructuredEvent): number;
  query(query?: EventQuery): StoredEvent[];
  count(): number;
  /** Deletes up to `limit` of the oldest events, towards at most `keep` remaining. */
  prune(keep: number, limit: number): PruneResult;
}

/** What the event log is handed of the store: its own repository and transactions. */
export interface LogStorage extends Transactions {
  readonly events: EventRepository;
}

/** How far back (in events) a query by `agentId` looks: a bounded scan (details are not indexed; ~5-40 ms here). */
export const AGENT_EVENTS_SCAN_WINDOW = 20_000;

/** What a caller says about an event; the log adds the timestamp. */
export interface EventInput {
  readonly correlationId: string;
  readonly actor: string;
  readonly eventType: string;
  readonly details?: Record<string, unknown>;
  readonly level?: EventLevel;
  readonly source?: EventSource;
  /** For events ingested from agents: the agent's own timestamp, kept as given when valid. */
  readonly ts?: string;
}

/**
 * What other areas use of the event log (EventLog implements it; the composition root hands in the instance): record an
 * event, or that their own work failed.
 */
export interface EventRecorder {
  record(input: EventInput): StoredEvent;
  /** `<actor>.internal_error` at level ERROR, with the stack; never throws (EventLog.internalError). */
  internalError(actor: string, correlationId: string, err: unknown, details?: Record<string, unknown>): void;
}
