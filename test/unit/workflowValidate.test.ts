import { strict as assert } from 'node:assert';
import { issuePath, MAX_ISSUES, parseIssuePath } from '../../src/core/workflow/issues';
import type {
  TriggerType,
  ValidationIssue,
  WorkflowDefinition,
  WorkflowNodeDefinition,
} from '../../src/core/workflow/model';
import {
  WORKFLOW_LIMITS,
  validateDefinition,
  validateDefinition as validateBig,
} from '../../src/core/workflow/validate';
import { prng } from '../support/prng';

interface NodeSpec {
  readonly deps?: readonly string[];
  readonly agent?: string;
  readonly trigger?: TriggerType;
  readonly metadata?: Record<string, string>;
  readonly input?: Record<string, string>;
  readonly output?: Record<string, string>;
}

function node(id: string, spec: NodeSpec = {}): WorkflowNodeDefinition {
  return {
    nodeId: id,
    agentId: spec.agent ?? 'type:worker',
    dependencies: spec.deps ?? [],
    trigger: spec.trigger ?? 'DEPENDENCY',
    inputMapping: spec.input ?? {},
    outputMapping: spec.output ?? {},
    metadata: spec.metadata ?? {},
  };
}

function def(nodes: Record<string, NodeSpec>, workflowId = 'wf'): WorkflowDefinition {
  return { workflowId, nodes: Object.entries(nodes).map(([id, spec]) => node(id, spec)), metadata: {} };
}

function codes(issues: readonly ValidationIssue[]): string[] {
  return issues.map((i) => i.code);
}

/** A layered random DAG: node i depends on up to `fanIn` earlier nodes (shuffled author order when `shuffle`). */
function randomDag(random: () => number, size: number, fanIn: number, shuffle: boolean): WorkflowNodeDefinition[] {
  const nodes: WorkflowNodeDefinition[] = [];
  for (let i = 0; i < size; i++) {
    const deps = new Set<string>();
    if (i > 0 && random() > 0.1) {
      const count = 1 + Math.floor(random() * fanIn);
      for (let k = 0; k < count; k++) deps.add(`n${Math.floor(random() * i)}`);
    }
    nodes.push(node(`n${i}`, { deps: [...deps] }));
  }
  if (shuffle) {
    for (let i = nodes.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [nodes[i], nodes[j]] = [nodes[j], nodes[i]];
    }
  }
  return nodes;
}

/** Independent reference: is the dependency graph acyclic? (repeated removal of nodes without remaining deps) */
function acyclic(nodes: readonly WorkflowNodeDefinition[]): boolean {
  const left = new Map(nodes.map((n) => [n.nodeId, new Set(n.dependencies)]));
  let changed = true;
  while (changed) {
    changed = false;
    for (const [id, deps] of left) {
      if ([...deps].every((d) => !left.has(d))) {
        left.delete(id);
        changed = true;
      }
    }
  }
  return left.size === 0;
}

/** The nodes named form a real cycle of dependency edges: each depends on the next, the last on the first. */
function assertRealCycle(nodes: readonly WorkflowNodeDefinition[], cycle: readonly string[]): void {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  assert.ok(cycle.length >= 2, `a cycle of ${cycle.length}`);
  assert.equal(new Set(cycle).size, cycle.length, 'no node twice');
  for (let i = 0; i < cycle.length; i++) {
    const from = byId.get(cycle[i]);
    assert.ok(from, `${cycle[i]} is a node`);
    const next = cycle[(i + 1) % cycle.length];
    assert.ok(from.dependencies.includes(next), `${cycle[i]} depends on ${next}`);
  }
}

describe('workflow validation (RFC §17.7)', () => {
  it('accepts random DAGs: no issue, roots are the nodes without dependencies, dependents in author order', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const random = prng(seed);
      const nodes = randomDag(random, 5 + Math.floor(random() * 300), 4, seed % 2 === 0);
      const result = validateDefinition({ workflowId: '', nodes, metadata: {} });
      assert.ok(result.ok, `seed ${seed}: ${JSON.stringify(result.issues.slice(0, 3))}`);
      assert.deepEqual(result.issues, [], `seed ${seed}`);
      assert.deepEqual(
        result.roots,
        nodes.filter((n) => n.dependencies.length === 0).map((n) => n.nodeId),
      );
      for (const n of nodes) {
        const expected = nodes.filter((m) => m.dependencies.includes(n.nodeId)).map((m) => m.nodeId);
        assert.deepEqual(result.dependents.get(n.nodeId), expected, `seed ${seed}: dependents of ${n.nodeId}`);
      }
    }
  });

  it('refuses random graphs with a planted cycle, naming a real cycle of dependency edges', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const random = prng(1000 + seed);
      const size = 10 + Math.floor(random() * 200);
      const nodes = randomDag(random, size, 3, seed % 3 === 0).map((n) => ({
        ...n,
        dependencies: [...n.dependencies],
      }));
      // Plant: c0 depends on c1, …, c(k-1) depends on c0.
      const k = 2 + Math.floor(random() * Math.min(8, size - 2));
      const picked = new Set<number>();
      while (picked.size < k) picked.add(Math.floor(random() * size));
      const cycleNodes = [...picked].map((i) => nodes[i]);
      for (let i = 0; i < k; i++) {
        const next = cycleNodes[(i + 1) % k].nodeId;
        if (!cycleNodes[i].dependencies.includes(next)) (cycleNodes[i].dependencies as string[]).push(next);
      }
      const result = validateDefinition({ workflowId: 'wf', nodes, metadata: {} });
      assert.equal(result.ok, false, `seed ${seed}`);
      const cycles = result.issues.filter((i) => i.code === 'workflow_cycle_detected');
      assert.ok(cycles.length >= 1, `seed ${seed}: ${JSON.stringify(codes(result.issues))}`);
      for (const issue of cycles) {
        assertRealCycle(nodes, issue.cycle!);
        assert.match(issue.message, /each depends on the next/);
        for (const id of issue.cycle!.slice(0, 19))
          assert.ok(issue.message.includes(`"${id}"`), `${id} named in the message`);
        // The path points at the first node's dependency on the second.
        const first = nodes.find((n) => n.nodeId === issue.cycle![0])!;
        assert.equal(
          issue.path,
          issuePath('nodes', first.nodeId, 'dependencies', first.dependencies.indexOf(issue.cycle![1])),
        );
      }
    }
  });

  it('agrees with an independent acyclicity check on random graphs (and every cycle it names is real)', () => {
    let cyclic = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const random = prng(5000 + seed);
      const size = 2 + Math.floor(random() * 25);
      const nodes: WorkflowNodeDefinition[] = [];
      for (let i = 0; i < size; i++) {
        const deps = new Set<string>();
        const count = i === 0 ? 0 : Math.floor(random() * 3);
        for (let k = 0; k < count; k++) {
          const d = Math.floor(random() * size);
          if (d !== i) deps.add(`n${d}`);
        }
        nodes.push(node(`n${i}`, { deps: [...deps] }));
      }
      const result = validateDefinition({ workflowId: 'wf', nodes, metadata: {} });
      const found = result.issues.filter((i) => i.code === 'workflow_cycle_detected');
      assert.equal(found.length === 0, acyclic(nodes), `seed ${seed}`);
      if (found.length) cyclic++;
      for (const issue of found) assertRealCycle(nodes, issue.cycle!);
    }
    assert.ok(cyclic > 20, `enough cyclic samples (${cyclic})`);
  });

  it("reports disjoint cycles separately, each in the author's order of its first node", () => {
    const result = validateDefinition(
      def({
        r: {},
        a: { deps: ['b'] },
        b: { deps: ['a'] },
        c: { deps: ['d', 'r'] },
        d: { deps: ['e'] },
        e: { deps: ['c'] },
      }),
    );
    const cycles = result.issues.filter((i) => i.code === 'workflow_cycle_detected');
    assert.deepEqual(
      cycles.map((i) => i.cycle),
      [
        ['a', 'b'],
        ['c', 'd', 'e'],
      ],
    );
    assert.equal(cycles[1].path, 'nodes.c.dependencies[0]');
    assert.match(cycles[1].message, /"c" → "d" → "e" → "c" \(each depends on the next\)/);
  });

  it('validates a 100,000-node chain without overflowing the stack, and finds a 100,000-node cycle (limits raised: the algorithms are linear)', () => {
    const big = { ...WORKFLOW_LIMITS, maxNodes: 200_000, maxTotalDependencies: 200_000, maxMapEntries: 1_000_000 };
    const validateDefinition = (d: WorkflowDefinition) => validateBig(d, big);
    const nodes: WorkflowNodeDefinition[] = [];
    for (let i = 0; i < 100_000; i++) nodes.push(node(`n${i}`, { deps: i ? [`n${i - 1}`] : [] }));
    const chain = validateDefinition({ workflowId: 'wf', nodes, metadata: {} });
    assert.ok(chain.ok);
    assert.deepEqual(chain.roots, ['n0']);
    assert.deepEqual(chain.dependents.get('n99998'), ['n99999']);

    const cyclic = nodes.map((n, i) => (i === 0 ? { ...n, dependencies: ['n99999'] } : n));
    const refused = validateDefinition({ workflowId: 'wf', nodes: cyclic, metadata: {} });
    const cycle = refused.issues.find((i) => i.code === 'workflow_cycle_detected');
    assert.ok(cycle);
    assert.equal(cycle.cycle!.length, 100_000);
    assertRealCycle(cyclic, cycle.cycle!);
    assert.ok(cycle.message.length < 2000, 'the message lists a bounded number of nodes');
    assert.match(cycle.message, /99980 more/);
    assert.ok(refused.issues.some((i) => i.code === 'no_root'));

    // A long chain into a 3-node cycle far away: only the cycle is named.
    const tail = [
      ...nodes.slice(0, 50_000),
      node('x', { deps: ['n49999', 'z'] }),
      node('y', { deps: ['x'] }),
      node('z', { deps: ['y'] }),
    ];
    const far = validateDefinition({ workflowId: 'wf', nodes: tail, metadata: {} });
    assert.deepEqual(
      far.issues.filter((i) => i.code === 'workflow_cycle_detected').map((i) => i.cycle),
      [['x', 'z', 'y']],
    );
  });

  it('allows a cycle through a conditional edge (a loop back), never one made of dependencies only', () => {
    const loop = validateDefinition(
      def({
        draft: {},
        review: {
          deps: ['draft'],
          output: { score: 'review.score' },
          metadata: { route: "score > 0.5 ? 'ship' : 'revise'" },
        },
        ship: { deps: ['review'] },
        revise: { deps: ['review'], metadata: { route: "'review'" } },
      }),
    );
    assert.ok(loop.ok, JSON.stringify(loop.issues));
    assert.deepEqual(loop.issues, []);
    assert.deepEqual([...loop.routes.keys()], ['review', 'revise']);
    assert.deepEqual(loop.routes.get('revise')!.targets, ['review']);

    // The same loop written as dependencies (review depends on revise) is refused even though routes name its nodes.
    const deps = validateDefinition(
      def({
        draft: {},
        review: { deps: ['draft', 'revise'], metadata: { route: "true ? 'ship' : 'revise'" } },
        ship: { deps: ['review'] },
        revise: { deps: ['review'], metadata: { route: "'review'" } },
      }),
    );
    const cycle = deps.issues.find((i) => i.code === 'workflow_cycle_detected');
    assert.deepEqual(cycle?.cycle, ['review', 'revise']);
  });

  it('refuses dependency mistakes: unknown, self, repeated; and a workflow without a root', () => {
    const result = validateDefinition(def({ a: {}, b: { deps: ['a', 'nope', 'b', 'a'] } }));
    assert.deepEqual(
      result.issues.map((i) => [i.code, i.path]),
      [
        ['unknown_dependency', 'nodes.b.dependencies[1]'],
        ['self_dependency', 'nodes.b.dependencies[2]'],
        ['duplicate_dependency', 'nodes.b.dependencies[3]'],
      ],
    );
    assert.equal(result.ok, false);
    assert.deepEqual(result.dependents.get('a'), ['b'], 'a repeated dependency is one edge');

    const noRoot = validateDefinition(def({ a: { deps: ['b'] }, b: { deps: ['c'] }, c: { deps: ['zzz'] } }));
    assert.deepEqual(codes(noRoot.issues), ['no_root', 'unknown_dependency']);
    assert.equal(noRoot.issues[0].path, 'nodes');
  });

  it('refuses bad ids, agents, triggers and bounds', () => {
    const long = 'x'.repeat(WORKFLOW_LIMITS.maxIdChars + 1);
    const result = validateDefinition({
      workflowId: 'has space',
      metadata: {},
      nodes: [
        node('ok'),
        node(''),
        node('a:b'),
        node('a,b'),
        node('a/b'),
        node('tab\there'),
        node(long),
        node('ok'),
        node('noagent', { agent: '' }),
        node('typeonly', { agent: 'type:' }),
        node('nul', { agent: 'a\u0000b' }),
        { ...node('trig'), trigger: 'SOMETIMES' as TriggerType },
        node('many', { deps: Array.from({ length: WORKFLOW_LIMITS.maxDependencies + 1 }, () => 'ok') }),
      ],
    });
    const got = result.issues.map((i) => [i.code, i.path]);
    assert.deepEqual(got.slice(0, 12), [
      ['invalid_field', 'workflow_id'],
      ['invalid_field', 'nodes[""]'],
      ['invalid_field', 'nodes["a:b"]'],
      ['invalid_field', 'nodes["a,b"]'],
      ['invalid_field', 'nodes["a/b"]'],
      ['invalid_field', 'nodes["tab\\there"]'],
      ['limit_exceeded', `nodes.${long}`],
      ['duplicate_node', 'nodes.ok'],
      ['invalid_field', 'nodes.noagent.agent_id'],
      ['invalid_field', 'nodes.typeonly.agent_id'],
      ['invalid_field', 'nodes.nul.agent_id'],
      ['invalid_field', 'nodes.trig.trigger_type'],
    ]);
    assert.deepEqual(got[12], ['limit_exceeded', 'nodes.many.dependencies']);
    // The duplicate dependencies beyond the first are refused, once each, within the bound.
    assert.equal(result.issues.length, MAX_ISSUES + 1);
    assert.equal(result.issues[MAX_ISSUES].code, 'more_issues');
    assert.match(result.issues[MAX_ISSUES].message, /^and \d+ more errors/);

    const tooMany = validateDefinition({
      workflowId: '',
      metadata: {},
      nodes: Array.from({ length: WORKFLOW_LIMITS.maxNodes + 1 }, (_, i) => node(`n${i}`)),
    });
    assert.deepEqual(
      tooMany.issues.map((i) => [i.code, i.path]),
      [['limit_exceeded', 'nodes']],
    );
    const empty = validateDefinition({ workflowId: '', metadata: {}, nodes: [] });
    assert.deepEqual(
      empty.issues.map((i) => [i.code, i.path]),
      [['invalid_field', 'nodes']],
    );
  });

  it('an empty workflow_id is accepted (the engine assigns one)', () => {
    assert.ok(validateDefinition(def({ a: {} }, '')).ok);
  });

  it('checks the metadata the coordinator reads, and warns about metadata it does not read for that trigger', () => {
    const result = validateDefinition(
      def({
        a: { metadata: { priority: '21', scope: 'bogus', on_failure: 'retry', max_iterations: '0' } },
        b: {
          metadata: { priority: '-19', scope: 'resource:workflow:wf/b', on_failure: 'hitl', max_iterations: '1000' },
        },
        c: { trigger: 'SCHEDULE' },
        d: { trigger: 'SCHEDULE', metadata: { schedule: '61 * * * *' } },
        e: { trigger: 'SCHEDULE', metadata: { schedule: '*/5 * * * *' } },
        f: { trigger: 'EVENT' },
        g: { trigger: 'EVENT', metadata: { event: '  ' } },
        h: { trigger: 'EVENT', metadata: { event: 'deploy.done' } },
        i: { metadata: { schedule: '* * * * *', event: 'x' } },
        j: { metadata: { long: 'x'.repeat(WORKFLOW_LIMITS.maxMetadataValueChars + 1) } },
      }),
    );
    assert.deepEqual(
      result.issues.map((i) => [i.severity, i.code, i.path]),
      [
        ['error', 'invalid_field', 'nodes.a.metadata.priority'],
        ['error', 'invalid_field', 'nodes.a.metadata.scope'],
        ['error', 'invalid_field', 'nodes.a.metadata.on_failure'],
        ['error', 'invalid_field', 'nodes.a.metadata.max_iterations'],
        ['error', 'invalid_schedule', 'nodes.c.metadata'],
        ['error', 'invalid_schedule', 'nodes.d.metadata.schedule'],
        ['error', 'invalid_event', 'nodes.f.metadata'],
        ['error', 'invalid_event', 'nodes.g.metadata.event'],
        ['error', 'limit_exceeded', 'nodes.j.metadata.long'],
        ['warning', 'unused_metadata', 'nodes.i.metadata.schedule'],
        ['warning', 'unused_metadata', 'nodes.i.metadata.event'],
      ],
    );
    assert.match(result.issues[1].message, /scope token/);
  });

  it('checks input and output mappings', () => {
    const result = validateDefinition(
      def({
        a: {
          input: { '': 'x', 'a..b': 'y', 'p.q': 'z', r: 'z' },
          output: { o: 'data.', k1: 'same', k2: 'same', ok: 'fine.path' },
        },
      }),
    );
    assert.deepEqual(
      result.issues.map((i) => [i.code, i.path]),
      [
        ['invalid_field', 'nodes.a.input_mapping[""]'],
        ['invalid_field', 'nodes.a.input_mapping["a..b"]'],
        ['invalid_field', 'nodes.a.input_mapping.r'],
        ['invalid_field', 'nodes.a.output_mapping.o'],
        ['invalid_field', 'nodes.a.output_mapping.k2'],
      ],
    );
    assert.match(result.issues[2].message, /input "z" is mapped from both "p.q" and "r"/);
  });

  it('compiles routes: refusals at nodes.<id>.metadata.route, compiled routes by node', () => {
    const result = validateDefinition(
      def({
        a: { output: { score: 's' }, metadata: { route: "score > 0.5 ? 'b' : 'c'" } },
        b: { deps: ['a'], metadata: { route: '1 +' } },
        c: { deps: ['a'], metadata: { route: "'nowhere'" } },
        d: { deps: ['c'], metadata: { route: 'size(data)' } },
      }),
    );
    assert.deepEqual(
      result.issues.map((i) => [i.code, i.path]),
      [
        ['invalid_route', 'nodes.b.metadata.route'],
        ['invalid_route', 'nodes.c.metadata.route'],
        ['invalid_route', 'nodes.d.metadata.route'],
      ],
    );
    assert.match(result.issues[1].message, /names "nowhere", which is not a node/);
    assert.match(result.issues[2].message, /answers int/);
    assert.deepEqual([...result.routes.keys()], ['a']);
  });

  it('warns about nodes that can never run, with the reason and the dependency it waits on', () => {
    const result = validateDefinition(
      def({
        a: { metadata: { route: "data.x > 1 ? 'b' : 'c'" } },
        b: { deps: ['a'] },
        c: { deps: ['a'] },
        d: { deps: ['a'] }, // a's route never names d
        e: { deps: ['b', 'd'] }, // d never runs
        f: { deps: ['b'] },
      }),
    );
    assert.ok(result.ok, 'warnings only');
    assert.deepEqual(
      result.issues.map((i) => [i.severity, i.code, i.path]),
      [
        ['warning', 'unreachable_node', 'nodes.d.dependencies[0]'],
        ['warning', 'unreachable_node', 'nodes.e.dependencies[1]'],
      ],
    );
    assert.match(result.issues[0].message, /the route of its dependency "a" never chooses it \(it answers "b", "c"\)/);
    assert.match(result.issues[1].message, /its dependency "d" never runs/);

    // A bool route may choose every dependent; a computed one any node; a loop back makes its target run.
    assert.deepEqual(
      validateDefinition(def({ a: { metadata: { route: 'data.x > 1' } }, b: { deps: ['a'] } })).issues,
      [],
    );
    assert.deepEqual(
      validateDefinition(
        def({
          a: { metadata: { route: 'data.next' } },
          b: { deps: ['a'] },
          c: { deps: ['b'], metadata: { route: "'x'" } },
          x: { deps: ['c'] },
        }),
      ).issues,
      [],
    );
    const loopBack = validateDefinition(
      def({ a: { metadata: { route: "'b'" } }, b: { deps: ['a'], metadata: { route: "'c'" } }, c: { deps: ['a'] } }),
    );
    assert.deepEqual(loopBack.issues, [], 'c is not chosen by a, but b loops back to it');
  });

  it('bounds the issues at MAX_ISSUES, errors first, the rest counted', () => {
    const nodes: Record<string, NodeSpec> = { root: {} };
    for (let i = 0; i < 150; i++)
      nodes[`n${i}`] = { deps: ['root', `missing${i}`], metadata: { schedule: '* * * * *' } };
    const result = validateDefinition(def(nodes));
    assert.equal(result.issues.length, MAX_ISSUES + 1);
    assert.ok(result.issues.slice(0, MAX_ISSUES).every((i) => i.code === 'unknown_dependency'));
    assert.deepEqual(
      result.issues.slice(0, 3).map((i) => i.path),
      ['nodes.n0.dependencies[1]', 'nodes.n1.dependencies[1]', 'nodes.n2.dependencies[1]'],
    );
    assert.equal(
      result.issues[MAX_ISSUES].message,
      'and 50 more errors and 150 more warnings (only the first 100 issues are listed)',
    );
    assert.equal(result.issues[MAX_ISSUES].severity, 'error');
  });

  it('writes paths that read back, quoting keys that are not plain', () => {
    for (const segments of [
      ['nodes', 'a', 'dependencies', 3],
      ['nodes', 'a.b', 'metadata', 'route'],
      ['nodes', 'q"uote[1]', 'agent_id'],
      ['workflow_id'],
      ['nodes', 'é', 'input_mapping', 'x.y'],
    ] as const) {
      const path = issuePath(...segments);
      assert.deepEqual(parseIssuePath(path), segments, path);
    }
    assert.equal(issuePath('nodes', 'a.b', 'dependencies', 0), 'nodes["a.b"].dependencies[0]');
    assert.equal(parseIssuePath('nodes[x]'), undefined);
    const dotted = validateDefinition(def({ 'a.b': { deps: ['zz'] } }));
    assert.deepEqual(
      dotted.issues.map((i) => i.path),
      ['nodes', 'nodes["a.b"].dependencies[0]'],
    );
  });
});
