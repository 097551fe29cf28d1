import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable } from '../../core/api';
import { KeyedThrottle } from '../throttle';

/**
 * The rows of a tree view listed from the running coordinator. `api` is its API, undefined while it is stopped: the
 * rows list nothing then, so that the view's "The coordinator is not running" welcome shows. `refresh()` makes the
 * tree ask for its rows again; a listing may set the view's message (`showMessage`).
 */
export abstract class CoordinatorRows<N> implements vscode.TreeDataProvider<N>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<N | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly messageChanged = new vscode.EventEmitter<string | undefined>();
  /** Fires with the view's message as a listing sets it. */
  readonly onDidChangeMessage = this.messageChanged.event;
  /** The running coordinator's API, or undefined while it is stopped. */
  api: CoordinatorApi | undefined;

  abstract getChildren(node?: N): Promise<N[]>;
  abstract getTreeItem(node: N): vscode.TreeItem;

  refresh(): void {
    this.changed.fire(undefined);
  }

  dispose(): void {
    this.changed.dispose();
    this.messageChanged.dispose();
  }

  /**
   * What `list` answers from the current API; undefined while no coordinator runs, and when another one was bound
   * while it listed (an answer of a coordinator that is no longer the current one is never shown).
   */
  protected async listed<T>(list: (api: CoordinatorApi) => Promise<T>): Promise<T | undefined> {
    const api = this.api;
    if (!api) return undefined;
    const answer = await list(api);
    return api === this.api ? answer : undefined;
  }

  protected showMessage(message: string | undefined): void {
    this.messageChanged.fire(message);
  }
}

/**
 * One node object per key, kept while its row is listed: a tree view keeps a row's selection and expansion by its
 * node, and commands on a row get that node.
 */
export class NodeCache<N, K = string> {
  private readonly nodes = new Map<K, N>();

  /** The node of `key`, made once. */
  get(key: K, make: () => N): N {
    let node = this.nodes.get(key);
    if (!node) this.nodes.set(key, (node = make()));
    return node;
  }

  /** Forgets the nodes whose key is not in `listed`. */
  keepOnly(listed: { has(key: K): boolean }): void {
    this.retain((_node, key) => listed.has(key));
  }

  /** Forgets the nodes `alive` says no to. */
  retain(alive: (node: N, key: K) => boolean): void {
    for (const [key, node] of [...this.nodes]) if (!alive(node, key)) this.nodes.delete(key);
  }

  clear(): void {
    this.nodes.clear();
  }
}

/** A count a view shows as its badge (none at 0), with an event when it changes (the status bar follows it). */
export class ViewCount implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<number>();
  /** Fires with the count when it changes. */
  readonly onDidChange = this.changed.event;
  /** As of the last `show`. */
  value = 0;

  constructor(private readonly tooltip: (count: number) => string) {}

  show(view: vscode.TreeView<unknown>, count: number): void {
    view.badge = count > 0 ? { value: count, tooltip: this.tooltip(count) } : undefined;
    if (count === this.value) return;
    this.value = count;
    this.changed.fire(count);
  }

  dispose(): void {
    this.changed.dispose();
  }
}

export interface LiveTreeOptions {
  readonly showCollapseAll?: boolean;
}

/**
 * A tree view that follows the running coordinator live while it is shown: `bind` gives its rows the API of a (new)
 * coordinator, or none while it is stopped, and follows that API's change events (`follow`); the events are coalesced
 * to one refresh per `refreshMs`, and only while the view is visible: a change while it is hidden marks it stale, and
 * it refreshes when it is shown again.
 */
export abstract class LiveTreeView<N, R extends CoordinatorRows<N>> implements vscode.Disposable {
  protected readonly view: vscode.TreeView<N>;
  private following: Disposable[] = [];
  /** A change arrived while the view was hidden: it refreshes when shown. */
  private stale = false;
  private readonly throttle: KeyedThrottle<'changed'>;
  private readonly owned: vscode.Disposable[] = [];

  constructor(
    protected readonly rows: R,
    viewId: string,
    refreshMs: number,
    options: LiveTreeOptions = {},
  ) {
    this.view = vscode.window.createTreeView(viewId, { treeDataProvider: rows, ...options });
    this.throttle = new KeyedThrottle<'changed'>(refreshMs, () => this.refreshIfVisible());
    this.owned.push(
      this.view.onDidChangeVisibility(({ visible }) => {
        if (visible && this.stale) this.refreshIfVisible();
      }),
      rows.onDidChangeMessage((message) => {
        this.view.message = message;
      }),
    );
  }

  /** The running coordinator's API, or undefined while it is stopped. */
  protected get api(): CoordinatorApi | undefined {
    return this.rows.api;
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    for (const subscription of this.following) subscription.dispose();
    this.throttle.cancel();
    this.rows.api = api;
    this.following = api ? this.follow(api, () => this.throttle.schedule('changed')) : [];
    this.stale = true;
    this.refreshIfVisible();
  }

  refresh(): void {
    this.stale = false;
    this.rows.refresh();
  }

  dispose(): void {
    for (const subscription of this.following) subscription.dispose();
    this.throttle.dispose();
    for (const subscription of this.owned) subscription.dispose();
    this.view.dispose();
    this.rows.dispose();
  }

  /** The change events of `api` the rows follow, each calling `changed`. */
  protected abstract follow(api: CoordinatorApi, changed: () => void): Disposable[];

  /** Disposed with the view. */
  protected own(...disposables: vscode.Disposable[]): void {
    this.owned.push(...disposables);
  }

  protected refreshIfVisible(): void {
    if (this.view.visible) this.refresh();
    else this.stale = true;
  }
}
