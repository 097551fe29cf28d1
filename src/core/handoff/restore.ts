import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { IdSource } from '../ids';
import type { EventRecorder } from '../log/model';
import { ACTOR, type HandoffChanges } from './changes';
import type { HandoffRecord, HandoffRepository } from './model';
import { HANDOFF_RETENTION_BATCH } from './options';
import type { HandoffMemory, OpenRecord } from './state';

export interface RestoreDeps {
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly ids: IdSource;
  readonly guard: Guard;
  readonly handoffs: Pick<HandoffRepository, 'listTransferred' | 'listOpen' | 'pruneEnded'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  /** HandoffOptions.maxTransfersInMemory and retentionDays. */
  readonly maxTransfersInMemory: number;
  readonly retentionDays: number;
  readonly answerBy: (record: HandoffRecord) => number | null;
  /** leaving.ts, carry.ts, timeouts.ts. */
  readonly acceptorGone: (record: HandoffRecord) => string | undefined;
  readonly acceptorLeft: (record: OpenRecord, why: string) => void;
  readonly reconcileSwitches: () => number;
  readonly timeUp: (requestId: string) => void;
}

/** Restart and retention: the area back from the store at start, and ended handoffs deleted after retentionDays. */
export class HandoffRestore {
  constructor(private readonly deps: RestoreDeps) {}

  /** At start: open handoffs back in memory with their timers (a passed expiry decided now), the transferred work rebuilt. */
  restore(ctx: CallContext): void {
    const { memory, changes, guard, clock } = this.deps;
    const open = changes.run((tx) => {
      const newest = this.deps.handoffs.listTransferred(this.deps.maxTransfersInMemory + 1);
      const records = this.deps.handoffs.listOpen();
      tx.install(() => {
        memory.beyondMemory = newest.length > this.deps.maxTransfersInMemory;
        for (const entry of newest.slice(0, this.deps.maxTransfersInMemory).reverse()) memory.addTransfer(entry);
        for (const record of records) memory.apply(record);
      });
      return records;
    }, 'restore');
    // Accepted by an agent that left or failed while the coordinator was stopped (or whose departure was not recorded).
    let returned = 0;
    for (const record of open) {
      const gone = this.deps.acceptorGone(record);
      if (gone === undefined) continue;
      returned++;
      guard.run('restore', () => this.deps.acceptorLeft(record, gone));
    }
    const withdrawn = this.deps.reconcileSwitches();
    let expired = 0;
    for (const record of open) {
      const due = this.deps.answerBy(record);
      if (due === null) continue;
      if (record.expiresAt! <= clock.now()) expired++;
      if (due <= clock.now()) this.deps.timeUp(record.requestId);
      else changes.arm(record);
    }
    if (open.length > 0 || memory.transfersHeld > 0 || withdrawn > 0) {
      this.deps.log.record({
        correlationId: ctx.correlationId,
        actor: ACTOR,
        eventType: 'handoff.restored',
        details: {
          open: open.length,
          pending: open.filter((r) => r.state === 'PENDING').length,
          expired_while_stopped: expired,
          acceptor_gone: returned,
          switches_withdrawn: withdrawn,
          transferred: memory.transfersHeld,
          transfers_beyond_memory: memory.beyondMemory,
        },
      });
    }
  }

  /** One bounded retention run (logged `handoff.pruned`); answers whether it left more. */
  pruneEnded(): boolean {
    const { guard, memory, changes } = this.deps;
    if (guard.isStopped) return false;
    try {
      const before = this.deps.clock.now() - this.deps.retentionDays * 86_400_000;
      return changes.run((tx) => {
        const pruned = this.deps.handoffs.pruneEnded(before, HANDOFF_RETENTION_BATCH);
        if (pruned.deleted > 0) {
          this.deps.log.record({
            correlationId: this.deps.ids.uuid(),
            actor: ACTOR,
            eventType: 'handoff.pruned',
            details: {
              handoffs: pruned.deleted,
              transfers_ended: pruned.transferred.length,
              ended_before: isoUtc(before),
              retention_days: this.deps.retentionDays,
            },
          });
        }
        tx.install(() => {
          for (const entry of pruned.transferred) memory.dropTransfer(entry.requestId);
        });
        return pruned.more;
      }, 'retention');
    } catch (err) {
      this.deps.log.internalError(ACTOR, 'handoff-retention', err);
      return false;
    }
  }
}
