import { strict as assert } from 'node:assert';
import type { WorkflowDefinition, WorkflowNodeDefinition } from '../../src/core/workflow/model';
import {
  DEFINITION_FILE_LIMITS,
  definitionFromJson,
  parseDefinitionText,
} from '../../src/core/workflow/definitionFile';
import { WORKFLOW_LIMITS, validateDefinition } from '../../src/core/workflow/validate';
import { serviceDefinition } from '../../src/server/protos';
import { MAX_DEFINITION_BYTES, definitionRefusal } from '../../src/server/services/workflowDefinitionScan';
import { canonicalDefinition } from '../support/clients';

const node = (id: string, over: Partial<WorkflowNodeDefinition> = {}): WorkflowNodeDefinition => ({
  nodeId: id,
  agentId: 'w',
  dependencies: [],
  trigger: 'DEPENDENCY',
  inputMapping: {},
  outputMapping: {},
  metadata: {},
  ...over,
});
const def = (nodes: WorkflowNodeDefinition[]): WorkflowDefinition => ({ workflowId: 'wf', nodes, metadata: {} });
const codes = (d: WorkflowDefinition) => validateDefinition(d).issues.map((i) => [i.code, i.path, i.message]);
/** Synchronous time of `work` in ms (the event-loop hold it would cause). */
const timed = <T>(work: () => T): [T, number] => {
  const t = performance.now();
  const r = work();
  return [r, performance.now() - t];
};

describe('workflow definition limits (README, "Limits"): each checked before the work it bounds', () => {
  it('500 nodes accepted; 501 refused alone with limit_exceeded', () => {
    assert.equal(WORKFLOW_LIMITS.maxNodes, 500);
    assert.ok(validateDefinition(def(Array.from({ length: 500 }, (_, i) => node(`n${i}`)))).ok);
    assert.deepEqual(codes(def(Array.from({ length: 501 }, (_, i) => node(`n${i}`)))), [
      ['limit_exceeded', 'nodes', 'a workflow has at most 500 nodes (this one has 501)'],
    ]);
  });

  it('500 dependencies on a node accepted, 501 refused', () => {
    const roots = Array.from({ length: 501 }, (_, i) => node(`r${i}`));
    assert.ok(
      validateDefinition(
        def([...roots.slice(0, 499), node('x', { dependencies: roots.slice(0, 499).map((r) => r.nodeId) })]),
      ).ok,
    );
    const refused = validateDefinition(
      def([
        ...roots.slice(0, 499),
        node('x', { dependencies: [...roots.slice(0, 499).map((r) => r.nodeId), 'r0', 'r1'] }),
      ]),
    );
    assert.ok(
      refused.issues.some(
        (i) =>
          i.code === 'limit_exceeded' &&
          i.path === 'nodes.x.dependencies' &&
          /at most 500 dependencies \(this one has 501\)/.test(i.message),
      ),
    );
  });

  it('10,000 dependencies in all accepted, 10,001 refused alone', () => {
    const nodes = (extra: number) =>
      Array.from({ length: 500 }, (_, i) =>
        node(`n${i}`, {
          dependencies: Array.from({ length: Math.min(i, 20) + (i === 499 ? extra : 0) }, (_, k) => `n${k}`),
        }),
      );
    const total = (ns: WorkflowNodeDefinition[]) => ns.reduce((s, n) => s + n.dependencies.length, 0);
    const base = nodes(0);
    const fill = 10_000 - total(base); // the last node takes the rest, up to the limit
    assert.ok(fill > 0 && fill <= 480);
    const at = nodes(0).map((n, i) =>
      i === 499 ? { ...n, dependencies: Array.from({ length: 20 + fill }, (_, k) => `n${k}`) } : n,
    );
    assert.equal(total(at), 10_000);
    assert.ok(validateDefinition(def(at)).ok, JSON.stringify(validateDefinition(def(at)).issues.slice(0, 2)));
    const over = at.map((n, i) =>
      i === 499 ? { ...n, dependencies: [...n.dependencies, `n${n.dependencies.length}`] } : n,
    );
    assert.deepEqual(codes(def(over)), [
      ['limit_exceeded', 'nodes', 'a workflow has at most 10000 dependencies in all (this one has 10001)'],
    ]);
  });

  it('8,192 map entries in all accepted, 8,193 refused alone (metadata, input_mapping, output_mapping together)', () => {
    const nodes = (extra: number) =>
      Array.from({ length: 500 }, (_, i) =>
        node(`n${i}`, {
          metadata: Object.fromEntries(Array.from({ length: 16 }, (_, k) => [`m${k}`, 'v'])),
          inputMapping: i < 192 + extra ? { [`d${i}`]: 'x' } : {},
        }),
      );
    assert.ok(validateDefinition(def(nodes(0))).ok);
    assert.deepEqual(codes(def(nodes(1))), [
      [
        'limit_exceeded',
        'nodes',
        'a workflow has at most 8192 map entries in all (metadata, input_mapping, output_mapping; this one has 8193)',
      ],
    ]);
  });

  it('a route is at most 4 KiB and the routes 32 KiB in all; 500 nodes with routes at the total validate within 50 ms', () => {
    const long = `data.x == 1.0 ? 'n1' : 'n2' ${' '.repeat(4096)}`;
    assert.ok(
      validateDefinition(
        def([
          node('n0', { metadata: { route: long } }),
          node('n1', { dependencies: ['n0'] }),
          node('n2', { dependencies: ['n0'] }),
        ]),
      ).issues.some((i) => i.code === 'invalid_route' && /longer than 4096/.test(i.message)),
    );
    const route = (i: number) => {
      const parts: string[] = [];
      for (let k = 0; parts.join(' || ').length < 3950; k++) parts.push(`data.a${k} == ${k}.0`);
      return `(${parts.join(' || ')}) ? 'n${i + 1}' : 'n${i + 1}'`;
    };
    const big = Array.from({ length: 500 }, (_, i) =>
      node(`n${i}`, { dependencies: i ? [`n${i - 1}`] : [], metadata: i < 8 ? { route: route(i) } : {} }),
    );
    const chars = big.reduce((s, n) => s + (n.metadata.route?.length ?? 0), 0);
    assert.ok(chars <= WORKFLOW_LIMITS.maxTotalRouteChars && chars > 30_000, `${chars}`);
    validateDefinition(def(big)); // warm-up (the CEL environment is made once)
    const [ok, ms] = timed(() => validateDefinition(def(big)));
    console.log(`      8 routes, ${chars} characters, 500 nodes: validated in ${ms.toFixed(1)} ms`);
    assert.ok(ok.ok, JSON.stringify(ok.issues.slice(0, 2)));
    assert.ok(ms <= 50, `${ms} ms`);
    const over = big.map((n, i) => (i === 8 ? { ...n, metadata: { route: route(8) } } : n));
    assert.match(codes(def(over))[0][2] as string, /^the routes of a workflow have at most 32768 characters in all/);
  });

  it('proto-shaped JSON: totals refused before any node is shaped', () => {
    const nodes = Object.fromEntries(
      Array.from({ length: 500 }, (_, i) => [
        `n${i}`,
        { agent_id: 'w', dependencies: Array.from({ length: 21 }, () => 'n0') },
      ]),
    );
    const [read, ms] = timed(() => definitionFromJson({ workflow_id: 'wf', nodes }));
    assert.deepEqual(
      read.issues.map((i) => i.message),
      ['a workflow has at most 10000 dependencies in all (this one has 10500)'],
    );
    assert.ok(ms <= 50, `${ms} ms`);
  });

  it('definition files: 1 MiB; one character more refused before parsing, at once', () => {
    assert.equal(DEFINITION_FILE_LIMITS.maxChars, 1024 * 1024);
    const text = `{"workflow_id": "f", "nodes": {"a": {"agent_id": "w"}}, "metadata": {"pad": "${'x'.repeat(1024 * 1024)}"}}`;
    const [read, ms] = timed(() => parseDefinitionText(text, 'f.json'));
    assert.equal(read.issues[0].code, 'limit_exceeded');
    assert.match(read.issues[0].message, /at most 1048576 characters/);
    assert.ok(ms <= 50, `${ms} ms`);
  });

  it('issue placement is linear: twice the issues take about twice the time, not four times (JSON)', () => {
    const text = (n: number) =>
      JSON.stringify({
        workflow_id: 'f',
        nodes: Object.fromEntries(
          Array.from({ length: n }, (_, i) => [
            `n${i}`,
            {
              agent_id: 'w',
              input_mapping: Object.fromEntries(Array.from({ length: 16 }, (_, k) => [`d..${k}`, `i${k}`])),
            },
          ]),
        ),
      });
    const best = (t: string) => {
      let min = Infinity;
      for (let k = 0; k < 3; k++) min = Math.min(min, timed(() => parseDefinitionText(t, 'f.json'))[1]);
      return min;
    };
    const small = best(text(250));
    const large = best(text(500));
    console.log(`      4,000 issues placed: ${small.toFixed(1)} ms; 8,000: ${large.toFixed(1)} ms`);
    assert.equal(parseDefinitionText(text(500), 'f.json').issues.length, 101);
    assert.ok(large <= 3 * small + 20, `${small} → ${large} ms`);
  });

  it('gRPC CreateWorkflowRequest: bytes and counts checked on the wire format, before decoding', () => {
    const method = serviceDefinition(canonicalDefinition(), 'sw4rm.workflow.WorkflowService').CreateWorkflow;
    const encode = (nodes: Record<string, unknown>, metadata: Record<string, string> = {}) =>
      method.requestSerialize({ definition: { workflow_id: 'wf', nodes, metadata } }) as Buffer;
    const many = (n: number, over: (i: number) => Record<string, unknown> = () => ({})) =>
      Object.fromEntries(
        Array.from({ length: n }, (_, i) => [`n${i}`, { node_id: `n${i}`, agent_id: 'w', ...over(i) }]),
      );
    assert.equal(definitionRefusal(encode(many(500))), undefined);
    assert.match(
      definitionRefusal(encode(many(501)))!,
      /^VALIDATION_ERROR: limit_exceeded: a workflow has at most 500 nodes \(this one has 501\)/,
    );
    assert.match(
      definitionRefusal(encode(many(2, (i) => ({ dependencies: Array(i ? 501 : 0).fill('n0') }))))!,
      /a node has at most 500 dependencies \(one has 501\)/,
    );
    assert.match(
      definitionRefusal(encode(many(500, () => ({ dependencies: Array(21).fill('n0') }))))!,
      /at most 10000 dependencies in all \(this one has 10500\)/,
    );
    assert.match(
      definitionRefusal(
        encode(many(1), { ...Object.fromEntries(Array.from({ length: 8193 }, (_, k) => [`k${k}`, ''])) }),
      )!,
      /at most 8192 map entries in all .*8193/,
    );
    const big = Buffer.alloc(MAX_DEFINITION_BYTES + 1);
    assert.match(
      definitionRefusal(big)!,
      /^OVERSIZE_PAYLOAD: a workflow definition is at most 1048576 bytes encoded \(this one is 1048577\)/,
    );
    assert.equal(definitionRefusal(Buffer.from([0x0a, 0xff])), undefined, 'not a message: left to the decoder');
  });
});
