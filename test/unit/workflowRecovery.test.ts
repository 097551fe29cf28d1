import { strict as assert } from 'node:assert';
import type { DatabaseSync } from 'node:sqlite';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { NodeRecord } from '../../src/core/workflow/model';
import { Workflows } from '../../src/core/workflow/workflows';
import { ctx } from '../support/routerHarness';
import { WorkflowHarness, definition } from '../support/workflowHarness';

/** The store's SQLite connection, for a test that damages what a coordinator stored while it is stopped. */
function database(store: CoordinatorStore): DatabaseSync {
  return (store as unknown as { engine: { database: DatabaseSync } }).engine.database;
}

describe('Workflows: internal errors, restores that fail, schedules on resume, per-transition work', () => {
  let h: WorkflowHarness;

  beforeEach(() => {
    h = new WorkflowHarness();
  });

  afterEach(() => h.dispose());

  it("an error while a task's end is applied FAILS the node with the internal error (memory and store agree), and the workflow moves on", async () => {
    h.agent('x');
    const id = h.create(
      definition('throws', [
        { nodeId: 'a', agentId: 'x' },
        { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
      ]),
    );
    h.start(id);
    const repo = h.store.workflows;
    const putNode = repo.putNode.bind(repo);
    let thrown = 0;
    repo.putNode = (workflowId: string, node: NodeRecord) => {
      if (node.nodeId === 'a' && node.status === 'COMPLETED' && thrown++ === 0)
        throw new Error('disk hiccup (injected)');
      putNode(workflowId, node);
    };
    await h.finish('x');
    assert.equal(thrown, 1, 'the fault was injected');
    assert.equal(h.task(`wf:${id}:a:1`).state, 'COMPLETED', 'the task itself ended');
    const a = h.nodeOf(id, 'a').state;
    assert.equal(a.status, 'FAILED', 'not RUNNING without a task');
    assert.match(
      a.error,
      /^internal error while applying the end of task wf:throws:a:1 \(COMPLETED\): disk hiccup \(injected\)/,
    );
    assert.deepEqual(h.statuses(id), { a: 'FAILED', b: 'SKIPPED' });
    const summary = h.detail(id).summary;
    assert.equal(summary.state, 'FAILED');
    assert.deepEqual(summary.counts, { PENDING: 0, READY: 0, RUNNING: 0, COMPLETED: 0, FAILED: 1, SKIPPED: 1 });
    assert.equal(h.events('workflow.internal_error').length, 1, 'the error itself is logged');
    h.restart();
    assert.deepEqual(h.statuses(id), { a: 'FAILED', b: 'SKIPPED' }, 'the store says the same');
    assert.equal(h.detail(id).summary.state, 'FAILED');
  });

  it('a stored definition that no longer validates at restart: its open tasks are cancelled, RUNNING nodes FAILED, the workflow FAILED with the reason', async () => {
    h.agent('x');
    h.agent('y');
    const id = h.create(
      definition('stale', [
        { nodeId: 'a', agentId: 'x' },
        { nodeId: 'b', agentId: 'y' },
        { nodeId: 'c', agentId: 'x', dependencies: ['a'] },
      ]),
    );
    h.start(id);
    await h.finish('y');
    h.run('x');
    h.restart(() => {
      const store = CoordinatorStore.open(h.dataDir);
      try {
        const db = database(store);
        const row = db.prepare('SELECT definition FROM workflow_definitions WHERE workflow_id = ?').get(id) as {
          definition: string;
        };
        const stored = JSON.parse(row.definition) as {
          definition: { nodes: Array<{ nodeId: string; metadata: Record<string, string> }> };
        };
        stored.definition.nodes[0].metadata = { route: "'nowhere'" };
        db.prepare('UPDATE workflow_definitions SET definition = ? WHERE workflow_id = ?').run(
          JSON.stringify(stored),
          id,
        );
      } finally {
        store.close();
      }
    });
    h.reconnect('x');
    const summary = h.detail(id).summary;
    assert.equal(summary.state, 'FAILED');
    assert.match(summary.reason, /its definition no longer validates: invalid_route/);
    const a = h.nodeOf(id, 'a').state;
    assert.equal(a.status, 'FAILED', 'not RUNNING for ever');
    assert.match(a.error, /no longer validates/);
    assert.equal(h.task(`wf:${id}:a:1`).state, 'CANCELLED', 'its task does not run on for nothing');
    assert.deepEqual(h.statuses(id), { a: 'FAILED', b: 'COMPLETED', c: 'PENDING' });
  });

  it('an error while a workflow is restored: its open tasks are cancelled, RUNNING nodes FAILED, the workflow FAILED with the error', () => {
    h.agent('x');
    const id = h.create(
      definition('broken-restore', [
        { nodeId: 'a', agentId: 'x' },
        { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
      ]),
    );
    h.start(id);
    h.run('x');
    const proto = Workflows.prototype as unknown as { kick: (...args: unknown[]) => void };
    const kick = proto.kick;
    proto.kick = () => {
      throw new Error('restore bug (injected)');
    };
    try {
      h.restart();
    } finally {
      proto.kick = kick;
    }
    h.reconnect('x');
    const summary = h.detail(id).summary;
    assert.equal(summary.state, 'FAILED');
    assert.match(summary.reason, /could not be restored after the restart: restore bug \(injected\)/);
    assert.equal(h.nodeOf(id, 'a').state.status, 'FAILED');
    assert.equal(h.task(`wf:${id}:a:1`).state, 'CANCELLED');
    assert.equal(
      h.workflows.resume(id, 'a', '', 'operator', ctx()).summary.state,
      'RUNNING',
      'a resume goes on from it',
    );
  });

  it('a SCHEDULE node READY when its workflow ended runs at the next cron time after the resume, not at once', async () => {
    h.agent('x');
    const id = h.create(
      definition('cron-resume', [
        { nodeId: 'fails', agentId: 'x' },
        { nodeId: 'hourly', agentId: 'x', trigger: 'SCHEDULE', metadata: { schedule: '0 * * * *' } },
      ]),
    );
    h.start(id);
    await h.failRun('x');
    assert.equal(h.detail(id).summary.state, 'FAILED');
    await h.advance(3.5 * 3_600_000);
    assert.deepEqual(h.commands('x'), [], 'an ended workflow runs nothing');
    h.workflows.resume(id, 'fails', '', 'operator', ctx());
    await h.settled();
    const hourly = h.nodeOf(id, 'hourly').state;
    assert.equal(hourly.status, 'READY', 'not fired at once for a time that passed while it was ended');
    assert.equal(hourly.fireAt, Date.UTC(2026, 0, 1, 4));
    assert.deepEqual(
      h.commands('x').map((c) => (c.command.params as { node_id: string }).node_id),
      ['fails'],
    );
    await h.advance(Date.UTC(2026, 0, 1, 4) - h.clock.now());
    await h.finish('x');
    assert.equal(h.run('x').params.node_id, 'hourly');
  });

  it("a node after many dependencies is made READY from a count of open dependencies, not by reading them all again at each one's end", async () => {
    h.agent('x');
    const roots = Array.from({ length: 200 }, (_, i) => ({ nodeId: `r${i}`, agentId: 'x' }));
    const id = h.create(
      definition('fan-in', [...roots, { nodeId: 'join', agentId: 'x', dependencies: roots.map((r) => r.nodeId) }]),
    );
    h.start(id);
    for (let i = 0; i < 199; i++) await h.finish('x');
    assert.equal(h.statuses(id).join, 'PENDING');
    const live = (
      h.workflows as unknown as { live: Map<string, { record: { nodes: Map<string, NodeRecord> } }> }
    ).live.get(id)!;
    const nodes = live.record.nodes;
    const get = nodes.get.bind(nodes);
    let reads = 0;
    nodes.get = (nodeId: string) => {
      reads++;
      return get(nodeId);
    };
    try {
      await h.finish('x');
    } finally {
      nodes.get = get;
    }
    assert.equal(h.statuses(id).join, 'RUNNING');
    assert.ok(
      reads < 50,
      `the last dependency's end read ${reads} node records (200 would mean every dependency again)`,
    );
  });
});

describe('Workflows: workflow_data stored apart, the stored summary kept right', () => {
  let h: WorkflowHarness;

  beforeEach(() => {
    h = new WorkflowHarness();
  });

  afterEach(() => h.dispose());

  /** Bytes handed to the repository's writes, and the longest text JSON.stringify made, while `fn` runs. */
  async function measured(
    fn: () => Promise<void>,
  ): Promise<{ readonly written: number; readonly longestJson: number }> {
    const repo = h.store.workflows as unknown as Record<string, (...args: unknown[]) => unknown>;
    const originals = new Map<string, (...args: unknown[]) => unknown>();
    let written = 0;
    for (const name of ['putWorkflow', 'putNode', 'putData', 'appendData', 'create']) {
      const original = repo[name];
      if (typeof original !== 'function') continue;
      originals.set(name, original);
      repo[name] = (...args: unknown[]) => {
        written += JSON.stringify(args).length;
        return original.apply(h.store.workflows, args);
      };
    }
    const stringify = JSON.stringify;
    let longestJson = 0;
    JSON.stringify = ((...args: Parameters<typeof JSON.stringify>) => {
      const text = stringify(...args);
      if (typeof text === 'string') longestJson = Math.max(longestJson, text.length);
      return text;
    }) as typeof JSON.stringify;
    try {
      await fn();
    } finally {
      JSON.stringify = stringify;
      for (const [name, original] of originals) repo[name] = original;
    }
    return { written, longestJson };
  }

  it("a node's output costs what it writes, not the size of workflow_data (no copy, no whole-data row, no whole-data JSON)", async () => {
    h.agent('x');
    const id = h.create(
      definition('big-data', [
        { nodeId: 'a', agentId: 'x', inputMapping: { small: 'small' }, outputMapping: { v: 'results.a' } },
        {
          nodeId: 'b',
          agentId: 'x',
          dependencies: ['a'],
          inputMapping: { 'results.a': 'a' },
          outputMapping: { v: 'results.b' },
        },
      ]),
    );
    h.start(id, { big: 'x'.repeat(800_000), small: 1 });
    const { written, longestJson } = await measured(async () => {
      await h.finish('x', { v: 'done' });
    });
    assert.equal(h.statuses(id).b, 'RUNNING');
    assert.ok(written < 20_000, `${written} characters handed to the store for one node's end`);
    assert.ok(longestJson < 50_000, `a ${longestJson}-character JSON text was made for one node's end`);
    await h.finish('x', { v: 'also' });
    const data = h.data(id);
    assert.deepEqual([data.small, data.results, (data.big as string).length], [1, { a: 'done', b: 'also' }, 800_000]);
    h.restart();
    assert.deepEqual(h.data(id).results, { a: 'done', b: 'also' }, 'the store replays the writes');
    assert.deepEqual(Object.keys(h.data(id)), ['big', 'small', 'results'], 'in the order they were written');
  });

  it('workflow_data stays bounded in the store: a new snapshot once the writes since the last one outweigh it', async () => {
    h.agent('x');
    const n = 120;
    const nodes = Array.from({ length: n }, (_, i) => ({
      nodeId: `n${i}`,
      agentId: 'x',
      dependencies: i ? [`n${i - 1}`] : [],
      inputMapping: { none: 'none' },
      outputMapping: { v: `out.n${i}` },
    }));
    const id = h.create(definition('compacted', nodes));
    h.start(id);
    for (let i = 0; i < n; i++) await h.finish('x', { v: `${i}:${'y'.repeat(1_000)}` });
    assert.equal(h.detail(id).summary.state, 'COMPLETED');
    const rows = (h.store as unknown as { engine: { database: DatabaseSync } }).engine.database
      .prepare('SELECT COUNT(*) AS n FROM workflow_data WHERE workflow_id = ?')
      .get(id) as { n: number };
    assert.ok(rows.n < n, `${rows.n} data rows for ${n} writes`);
    h.restart();
    const out = h.data(id).out as Record<string, string>;
    assert.equal(Object.keys(out).length, n);
    assert.equal(out.n77.split(':')[0], '77');
  });

  it('the stored summary (what the list reads) is right while the workflow runs: counts and updated_at after each transition', async () => {
    h.agent('x');
    const id = h.create(
      definition('listed', [
        { nodeId: 'a', agentId: 'x' },
        { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
        { nodeId: 'c', agentId: 'x', dependencies: ['b'] },
      ]),
    );
    h.start(id);
    await h.advance(5_000);
    await h.finish('x');
    const stored = h.store.workflows.listRecent(10).find((w) => w.workflowId === id)!;
    assert.deepEqual(stored.counts, h.detail(id).summary.counts);
    assert.deepEqual(stored.counts, { PENDING: 1, READY: 0, RUNNING: 1, COMPLETED: 1, FAILED: 0, SKIPPED: 0 });
    assert.equal(stored.updatedAt, h.clock.now());
    const row = (h.store as unknown as { engine: { database: DatabaseSync } }).engine.database
      .prepare('SELECT length(record) + length(counts) AS n FROM workflows WHERE workflow_id = ?')
      .get(id) as { n: number };
    assert.ok(row.n < 1_000, `the workflow row is small (${row.n} characters): no data, no definition`);
  });
});
