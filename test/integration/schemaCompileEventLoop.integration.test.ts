import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import { DESCRIPTOR_LIMITS, MAX_VALIDATOR_SOURCE_BYTES, schemaSourceOf } from '../../src/core/tools/descriptors';
import {
  bearer,
  CoordinatorClients,
  ServiceCaller,
  serviceClient,
  unary,
  type ServiceClient,
} from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { describeHold, heldMs, measureHold } from '../support/loopHold';

/** Properties that each make ajv generate a fair amount of code (a nested object, an integer bound, an enum). */
function schemaOf(properties: number, salt: string): string {
  const props: Record<string, unknown> = {};
  for (let i = 0; i < properties; i++) {
    props[`${salt}${i}`] = {
      type: 'object',
      properties: { a: { type: 'integer', minimum: 0 }, b: { enum: ['x', 'y'] } },
      additionalProperties: false,
    };
  }
  return JSON.stringify({
    type: 'object',
    properties: props,
    required: Object.keys(props),
    additionalProperties: false,
  });
}

/**
 * The most properties whose validator code is within MAX_VALIDATOR_SOURCE_BYTES, for property names of a 4-character
 * prefix (every text of the test has one: the code's size depends on the names), searched before any measurement.
 */
function propertiesAtTheCodeLimit(): number {
  const size = (n: number) => {
    const source = schemaSourceOf(schemaOf(n, 'p___'), 'input');
    return source.ok ? Buffer.byteLength(source.source) : Infinity;
  };
  const per = (size(20) - size(10)) / 10;
  let n = Math.floor((MAX_VALIDATOR_SOURCE_BYTES - (size(10) - 10 * per)) / per) + 2;
  while (size(n) > MAX_VALIDATOR_SOURCE_BYTES) n--;
  return n;
}

/** The longest hold of the event loop (support/loopHold.ts: in this process, which is also the server's) while `work` ran. */
async function held<T>(work: () => Promise<T>): Promise<{ value: T; holdMs: number; ms: number; held: string }> {
  const { value, hold } = await measureHold(work);
  return { value, holdMs: heldMs(hold), ms: hold.ms, held: describeHold(hold) };
}

class NegotiationClient extends ServiceCaller<'Open' | 'Propose'> {
  constructor(address: string, token: string) {
    super(address, token, 'sw4rm.negotiation.NegotiationService');
  }
}

/**
 * Agents' JSON Schemas over real gRPC (issue 30, item 1): ajv's compile grows faster than the schema (about 40 ms at
 * 100 properties, 0.6–1.6 s at the 64 KiB limit, all on the coordinator's thread before). Now every agent schema is
 * compiled on the schema worker and its generated code is bounded (MAX_VALIDATOR_SOURCE_BYTES), so neither
 * RegisterProvider, nor the first validation against such a schema, nor a debate's Open and Propose holds the event
 * loop more than 50 ms, at the limit or beyond it.
 */
describe('agent JSON Schemas hold the event loop at most 50 ms at any size (issue 30, item 1)', function () {
  this.timeout(180_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let connector: ServiceClient;
  let negotiator: NegotiationClient;
  const tokens: Record<string, string> = {};
  let atLimit: number;

  before(async () => {
    atLimit = propertiesAtTheCodeLimit();
    dataDir = makeTempDir('sw4rm-schema-loop-');
    host = await startHost(dataDir);
    connector = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.connector.ConnectorService');
    const registry = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    for (const agent of ['indexer', 'caller', 'alice', 'bob']) {
      assert.equal((await registry.registerAgent(descriptorMessage(agent))).accepted, true);
      tokens[agent] = host.coordinator.credentials.mintAgent(agent, 'test', 'schema event-loop test', {
        correlationId: 'test',
      }).token;
    }
    registry.close();
    negotiator = new NegotiationClient(`127.0.0.1:${host.port}`, tokens.alice);
    // The schema worker is started (and ajv loaded there) before the measurements, as a coordinator running for a while has it.
    assert.ok(
      (
        await unary<{ ok: boolean }>(
          connector,
          'RegisterProvider',
          { provider_id: 'indexer', tools: [{ tool_name: 'warm' }] },
          bearer(tokens.indexer),
        )
      ).ok,
    );
  });

  after(async () => {
    connector?.close();
    negotiator?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  const register = (tools: unknown[]) =>
    unary<{ ok: boolean; reason: string }>(
      connector,
      'RegisterProvider',
      { provider_id: 'indexer', tools },
      bearer(tokens.indexer),
    );

  it('refuses a 64 KiB schema whose validator code would be too large, within 50 ms of event loop', async () => {
    let n = 1;
    while (Buffer.byteLength(schemaOf(n + 1, 'b0__')) <= DESCRIPTOR_LIMITS.maxSchemaBytes) n++;
    for (let k = 0; k < 3; k++) {
      const text = schemaOf(n, `b${k}__`); // a new text each time: never a cached verdict
      const a = await held(() => register([{ tool_name: 'big', input_schema: text, output_schema: text }]));
      console.log(
        `      ${n} properties, ${Buffer.byteLength(text)} bytes #${k + 1}: ${a.value.reason || 'accepted'} in ${a.ms.toFixed(0)} ms, ${a.held}`,
      );
      assert.equal(a.value.ok, false);
      assert.match(
        a.value.reason,
        /^VALIDATION_ERROR: tools\[0\]\.input_schema: compiles to \d+ KiB of validator code, more than 256 KiB/,
      );
      assert.ok(a.holdMs <= 50, a.held);
    }
  });

  it("registers two tools with input and output schemas at the code limit, and validates a call's args with them, each within 50 ms of event loop", async () => {
    for (let k = 0; k < 2; k++) {
      const texts = [0, 1, 2, 3].map((j) => schemaOf(atLimit, `t${k}${j}_`));
      const a = await held(() =>
        register([
          { tool_name: 'one', input_schema: texts[0], output_schema: texts[1] },
          { tool_name: 'two', input_schema: texts[2], output_schema: texts[3] },
        ]),
      );
      const code = schemaSourceOf(texts[0], 'input');
      console.log(
        `      2 tools × 2 schemas of ${atLimit} properties (${Buffer.byteLength(texts[0])} bytes, ${code.ok ? (Buffer.byteLength(code.source) / 1024).toFixed(0) : '?'} KiB of code each) #${k + 1}: ${a.value.reason || 'registered'} in ${a.ms.toFixed(0)} ms, ${a.held}`,
      );
      assert.deepEqual(a.value, { ok: true, reason: '' });
      assert.ok(a.holdMs <= 50, a.held);
      for (const tool of ['one', 'two']) {
        // The first call of a validator makes V8 compile its code: the args miss every required property.
        const call = await held(() =>
          host.coordinator.tools
            .call(
              'caller',
              { providerId: 'indexer', toolName: tool, contentType: '', args: Buffer.from('{"x":1}') },
              { correlationId: 'c' },
            )
            .then(
              () => 'answered',
              (err: Error) => err.message,
            ),
        );
        console.log(`      first call of ${tool}: ${call.value.slice(0, 90)}, ${call.held}`);
        assert.match(call.value, /args do not match the input schema of/);
        assert.ok(call.holdMs <= 50, call.held);
      }
    }
  });

  it('opens debates with a proposal schema of 64 KiB (refused) and at the code limit (a draft checked against it), each within 50 ms of event loop', async () => {
    let n = 1;
    while (Buffer.byteLength(schemaOf(n + 1, 'o0__')) <= 65_536) n++;
    const refused = await held(() =>
      negotiator
        .call(
          'Open',
          { negotiation_id: 'big', topic: 't', participants: ['alice', 'bob'] },
          { 'sw4rm-proposal-schema': schemaOf(n, 'o0__') },
        )
        .then(
          () => 'opened',
          (err: { details?: string }) => err.details ?? String(err),
        ),
    );
    console.log(
      `      Open, ${n} properties (64 KiB): ${refused.value.slice(0, 110)} in ${refused.ms.toFixed(0)} ms, ${refused.held}`,
    );
    assert.match(
      refused.value,
      /sw4rm-proposal-schema is not a usable JSON Schema: compiles to \d+ KiB of validator code/,
    );
    assert.ok(refused.holdMs <= 50, refused.held);

    const text = schemaOf(atLimit, 'o1__');
    const opened = await held(() =>
      negotiator.call(
        'Open',
        { negotiation_id: 'limit', topic: 't', participants: ['alice', 'bob'] },
        { 'sw4rm-proposal-schema': text },
      ),
    );
    console.log(
      `      Open, ${atLimit} properties at the code limit: opened in ${opened.ms.toFixed(0)} ms, ${opened.held}`,
    );
    assert.ok(opened.holdMs <= 50, opened.held);
    const draft = await held(() =>
      negotiator
        .call('Propose', {
          negotiation_id: 'limit',
          from_agent: 'alice',
          content_type: 'application/json',
          payload: Buffer.from('{"x":1}'),
        })
        .then(
          () => 'accepted',
          (err: { details?: string }) => err.details ?? String(err),
        ),
    );
    console.log(`      Propose against it: ${draft.value.slice(0, 90)}, ${draft.held}`);
    assert.match(draft.value, /the draft does not match the proposal schema/);
    assert.ok(draft.holdMs <= 50, draft.held);
  });
});
