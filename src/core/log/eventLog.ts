import { isoUtc, type Clock } from '../clock';
import { Emitter, type Event } from '../events';
import type { EventInput, EventQuery, EventRecorder, LogStorage, StoredEvent } from './model';

export type { EventInput } from './model';

/**
 * The observability sink (RFC §19): every state transition is one structured event
 * {ts, correlation_id, actor, event_type, details}, written to the store and announced to listeners
 * (the editor's Output channel, the CLI's stderr).
 */
export class EventLog implements EventRecorder {
  private readonly recorded = new Emitter<StoredEvent>();
  readonly onDidRecord: Event<StoredEvent> = this.recorded.event;

  constructor(
    private readonly store: LogStorage,
    private readonly clock: Clock,
  ) {}

  record(input: EventInput): StoredEvent {
    const event = {
      ts: input.ts ?? isoUtc(this.clock.now()),
      correlationId: input.correlationId,
      actor: input.actor,
      eventType: input.eventType,
      level: input.level ?? 'INFO',
      source: input.source ?? 'coordinator',
      details: input.details ?? {},
    };
    const id = this.store.events.append(event);
    const stored: StoredEvent = { id, ...event };
    this.recorded.fire(stored);
    return stored;
  }

  /**
   * Records that `actor`'s own work failed: `<actor>.internal_error` at level ERROR, with the stack. Never
   * throws, so timers and handlers can call it from their catch: when even the log cannot be written (the
   * store refuses writes after a failed commit), the failure goes to the console instead.
   */
  internalError(actor: string, correlationId: string, err: unknown, details: Record<string, unknown> = {}): void {
    const error = String((err as Error)?.stack ?? err);
    try {
      this.record({
        correlationId,
        actor,
        eventType: `${actor}.internal_error`,
        level: 'ERROR',
        details: { ...details, error },
      });
    } catch (logged) {
      console.error(`[sw4rm] ${actor}: ${error}\n(and the log could not record it: ${String(logged)})`);
    }
  }

  query(query?: EventQuery): StoredEvent[] {
    return this.store.events.query(query);
  }

  dispose(): void {
    this.recorded.dispose();
  }
}

/** One line for a human: `2026-01-01T00:00:00.000Z INFO registry agent.registered [corr] {details}`. */
export function formatEvent(event: StoredEvent): string {
  return `${oneLine(event.ts)} ${event.level.padEnd(5)} ${oneLine(event.actor)} ${oneLine(event.eventType)} [${oneLine(event.correlationId)}] ${JSON.stringify(event.details)}`;
}

/** Agent-supplied text never breaks a log line: control characters are shown escaped. */
function oneLine(text: string): string {
  return text.replace(
    /[\u0000-\u001f\u007f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
