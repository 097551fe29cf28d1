import {
  systemClock,
  type BindingStatus,
  type Clock,
  type CoordinatorApi,
  type Disposable,
  type WorktreeInfo,
  type WorktreeRepositoryInfo,
} from '../core/api';
import { KeyedThrottle } from './throttle';

/**
 * Worktree changes come in bursts (a bind is a binding change, a creation, a setup); the views read git again at
 * most this often.
 */
export const WORKTREES_REFRESH_MS = 500;

/** What the Worktrees view and the Agents view's worktree rows show, read together once per refresh. */
export interface WorktreeData {
  readonly repositories: readonly WorktreeRepositoryInfo[];
  readonly worktrees: readonly WorktreeInfo[];
  readonly bindings: readonly BindingStatus[];
}

const EMPTY: WorktreeData = { repositories: [], worktrees: [], bindings: [] };

/**
 * The worktree facts both views share (no `vscode`). git is read only when a view asks after a refresh: a change
 * (`onDidChangeWorktrees`) marks the data stale and tells the views, throttled to one refresh per
 * WORKTREES_REFRESH_MS, and every view that asks then shares the one read. Nothing polls.
 */
export class WorktreeState {
  private api: CoordinatorApi | undefined;
  private subscription: Disposable | undefined;
  private data: Promise<WorktreeData> | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly throttle: KeyedThrottle<'all'>;

  constructor(clock: Clock = systemClock, delayMs = WORKTREES_REFRESH_MS) {
    this.throttle = new KeyedThrottle<'all'>(delayMs, () => this.refresh(), clock);
  }

  /** Follows the API of a (new) coordinator, or none while it is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.subscription = undefined;
    this.throttle.cancel();
    this.api = api;
    if (api) this.subscription = api.onDidChangeWorktrees(() => this.throttle.schedule('all'));
    this.refresh();
  }

  get coordinator(): CoordinatorApi | undefined {
    return this.api;
  }

  /** The facts as of the last refresh (read now if nothing was read since); empty while no coordinator runs. */
  current(): Promise<WorktreeData> {
    const api = this.api;
    if (!api) return Promise.resolve(EMPTY);
    if (this.data) return this.data;
    const data: Promise<WorktreeData> = Promise.all([
      api.worktreeRepositories(),
      api.worktrees(),
      api.worktreeBindings(),
    ]).then(
      ([repositories, worktrees, bindings]) => ({ repositories, worktrees, bindings }),
      () => {
        // A failed read (git timed out, the coordinator stopping) is not kept: the next view that asks reads again.
        if (this.data === data) this.data = undefined;
        return EMPTY;
      },
    );
    this.data = data;
    return data;
  }

  /** Drops what was read and tells the views (now, not throttled: after a command of the user's). */
  refresh(): void {
    this.throttle.cancel();
    this.data = undefined;
    for (const listener of [...this.listeners]) listener();
  }

  onDidChange(listener: () => void): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  dispose(): void {
    this.subscription?.dispose();
    this.throttle.dispose();
    this.listeners.clear();
  }
}
