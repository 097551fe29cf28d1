/**
 * The one error guard of the core: work the coordinator does on its own (a timer firing, an effect after a commit, a
 * listener) runs through it, so a fault in it is reported and never stops the coordinator or the work after it.
 * Areas hold one each, built with how they report (usually `log.internalError`), and stop it when they are disposed:
 * from then on nothing runs through it.
 */
export class Guard {
  private stopped = false;

  /** `report(context, err)`: how a fault is told; `context` is what the caller passed to `run` (an id, or what was under way). */
  constructor(private readonly report: (context: string, err: unknown) => void) {}

  /** Runs `fn` unless stopped; a throw is reported with `context`, never passed on. */
  run(context: string, fn: () => void): void {
    if (this.stopped) return;
    try {
      fn();
    } catch (err) {
      try {
        this.report(context, err);
      } catch (reportErr) {
        console.error('[sw4rm] reporting an internal error failed:', reportErr, 'while reporting:', err);
      }
    }
  }

  /** Whether `stop` was called (the owner is disposed). */
  get isStopped(): boolean {
    return this.stopped;
  }

  stop(): void {
    this.stopped = true;
  }
}
