import type { Clock } from '../clock';
import type { Disposable } from '../events';
import type { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import type { AfterCommit } from '../kernel/transitions';
import { NegotiationError } from '../policy/model';
import type { ProposalRecord, RoomDecision, RoomRepository } from './model';
import { artifactOfKey, revisionKey } from './state';

/** WaitForDecision without timeout_seconds waits this long; a longer timeout is cut to the maximum. */
export const DEFAULT_WAIT_MS = 300_000;
export const MAX_WAIT_MS = 3_600_000;
/** At most this many WaitForDecision calls wait on one artifact at once; one more is refused RESOURCE_EXHAUSTED (BUFFER_FULL). */
export const MAX_WAITERS_PER_ARTIFACT = 64;

interface Waiter {
  readonly resolve: (d: RoomDecision) => void;
  readonly reject: (e: Error) => void;
  dispose(): void;
}

/** What the waiters use: the clock and guard of the room, and the revision's state for a timeout's message. */
export interface WaiterDeps {
  readonly clock: Clock;
  readonly guard: Guard;
  readonly room: Pick<RoomRepository, 'revision'>;
  /** The room's final decisions, told after their commit. */
  readonly decisions: AfterCommit<RoomDecision>;
}

/**
 * The WaitForDecision calls waiting on a revision's final decision: each resolved by it (after the commit, after the
 * views were told), rejected 'deadline' at its timeout on the injected clock, 'unavailable' when its signal aborts or
 * the coordinator stops. At most MAX_WAITERS_PER_ARTIFACT per artifact.
 */
export class DecisionWaiters implements Disposable {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly deadlines: KeyedTimers<Waiter>;
  private readonly listening: Disposable;

  constructor(private readonly deps: WaiterDeps) {
    this.deadlines = new KeyedTimers(deps.clock, deps.guard, () => 'WaitForDecision');
    this.listening = deps.decisions((decision) => this.decided(decision));
  }

  /** Waits on the revision's final decision (there is none yet); see NegotiationRoom.waitForDecision. */
  wait(proposal: ProposalRecord, timeoutMs: number, signal?: AbortSignal): Promise<RoomDecision> {
    if (this.deps.guard.isStopped)
      return Promise.reject(new NegotiationError('unavailable', 'UNAVAILABLE', 'the coordinator is stopping'));
    const waiting = this.count(proposal.artifactId);
    if (waiting >= MAX_WAITERS_PER_ARTIFACT) {
      return Promise.reject(
        new NegotiationError(
          'exhausted',
          'BUFFER_FULL',
          `${waiting} WaitForDecision calls already wait on artifact '${proposal.artifactId}' (at most ${MAX_WAITERS_PER_ARTIFACT}); poll GetDecision or wait again later`,
        ),
      );
    }
    const waitMs = timeoutMs > 0 ? Math.min(timeoutMs, MAX_WAIT_MS) : DEFAULT_WAIT_MS;
    const k = revisionKey(proposal.artifactId, proposal.revision);
    return new Promise<RoomDecision>((resolve, reject) => {
      const set = this.waiters.get(k) ?? new Set<Waiter>();
      this.waiters.set(k, set);
      const onAbort = () => {
        waiter.dispose();
        set.delete(waiter);
        if (set.size === 0 && this.waiters.get(k) === set) this.waiters.delete(k);
        reject(new NegotiationError('unavailable', 'CANCELLED', 'the wait was cancelled'));
      };
      const waiter: Waiter = {
        resolve,
        reject,
        dispose: () => {
          this.deadlines.disarm(waiter);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      this.deadlines.arm(waiter, waitMs, () => {
        waiter.dispose();
        set.delete(waiter);
        if (set.size === 0 && this.waiters.get(k) === set) this.waiters.delete(k);
        reject(
          new NegotiationError(
            'deadline',
            'DEADLINE_EXCEEDED',
            `no final decision on revision ${proposal.revision} of artifact '${proposal.artifactId}' within ${Math.round(waitMs / 1000)} s (it is ${this.deps.room.revision(proposal.artifactId, proposal.revision)?.state ?? proposal.state}); call WaitForDecision again`,
          ),
        );
      });
      set.add(waiter);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** How many WaitForDecision calls wait on the artifact now (any revision): the cap's count, and what tests check. */
  count(artifactId: string): number {
    let n = 0;
    for (const [k, set] of this.waiters) if (artifactOfKey(k) === artifactId) n += set.size;
    return n;
  }

  /** Rejects every waiter 'unavailable' (the coordinator is stopping). */
  dispose(): void {
    this.listening.dispose();
    for (const set of this.waiters.values()) {
      for (const w of set) {
        w.dispose();
        w.reject(
          new NegotiationError(
            'unavailable',
            'UNAVAILABLE',
            'the coordinator is stopping; call WaitForDecision again after it restarts',
          ),
        );
      }
    }
    this.waiters.clear();
    this.deadlines.clear();
  }

  private decided(decision: RoomDecision): void {
    const k = revisionKey(decision.artifactId, decision.revision);
    const list = this.waiters.get(k);
    this.waiters.delete(k);
    for (const w of list ?? []) {
      w.dispose();
      w.resolve(decision);
    }
  }
}
