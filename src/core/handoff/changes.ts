import type { Clock } from '../clock';
import type { Disposable } from '../events';
import type { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import { CommitEmitter, Transitions, type Transition } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import { EXPIRY_RETRY_MS } from './options';
import type { HandoffChange, HandoffRecord, HandoffStorage } from './model';
import { answerBy, draftOf, isOpen, withoutContext, type HandoffMemory, type OpenRecord } from './state';

export const ACTOR = 'handoff';

export interface ChangeDeps {
  readonly store: HandoffStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
}

/**
 * How a handoff changes: one `Transitions.run` whose body writes the record, its `handoff.*` event and its notices;
 * then, once the store took it, memory follows (HandoffMemory), the handoff's timer follows its answer-by time and the
 * listeners are told (`onDidChange`), in that order. A rolled-back change leaves all three as they were.
 */
export class HandoffChanges implements Disposable {
  readonly changed = new CommitEmitter<HandoffChange>();
  /** One timer per PENDING handoff, armed for its answer-by time (state.ts answerBy). */
  readonly timers: KeyedTimers<string>;
  private readonly transitions: Transitions;

  /** `timeUp(requestId)`: what a handoff's timer does (timeouts.ts). */
  constructor(
    private readonly deps: ChangeDeps,
    private readonly memory: HandoffMemory,
    private readonly answerWindowMs: number,
    private readonly guard: Guard,
    private readonly timeUp: (requestId: string) => void,
  ) {
    this.transitions = new Transitions(deps.store, guard);
    this.timers = new KeyedTimers(deps.clock, guard);
  }

  run<T>(body: (tx: Transition) => T, context: string): T {
    return this.transitions.run(body, context);
  }

  /** Changes `record` through a copy (draftOf) in one transition; the copy becomes the memory record once committed. Answers it. */
  change(record: OpenRecord, fn: (draft: OpenRecord, tx: Transition) => void, context: string): OpenRecord {
    return this.run((tx) => {
      const draft = draftOf(record);
      fn(draft, tx);
      this.settle(tx, draft);
      return draft;
    }, context);
  }

  /**
   * Inside a transition, after `record` was written: once committed, memory holds it (an ended one leaves), its timer
   * follows its answer-by time (disarmed when it has none), and the listeners are told.
   */
  settle(tx: Transition, record: HandoffRecord): void {
    const { requestId, state } = record;
    if (isOpen(record)) {
      const open = withoutContext(record);
      tx.install(() => this.memory.apply(open));
      this.armIn(tx, record);
    } else {
      tx.install(() => this.memory.remove(requestId));
      tx.disarm(this.timers, requestId);
    }
    tx.notify(this.changed, { requestId, state });
  }

  /** Memory back to what the store holds for `requestId` (after a transaction that wrote it was rolled back), its timer re-armed. */
  reload(requestId: string): void {
    this.run((tx) => {
      const stored = this.deps.store.handoffs.get(requestId);
      if (stored && isOpen(stored)) {
        const open = withoutContext(stored);
        tx.install(() => this.memory.apply(open));
        this.armIn(tx, stored);
      } else {
        tx.install(() => this.memory.remove(requestId));
        tx.disarm(this.timers, requestId);
      }
      tx.notify(this.changed, { requestId, state: stored?.state ?? 'CANCELLED' });
    }, 'reload');
  }

  /** Outside a transition (restore, a timer that fired early): the timer armed for what memory holds now. */
  arm(record: HandoffRecord): void {
    if (this.guard.isStopped) return;
    const due = answerBy(record, this.answerWindowMs);
    if (due === null) this.timers.disarm(record.requestId);
    else
      this.timers.arm(record.requestId, Math.max(0, due - this.deps.clock.now()), () => this.timeUp(record.requestId));
  }

  /** A timeout whose transaction failed (rolled back: nothing changed) is decided again a moment later. */
  retry(requestId: string): void {
    if (this.guard.isStopped) return;
    this.timers.arm(requestId, EXPIRY_RETRY_MS, () => this.timeUp(requestId));
  }

  /** The transition's `handoff.*` event. */
  event(
    record: HandoffRecord,
    actor: string,
    eventType: string,
    details: Record<string, unknown>,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    this.deps.log.record({
      correlationId: record.correlationId,
      actor,
      eventType,
      level,
      details: { request_id: record.requestId, from_agent: record.fromAgent, state: record.state, ...details },
    });
  }

  /** The stored record (with its context), or the memory one when the store has none (never: a committed change). */
  full(record: HandoffRecord): HandoffRecord {
    return this.deps.store.handoffs.get(record.requestId) ?? record;
  }

  dispose(): void {
    this.timers.clear();
    this.changed.dispose();
  }

  private armIn(tx: Transition, record: HandoffRecord): void {
    const due = answerBy(record, this.answerWindowMs);
    if (due === null) {
      tx.disarm(this.timers, record.requestId);
      return;
    }
    const requestId = record.requestId;
    tx.arm(this.timers, requestId, Math.max(0, due - this.deps.clock.now()), () => this.timeUp(requestId));
  }
}
