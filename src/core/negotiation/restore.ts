import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { Guard } from '../kernel/guard';
import type { Transition, Transitions } from '../kernel/transitions';
import type { HitlInvocations } from '../hitl/model';
import type { IdSource } from '../ids';
import type { EventRecorder } from '../log/model';
import { schedulePruning } from '../retention';
import { step, type Delivery } from './delivery';
import type { DebateEngine } from './engine';
import type { Ends } from './ends';
import type { HitlGate } from './hitl';
import { ACTOR } from './journal';
import type { NegotiationRecord, NegotiationRepository } from './model';
import type { Timeouts } from './timeouts';

export interface NegotiationRetention {
  /** A decided or aborted negotiation (and its rounds) is deleted this long after its last change… */
  readonly maxAgeMs: number;
  /** …or once more than this many newer ones have finished. */
  readonly maxFinished: number;
  /** How often pruning runs, and how many negotiations one run deletes at most (a backlog: catch-up runs). */
  readonly intervalMs: number;
  readonly batch: number;
}

/** README, "Debates": finished debates are kept 30 days, at most 10,000; pruned hourly, 100 per run. */
export const NEGOTIATION_RETENTION: NegotiationRetention = {
  maxAgeMs: 30 * 86_400_000,
  maxFinished: 10_000,
  intervalMs: 3_600_000,
  batch: 100,
};

export interface RestoreDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly hitl: Pick<HitlInvocations, 'get'>;
  readonly delivery: Pick<Delivery, 'restore'>;
  readonly timeouts: Pick<Timeouts, 'rearm'>;
  readonly engine: Pick<DebateEngine, 'ask'>;
  readonly gate: Pick<HitlGate, 'apply' | 'waitFor'>;
  readonly ends: Pick<Ends, 'abort'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/**
 * Start and retention: at start the waiting event copies, the timers of open debates, the HITL invocations settled
 * while stopped and the pending engine questions taken up again; finished debates pruned in bounded runs.
 */
export class Restore implements Disposable {
  private readonly retention: NegotiationRetention;
  private readonly pruning: Disposable;

  constructor(
    private readonly deps: RestoreDeps,
    retention: Partial<NegotiationRetention> | undefined,
  ) {
    this.retention = { ...NEGOTIATION_RETENTION, ...retention };
    this.pruning = schedulePruning(deps.clock, this.retention.intervalMs, () => this.pruneFinished());
  }

  /** At start: timers re-armed, HITL invocations settled while stopped applied, pending inference asked again. */
  restore(ctx: CallContext): void {
    const { negotiation } = this.deps.store;
    // Event copies still waiting, of running and of ended negotiations alike (the newest 10,000).
    this.deps.delivery.restore(negotiation.list(10_000));
    for (const rec of negotiation.listUnfinished()) {
      try {
        if (rec.state === 'paused' && rec.pending) {
          const pending = rec.pending;
          const invocation = this.deps.hitl.get(pending.invocationId);
          if (!invocation) {
            this.deps.transitions.run((tx) => {
              this.deps.ends.abort(
                rec,
                `the HITL invocation ${pending.invocationId} is gone`,
                'hitl_unavailable',
                'coordinator',
                pending.stopReason ?? 'hitl',
                step(ctx, tx, false),
              );
              this.deps.settle(rec, tx);
            }, rec.id);
            continue;
          }
          if (invocation.state !== 'pending') this.deps.gate.apply(rec.id, invocation);
          else this.deps.gate.waitFor(rec.id, invocation.id);
          continue;
        }
        this.deps.timeouts.rearm(rec);
        const current = negotiation.latestRound(rec.id);
        if (current?.llm === 'pending') this.deps.engine.ask(rec, current, ctx);
      } catch (err) {
        this.deps.log.internalError(ACTOR, rec.id, err);
      }
    }
  }

  /** One bounded pruning run (logged `negotiation.pruned`); answers whether it left more. */
  pruneFinished(): boolean {
    if (this.deps.guard.isStopped) return false;
    try {
      const before = this.deps.clock.now() - this.retention.maxAgeMs;
      return this.deps.transitions.run(() => {
        const result = this.deps.store.negotiation.pruneFinished(
          before,
          this.retention.maxFinished,
          this.retention.batch,
        );
        if (result.deleted > 0) {
          this.deps.log.record({
            correlationId: this.deps.ids.uuid(),
            actor: ACTOR,
            eventType: 'negotiation.pruned',
            details: {
              negotiations: result.deleted,
              rounds: result.rounds,
              updated_before: isoUtc(before),
              max_finished: this.retention.maxFinished,
            },
          });
        }
        return result.more;
      }, 'negotiation-retention');
    } catch (err) {
      this.deps.log.internalError(ACTOR, 'negotiation-retention', err);
      return false;
    }
  }

  dispose(): void {
    this.pruning.dispose();
  }
}
