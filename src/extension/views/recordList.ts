import * as vscode from 'vscode';
import type { CoordinatorApi } from '../../core/api';
import { CoordinatorRows, NodeCache } from './liveTree';

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
export class RecordListProvider<K extends string, R> extends CoordinatorRows<RecordNode<K>> {
  private readonly nodes = new NodeCache<RecordNode<K>>();
  private readonly records = new Map<string, R>();

  constructor(
    private readonly kind: K,
    /** The records in the view's order. */
    private readonly list: (api: CoordinatorApi) => Promise<R[]>,
    private readonly idOf: (record: R) => string,
    private readonly item: (record: R, node: RecordNode<K>) => vscode.TreeItem,
  ) {
    super();
  }

  /** The record of a row, as of the last listing. */
  record(id: string): R | undefined {
    return this.records.get(id);
  }

  async getChildren(node?: RecordNode<K>): Promise<RecordNode<K>[]> {
    if (node) return [];
    const shown = (await this.listed((api) => this.list(api).catch(() => []))) ?? [];
    this.records.clear();
    for (const record of shown) this.records.set(this.idOf(record), record);
    this.nodes.keepOnly(this.records);
    return shown.map((record) => {
      const id = this.idOf(record);
      return this.nodes.get(id, () => ({ kind: this.kind, id }));
    });
  }

  getParent(): RecordNode<K> | undefined {
    return undefined;
  }

  getTreeItem(node: RecordNode<K>): vscode.TreeItem {
    const record = this.records.get(node.id);
    return record === undefined ? new vscode.TreeItem(`${node.kind} ${node.id}`) : this.item(record, node);
  }
}
