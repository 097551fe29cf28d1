/** A worker that ends by itself is restarted, up to MAX_RESTARTS times within CRASH_WINDOW_MS; then the editor gives up. */
export const MAX_RESTARTS = 3;
export const CRASH_WINDOW_MS = 5 * 60_000;

/**
 * How many crashes of the coordinator's worker the editor restarts from (no `vscode`; unit tested). `crashed(at)` says
 * whether to restart (and which restart this is) or give up; giving up forgets the crashes, so that a restart the user
 * asks for afterwards starts a new budget.
 */
export class CrashBudget {
  private crashes: number[] = [];

  constructor(
    private readonly maxRestarts = MAX_RESTARTS,
    private readonly windowMs = CRASH_WINDOW_MS,
  ) {}

  crashed(
    at: number,
  ): { readonly restart: true; readonly attempt: number } | { readonly restart: false; readonly crashes: number } {
    this.crashes = [...this.crashes.filter((t) => at - t < this.windowMs), at];
    if (this.crashes.length <= this.maxRestarts) return { restart: true, attempt: this.crashes.length };
    const crashes = this.crashes.length;
    this.crashes = [];
    return { restart: false, crashes };
  }

  /** "at most 3 in 5 minutes". */
  describe(): string {
    const minutes = this.windowMs / 60_000;
    return `at most ${this.maxRestarts} in ${minutes} minute${minutes === 1 ? '' : 's'}`;
  }
}
