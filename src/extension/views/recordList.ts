import * as vscode from 'vscode';

/** A row of a flat view: the kind of record and its id, one stable object per id (menus and commands get it). */
export interface RecordNode<K extends string> {
  readonly kind: K;
  readonly id: string;
}

/**
 * A flat tree of records listed from the coordinator: each refresh lists them again (ignoring an answer from a
 * coordinator that is no longer the current one), keeps them for the rows and for commands on a row, and hands out
 * one node per id.
 */
export class RecordListProvider<K extends string, S, R> implements vscode.TreeDataProvider<RecordNode<K>>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<RecordNode<K> | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly nodes = new Map<string, RecordNode<K>>();
  private readonly records = new Map<string, R>();

  constructor(
    private readonly kind: K,
    /** What to list from: the coordinator's API, or undefined while it is stopped. */
    private readonly source: () => S | undefined,
    /** The records in the view's order. */
    private readonly list: (source: S) => Promise<R[]>,
    private readonly idOf: (record: R) => string,
    private readonly item: (record: R, node: RecordNode<K>) => vscode.TreeItem,
  ) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  /** The record of a row, as of the last listing. */
  record(id: string): R | undefined {
    return this.records.get(id);
  }

  async getChildren(node?: RecordNode<K>): Promise<RecordNode<K>[]> {
    if (node) return [];
    const source = this.source();
    const listed = source !== undefined ? await this.list(source).catch(() => []) : [];
    const shown = source === this.source() ? listed : [];
    this.records.clear();
    for (const record of shown) this.records.set(this.idOf(record), record);
    for (const id of [...this.nodes.keys()]) if (!this.records.has(id)) this.nodes.delete(id);
    return shown.map((record) => this.node(this.idOf(record)));
  }

  getParent(): RecordNode<K> | undefined {
    return undefined;
  }

  getTreeItem(node: RecordNode<K>): vscode.TreeItem {
    const record = this.records.get(node.id);
    return record === undefined ? new vscode.TreeItem(`${node.kind} ${node.id}`) : this.item(record, node);
  }

  dispose(): void {
    this.changed.dispose();
  }

  private node(id: string): RecordNode<K> {
    let node = this.nodes.get(id);
    if (!node) this.nodes.set(id, (node = { kind: this.kind, id }));
    return node;
  }
}
