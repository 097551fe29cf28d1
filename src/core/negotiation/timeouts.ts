import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import type { Transition, Transitions } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import { step } from './delivery';
import type { Ends } from './ends';
import { ACTOR } from './journal';
import type { NegotiationRecord, NegotiationRepository } from './model';
import { deadlines, timedOutAt, type TimeoutKind } from './state';

export interface TimeoutsDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly ends: Pick<Ends, 'stop'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

const KINDS: readonly TimeoutKind[] = ['round', 'debate'];
const keyOf = (id: string, which: TimeoutKind) => `${id}\u0000${which}`;

/**
 * The round and debate timeouts of open debates, on the Clock (KeyedTimers, one per negotiation and kind): armed from
 * the record at the end of every transition (and at start), a timeout that still applies when it fires is a stop
 * (`timeout`) and the tie-break.
 */
export class Timeouts implements Disposable {
  private readonly timers: KeyedTimers<string>;

  constructor(private readonly deps: TimeoutsDeps) {
    // A fault in a timeout is reported with the negotiation id.
    this.timers = new KeyedTimers(deps.clock, deps.guard, (key) => key.slice(0, key.lastIndexOf('\u0000')));
  }

  /** The record's timeouts, in place of those it had: through `tx` once it commits, or at once (restore). */
  rearm(rec: NegotiationRecord, tx?: Transition): void {
    for (const which of KINDS) {
      if (tx) tx.disarm(this.timers, keyOf(rec.id, which));
      else this.timers.disarm(keyOf(rec.id, which));
    }
    if (this.deps.guard.isStopped) return;
    const now = this.deps.clock.now();
    for (const { which, due } of deadlines(rec)) {
      const fire = () => this.timedOut(rec.id, which, due);
      if (tx) tx.arm(this.timers, keyOf(rec.id, which), Math.max(0, due - now), fire);
      else this.timers.arm(keyOf(rec.id, which), Math.max(0, due - now), fire);
    }
  }

  dispose(): void {
    this.timers.dispose();
  }

  private timedOut(id: string, which: TimeoutKind, due: number): void {
    const rec = this.deps.store.negotiation.get(id);
    if (!rec) return;
    const now = this.deps.clock.now();
    if (!timedOutAt(rec, which, due, now)) return;
    const ctx: CallContext = { correlationId: rec.id };
    this.deps.transitions.run((tx) => {
      this.deps.log.record({
        correlationId: rec.id,
        actor: ACTOR,
        eventType: 'negotiation.timeout',
        level: 'WARN',
        details: {
          negotiation_id: rec.id,
          which,
          round: rec.rounds,
          due: isoUtc(due),
          limit_ms: which === 'round' ? rec.effective.policy.roundTimeoutMs : rec.effective.debateTimeoutMs,
        },
      });
      this.deps.ends.stop(rec, 'timeout', step(ctx, tx, false));
      rec.updatedAt = now;
      this.deps.store.negotiation.put(rec);
      this.deps.settle(rec, tx);
    }, rec.id);
  }
}
