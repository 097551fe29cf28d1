import type { Disposable } from './events';

/** Time as the coordinator sees it. Injected everywhere so timeouts are tested without sleeping. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once after `ms` milliseconds unless the returned handle is disposed first. */
  setTimer(ms: number, fn: () => void): Disposable;
}

const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    // setTimeout fires at once for delays beyond 2^31-1 ms; longer timers are chained.
    let handle: ReturnType<typeof setTimeout>;
    const due = Date.now() + Math.max(0, ms);
    const arm = () => {
      const left = due - Date.now();
      handle = setTimeout(left > MAX_TIMEOUT_MS ? arm : fn, Math.min(Math.max(0, left), MAX_TIMEOUT_MS));
      handle.unref?.();
    };
    arm();
    return { dispose: () => clearTimeout(handle) };
  },
};

interface PendingTimer {
  readonly due: number;
  readonly order: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/** A clock that moves only when told to; timers fire in due order during `advance`. */
export class ManualClock implements Clock {
  private current: number;
  private timers: PendingTimer[] = [];
  private order = 0;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): Disposable {
    const timer: PendingTimer = { due: this.current + Math.max(0, ms), order: this.order++, fn, cancelled: false };
    this.timers.push(timer);
    return {
      dispose: () => {
        timer.cancelled = true;
      },
    };
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, each at its own time. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.cancelled);
      const next = this.timers.filter((t) => t.due <= target).sort((a, b) => a.due - b.due || a.order - b.order)[0];
      if (!next) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.current = Math.max(this.current, next.due);
      next.fn();
    }
    this.current = target;
  }

  /** Number of timers still waiting (for tests). */
  get pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }
}

let lastIsoMs = NaN;
let lastIso = '';

/** ISO 8601 UTC text of an epoch-ms time. Every event is stamped, and many share a millisecond. */
export function isoUtc(ms: number): string {
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
  }
  return lastIso;
}
