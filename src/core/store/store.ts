import type { Event } from '../events';
import type { AgentRecord, AgentRepository } from '../registry/model';
export type { AgentRecord, AgentRepository };
import type { HitlRepository } from '../hitl/model';
import type { RouterRepository } from '../router/model';
import type { PruneResult } from '../retention';

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

/** What an area needs of the store besides its own repository: transactions and durability. */
export interface Transactions {
  /** Runs `fn` in one transaction: all of its writes commit together or none do. */
  transaction<T>(fn: () => T): T;
  /**
   * Runs `fn` once everything written so far is durable: at once when nothing is pending, else after the
   * pending commit. Work that must not be seen before it is durable (stream writes, answers) goes here.
   */
  afterCommit(fn: () => void): void;
  /** Resolves when everything written so far is committed; rejects if that commit failed. */
  whenDurable(): Promise<void>;
}

/** The coordinator's durable state. One implementation today (SQLite); the interface keeps core free of it. */
export interface Store extends Transactions {
  /** Where the store lives, for messages to the user. */
  readonly location: string;
  readonly schemaVersion: number;
  readonly agents: AgentRepository;
  readonly events: EventRepository;
  readonly router: RouterRepository;
  readonly hitl: HitlRepository;
  /**
   * Fires once when a shared (group) commit fails. The store then refuses every further transaction: the
   * callers' memory may hold effects of the rolled-back writes, so the owner must stop and start afresh
   * from the store, exactly as after a crash.
   */
  readonly onDidFail: Event<StoreFailedError>;
  close(): void;
}

/** A commit failed (disk full, I/O error): its writes were rolled back and the store takes no more. */
export class StoreFailedError extends Error {
  constructor(readonly location: string, cause: Error) {
    super(`The SW4RM store ${location} could not commit (${cause.message}). What was not yet committed was rolled back, and ` +
      'no agent was told it was accepted. The coordinator must restart to continue from what is stored; ' +
      'check free disk space and the data folder first.', { cause });
    this.name = 'StoreFailedError';
  }
}

/** The store cannot be opened. The message names the file and what the user can do. */
export class StoreOpenError extends Error {
  constructor(
    readonly location: string,
    readonly reason: 'corrupt' | 'newer-schema' | 'unreadable' | 'locked',
    message: string,
  ) {
    super(message);
    this.name = 'StoreOpenError';
  }
}
