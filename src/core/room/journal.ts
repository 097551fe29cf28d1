import type { EventRecorder } from '../log/model';

/** The actor of the room's own events (and of its internal errors). */
export const ACTOR = 'room';

/** What the room writes to the event log: one event (inside the transition that caused it). */
export class RoomJournal {
  constructor(private readonly log: Pick<EventRecorder, 'record'>) {}

  record(
    correlationId: string,
    actor: string,
    eventType: string,
    details: Record<string, unknown>,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    this.log.record({ correlationId, actor, eventType, level, details });
  }
}
