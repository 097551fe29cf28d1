import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { writePath } from './paths';
import {
  countsOf,
  type NodeCounts,
  type NodeRecord,
  type ValidationIssue,
  type WorkflowDefinition,
  type WorkflowRecord,
  type WorkflowRepository,
  type WorkflowState,
  type WorkflowSummary,
} from './model';

type Row = Record<string, unknown>;

/** The repository's statements (exported so that a test can check their query plans). */
export const WORKFLOW_SQL = {
  insertWorkflow: 'INSERT INTO workflows (workflow_id, active, updated_at, record, counts) VALUES (?, ?, ?, ?, ?)',
  insertDefinition: 'INSERT INTO workflow_definitions (workflow_id, definition) VALUES (?, ?)',
  putWorkflow: 'UPDATE workflows SET active = ?, updated_at = ?, record = ?, counts = ? WHERE workflow_id = ?',
  putNode: `INSERT INTO workflow_nodes (workflow_id, node_id, record) VALUES (?, ?, ?)
    ON CONFLICT(workflow_id, node_id) DO UPDATE SET record = excluded.record`,
  get: 'SELECT w.record, d.definition FROM workflows w JOIN workflow_definitions d ON d.workflow_id = w.workflow_id WHERE w.workflow_id = ?',
  nodes: 'SELECT record FROM workflow_nodes WHERE workflow_id = ?',
  active: 'SELECT workflow_id FROM workflows WHERE active = 1',
  recent: 'SELECT record, counts FROM workflows ORDER BY active DESC, updated_at DESC LIMIT ?',
  dataRows: 'SELECT path, value FROM workflow_data WHERE workflow_id = ? ORDER BY seq',
  dataClear: 'DELETE FROM workflow_data WHERE workflow_id = ?',
  dataInsert: 'INSERT INTO workflow_data (workflow_id, seq, path, value) VALUES (?, ?, ?, ?)',
  dataLog:
    "SELECT COALESCE(MAX(seq), 0) AS seq, COALESCE(SUM(CASE WHEN path = '' THEN 0 ELSE length(path) + length(value) END), 0) AS chars FROM workflow_data WHERE workflow_id = ?",
} as const;

/** The workflow's own fields as stored in `record` (the definition, its warnings, workflow_data and the nodes are elsewhere). */
type StoredWorkflow = Omit<WorkflowRecord, 'definition' | 'warnings' | 'nodes' | 'data'> & {
  readonly nodeCount: number;
};

const ACTIVE_STATES: ReadonlySet<WorkflowState> = new Set(['RUNNING', 'WAITING']);

/**
 * Workflows (schema version 17): one `workflows` row per workflow (its own fields and node counts, a few hundred bytes,
 * rewritten by putWorkflow), its definition and warnings in `workflow_definitions` (written once at create: a row is
 * rewritten whole, so the definition is kept out of the row that changes), its workflow_data in `workflow_data` (a
 * snapshot and the writes since, replayed on read), one `workflow_nodes` row per node (rewritten by putNode).
 */
export class SqliteWorkflowRepository implements WorkflowRepository {
  private readonly s: Record<keyof typeof WORKFLOW_SQL, StatementSync>;

  constructor(db: DatabaseSync) {
    this.s = Object.fromEntries(Object.entries(WORKFLOW_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
      keyof typeof WORKFLOW_SQL,
      StatementSync
    >;
  }

  create(record: WorkflowRecord): void {
    const counts = countsOf(record.nodes.values());
    this.s.insertWorkflow.run(
      record.workflowId,
      ACTIVE_STATES.has(record.state) ? 1 : 0,
      record.updatedAt,
      JSON.stringify(stored(record)),
      JSON.stringify(counts),
    );
    this.s.insertDefinition.run(
      record.workflowId,
      JSON.stringify({ definition: record.definition, warnings: record.warnings }),
    );
    this.putData(record.workflowId, 0, record.data);
    for (const node of record.nodes.values()) this.putNode(record.workflowId, node);
  }

  putData(workflowId: string, seq: number, json: string): void {
    this.s.dataClear.run(workflowId);
    this.s.dataInsert.run(workflowId, seq, '', json);
  }

  appendData(workflowId: string, seq: number, path: readonly string[], valueJson: string): void {
    this.s.dataInsert.run(workflowId, seq, JSON.stringify(path), valueJson);
  }

  dataLog(workflowId: string): { readonly seq: number; readonly chars: number } {
    const row = this.s.dataLog.get(workflowId) as Row;
    return { seq: Number(row.seq), chars: Number(row.chars) };
  }

  /** workflow_data as JSON text: its snapshot with every write since replayed in order. */
  private dataOf(workflowId: string): string {
    const rows = this.s.dataRows.all(workflowId) as Row[];
    if (rows.length === 1 && rows[0].path === '') return String(rows[0].value);
    let data: Record<string, unknown> = {};
    for (const r of rows) {
      const value = JSON.parse(String(r.value)) as unknown;
      if (r.path === '') data = value as Record<string, unknown>;
      else writePath(data, JSON.parse(String(r.path)) as string[], value);
    }
    return JSON.stringify(data);
  }

  putWorkflow(record: WorkflowRecord, counts: Readonly<NodeCounts>): void {
    this.s.putWorkflow.run(
      ACTIVE_STATES.has(record.state) ? 1 : 0,
      record.updatedAt,
      JSON.stringify(stored(record)),
      JSON.stringify(counts),
      record.workflowId,
    );
  }

  putNode(workflowId: string, node: NodeRecord): void {
    this.s.putNode.run(workflowId, node.nodeId, JSON.stringify(node));
  }

  get(workflowId: string): WorkflowRecord | undefined {
    const row = this.s.get.get(workflowId) as Row | undefined;
    if (!row) return undefined;
    const own = JSON.parse(String(row.record)) as StoredWorkflow;
    const { definition, warnings } = JSON.parse(String(row.definition)) as {
      definition: WorkflowDefinition;
      warnings: ValidationIssue[];
    };
    const byId = new Map<string, NodeRecord>();
    for (const r of this.s.nodes.all(workflowId) as Row[]) {
      const node = JSON.parse(String(r.record)) as NodeRecord;
      byId.set(node.nodeId, node);
    }
    // In the author's order (the definition's), whatever order the rows come in.
    const nodes = new Map<string, NodeRecord>();
    for (const n of definition.nodes) {
      const node = byId.get(n.nodeId);
      if (node) nodes.set(n.nodeId, node);
    }
    const { nodeCount: _count, ...fields } = own;
    return { ...fields, data: this.dataOf(workflowId), definition, warnings, nodes };
  }

  listActive(): WorkflowRecord[] {
    return (this.s.active.all() as Row[])
      .map((r) => this.get(String(r.workflow_id)))
      .filter((w): w is WorkflowRecord => w !== undefined);
  }

  listRecent(limit: number): WorkflowSummary[] {
    return (this.s.recent.all(Math.max(0, Math.floor(limit))) as Row[]).map((r) => {
      const own = JSON.parse(String(r.record)) as StoredWorkflow;
      return {
        workflowId: own.workflowId,
        state: own.state,
        reason: own.reason,
        nodeCount: own.nodeCount,
        counts: JSON.parse(String(r.counts)) as NodeCounts,
        createdAt: own.createdAt,
        startedAt: own.startedAt,
        completedAt: own.completedAt,
        updatedAt: own.updatedAt,
      };
    });
  }
}

function stored(record: WorkflowRecord): StoredWorkflow {
  return {
    workflowId: record.workflowId,
    state: record.state,
    createdAt: record.createdAt,
    createdBy: record.createdBy,
    startedAt: record.startedAt,
    completedAt: record.completedAt,
    startedBy: record.startedBy,
    reason: record.reason,
    updatedAt: record.updatedAt,
    nodeCount: record.nodes.size,
  };
}
