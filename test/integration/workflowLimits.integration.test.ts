import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { CoordinatorHost } from '../../src/server/host';
import { serviceDefinition } from '../../src/server/protos';
import { WORKFLOW_LIMITS } from '../../src/core/workflow/validate';
import { canonicalDefinition } from '../support/clients';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { describeHold, heldMs, measureHold } from '../support/loopHold';

type Node = { node_id: string; agent_id: string; dependencies?: string[]; metadata?: Record<string, string> };
interface Answer {
  code: number;
  details: string;
  response?: { workflow_id: string; success: boolean; error: string };
  holdMs: number;
  held: string;
  ms: number;
}

/**
 * CreateWorkflow at and beyond its limits over real gRPC, from an agent credential: no request holds the coordinator's
 * event loop more than 50 ms (README, "Limits"). The requests are encoded before the measurement and sent as raw bytes,
 * so the histogram (1 ms resolution, in this process, which is also the server's) sees the server's work only: the
 * transport, the size check, decoding, validation and the store. 50 ms is the bound; the old code held it ≥ 10 s.
 */
describe('CreateWorkflow holds the event loop at most 50 ms at any size (issue 30, item 1)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let client: grpc.Client;
  let token: string;
  const method = serviceDefinition(canonicalDefinition(), 'sw4rm.workflow.WorkflowService')
    .CreateWorkflow as unknown as grpc.MethodDefinition<unknown, unknown>;
  const AGENT = 'planner';

  before(async () => {
    dataDir = makeTempDir('sw4rm-workflow-limits-');
    host = await startHost(dataDir);
    token = host.coordinator.credentials.mintAgent(AGENT, 'test', 'workflow limits test', {
      correlationId: 'test',
    }).token;
    client = new grpc.Client(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    });
  });

  after(async () => {
    client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  const encode = (workflowId: string, nodes: Node[]): Buffer => {
    const map: Record<string, Node> = {};
    for (const n of nodes) map[n.node_id] = n;
    return method.requestSerialize({ definition: { workflow_id: workflowId, nodes: map, metadata: {} } });
  };

  /** Sends the encoded request; the event loop's longest hold while the server took it. */
  async function send(bytes: Buffer): Promise<Answer> {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const { value: result, hold } = await measureHold(
      () =>
        new Promise<{ code: number; details: string; response?: Answer['response'] }>((resolve) => {
          client.makeUnaryRequest(
            method.path,
            (b: Buffer) => b,
            method.responseDeserialize,
            bytes,
            metadata,
            { deadline: Date.now() + 60_000 },
            (err, response) => {
              if (err) resolve({ code: err.code ?? -1, details: err.details ?? err.message });
              else resolve({ code: grpc.status.OK, details: '', response: response as Answer['response'] });
            },
          );
        }),
    );
    return { ...result, holdMs: heldMs(hold), held: describeHold(hold), ms: hold.ms };
  }

  const chain = (n: number, id: (i: number) => string) =>
    Array.from({ length: n }, (_, i): Node => ({
      node_id: id(i),
      agent_id: AGENT,
      dependencies: i ? [id(i - 1)] : [],
    }));

  it('refuses a 100,000-node workflow (about 3.8 MB) before decoding it: INVALID_ARGUMENT, OVERSIZE_PAYLOAD', async () => {
    const bytes = encode(
      'huge',
      chain(100_000, (i) => `n${i}`),
    );
    for (let k = 0; k < 3; k++) {
      const a = await send(bytes);
      console.log(
        `      100,000 nodes, ${bytes.length} bytes: ${grpc.status[a.code]} in ${a.ms.toFixed(1)} ms, ${a.held}`,
      );
      assert.equal(a.code, grpc.status.INVALID_ARGUMENT, a.details);
      assert.match(
        a.details,
        /^OVERSIZE_PAYLOAD: a workflow definition is at most 1048576 bytes encoded \(this one is \d+\)/,
      );
      assert.ok(a.holdMs <= 50, a.held);
    }
  });

  it('refuses a 7 MB definition six times, each within 50 ms of event loop, RSS not growing with each', async () => {
    const bytes = encode(
      'seven',
      chain(70_000, (i) => `${'x'.repeat(25)}-${i}`),
    );
    assert.ok(bytes.length > 7_000_000, `${bytes.length} bytes`);
    const rss: number[] = [];
    for (let k = 0; k < 6; k++) {
      const a = await send(bytes);
      rss.push(process.memoryUsage().rss / 1024 / 1024);
      console.log(
        `      7 MB (${bytes.length} bytes) #${k + 1}: ${grpc.status[a.code]} in ${a.ms.toFixed(1)} ms, ${a.held}, RSS ${rss[k].toFixed(0)} MB`,
      );
      assert.equal(a.code, grpc.status.INVALID_ARGUMENT, a.details);
      assert.match(a.details, /^OVERSIZE_PAYLOAD: /);
      assert.ok(a.holdMs <= 50, a.held);
    }
    // Each refused request is let go: no plateau growing with each (the old code reached 624 MB after six).
    assert.ok(rss[5] - rss[0] < 100, `RSS ${rss.map((r) => r.toFixed(0)).join(' → ')} MB`);
  });

  it('refuses more than 500 nodes within 1 MiB (30,000 small ones) on their count, before decoding: VALIDATION_ERROR: limit_exceeded', async () => {
    const bytes = encode(
      'many',
      Array.from({ length: 30_000 }, (_, i): Node => ({ node_id: i.toString(36), agent_id: AGENT })),
    );
    assert.ok(bytes.length < 1024 * 1024, `${bytes.length} bytes`);
    for (let k = 0; k < 3; k++) {
      const a = await send(bytes);
      console.log(
        `      30,000 nodes in ${bytes.length} bytes: ${grpc.status[a.code]} in ${a.ms.toFixed(1)} ms, ${a.held}`,
      );
      assert.equal(a.code, grpc.status.INVALID_ARGUMENT, a.details);
      assert.equal(
        a.details,
        `VALIDATION_ERROR: limit_exceeded: a workflow has at most ${WORKFLOW_LIMITS.maxNodes} nodes (this one has 30000)`,
      );
      assert.ok(a.holdMs <= 50, a.held);
    }
  });

  it('refuses 10,001 dependencies in all, and 501 on one node, before decoding', async () => {
    const wide = Array.from({ length: 500 }, (_, i): Node => ({
      node_id: `n${i}`,
      agent_id: AGENT,
      dependencies: Array.from({ length: Math.min(i, 21) }, (_, k) => `n${k}`),
    }));
    const a = await send(encode('wide', wide));
    console.log(
      `      ${wide.reduce((s, n) => s + n.dependencies!.length, 0)} dependencies: ${grpc.status[a.code]}, ${a.held}`,
    );
    assert.equal(a.code, grpc.status.INVALID_ARGUMENT);
    assert.match(
      a.details,
      /^VALIDATION_ERROR: limit_exceeded: a workflow has at most 10000 dependencies in all \(this one has 10269\)/,
    );
    const one = await send(
      encode('one', [
        { node_id: 'a', agent_id: AGENT },
        { node_id: 'b', agent_id: AGENT, dependencies: Array.from({ length: 501 }, () => 'a') },
      ]),
    );
    assert.equal(one.code, grpc.status.INVALID_ARGUMENT);
    assert.match(one.details, /^VALIDATION_ERROR: limit_exceeded: a node has at most 500 dependencies \(one has 501\)/);
  });

  it('creates a workflow at every limit at once (500 nodes, 9,790 dependencies, 8,192 map entries) within 50 ms of event loop', async () => {
    const nodes = Array.from({ length: 500 }, (_, i): Node => ({
      node_id: `n${i}`,
      agent_id: AGENT,
      dependencies: Array.from({ length: Math.min(i, 20) }, (_, k) => `n${i - 1 - k}`),
      metadata: Object.fromEntries(
        Array.from({ length: i < 192 ? 17 : 16 }, (_, k) => [`k${k}`, `value ${k} of node ${i}`]),
      ),
    }));
    const entries = nodes.reduce((s, n) => s + Object.keys(n.metadata!).length, 0);
    assert.equal(entries, WORKFLOW_LIMITS.maxMapEntries);
    const bytes = encode('at-limits', nodes);
    for (let k = 0; k < 3; k++) {
      const a = await send(k === 0 ? bytes : encode(`at-limits-${k}`, nodes));
      console.log(
        `      500 nodes at the limits (${bytes.length} bytes) #${k + 1}: ${a.response?.success ? 'created' : a.details || a.response?.error} in ${a.ms.toFixed(1)} ms, ${a.held}`,
      );
      assert.equal(a.code, grpc.status.OK, a.details);
      assert.equal(a.response!.success, true, a.response!.error);
      assert.ok(a.holdMs <= 50, a.held);
    }
  });
});
