import { strict as assert } from 'node:assert';
import type { ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { EventLog } from '../../src/core/log/eventLog';
import { Registry } from '../../src/core/registry/registry';
import { checkDescriptors, DESCRIPTOR_LIMITS, type WireToolDescriptor } from '../../src/core/tools/descriptors';
import type { ToolCallRecord, ToolDescriptor, ToolProvider, ToolsChange } from '../../src/core/tools/model';
import { DEFAULT_EXECUTION_POLICY, ToolCallError } from '../../src/core/tools/model';
import { ProviderCatalog } from '../../src/core/tools/providers';
import { StoreFixture } from '../support/coordinatorFixture';
import { validDescriptor } from '../support/fixtures';

const DEBOUNCE_MS = 30_000;

const grep: WireToolDescriptor = {
  tool_name: 'grep',
  input_schema: JSON.stringify({
    description: 'Searches files for a pattern.',
    type: 'object',
    additionalProperties: false,
    required: ['pattern'],
    properties: { pattern: { type: 'string' }, path: { type: 'string' } },
  }),
  output_schema: JSON.stringify({
    type: 'object',
    properties: { matches: { type: 'array', items: { type: 'string' } } },
    required: ['matches'],
  }),
  idempotent: true,
  needs_worktree: true,
  default_timeout_s: 30,
  max_concurrency: 0,
  side_effects: 'filesystem',
};

/** A built-in provider with one tool, available or not as the test says. */
function builtin(id: string, available = true): ToolProvider {
  const tool: ToolDescriptor = {
    name: 'ping',
    description: 'answers pong',
    inputSchema: { type: 'object' },
    outputSchema: {},
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 0,
    maxConcurrency: 1,
    sideEffects: 'none',
  };
  return {
    id,
    describe: () => [tool],
    call: async () => ({ pong: true }),
    available: () => available,
    unavailableReason: () => `disabled: sw4rm.tools.${id}.enabled`,
  };
}

describe("checkDescriptors (RFC §18.1): a registration's tools, checked", () => {
  const refusal = (tools: WireToolDescriptor[]) => {
    const verdict = checkDescriptors(tools);
    assert.equal(verdict.ok, false, 'refused');
    return (verdict as { reason: string }).reason;
  };

  it('reads a valid descriptor: description from the input schema, max_concurrency 0 → 1, side effects as a list', () => {
    const verdict = checkDescriptors([
      grep,
      { tool_name: 'lint.v2', side_effects: 'filesystem, process', max_concurrency: 4 },
    ]);
    assert.ok(verdict.ok);
    const [first, second] = verdict.tools;
    assert.equal(first.descriptor.description, 'Searches files for a pattern.');
    assert.deepEqual(
      [
        first.descriptor.maxConcurrency,
        first.descriptor.defaultTimeoutS,
        first.descriptor.idempotent,
        first.descriptor.needsWorktree,
      ],
      [1, 30, true, true],
    );
    assert.equal(first.input({ pattern: 'x' }), true);
    assert.equal(first.input({ pattern: 1 }), false);
    assert.equal(first.output?.({ matches: ['a'] }), true);
    assert.equal(first.output?.({}), false);
    assert.deepEqual(second.descriptor.inputSchema, { type: 'object' }, 'an empty input schema is an object');
    assert.equal(second.output, undefined, 'an empty output schema declares none');
    assert.deepEqual(
      [second.descriptor.sideEffects, second.descriptor.sideEffectClasses, second.descriptor.maxConcurrency],
      ['filesystem', ['filesystem', 'process'], 4],
    );
    const none = checkDescriptors([{ tool_name: 'x' }]);
    assert.ok(none.ok);
    assert.deepEqual(none.tools[0].descriptor.sideEffectClasses, ['none']);
  });

  it("refuses an invalid schema with the path of the problem (ajv's meta-schema validation)", () => {
    const badType = JSON.stringify({ type: 'object', properties: { path: { type: 'strin' } } });
    assert.match(
      refusal([grep, grep, { tool_name: 'c', input_schema: badType }].map((t, i) => ({ ...t, tool_name: `t${i}` }))),
      /^tools\[2\]\.input_schema: \/properties\/path\/type must be equal to one of the allowed values/,
    );
    assert.match(
      refusal([{ tool_name: 'a', input_schema: JSON.stringify({ type: 'object', required: 'pattern' }) }]),
      /^tools\[0\]\.input_schema: \/required must be array/,
    );
    assert.match(
      refusal([{ tool_name: 'a', output_schema: JSON.stringify({ type: 'array', minItems: -1 }) }]),
      /^tools\[0\]\.output_schema: \/minItems must be >= 0/,
    );
  });

  it("refuses what ajv's strict mode refuses when it compiles, unresolvable refs, URLs, non-JSON and non-object schemas", () => {
    assert.match(
      refusal([{ tool_name: 'a', input_schema: JSON.stringify({ type: 'object', frobnicate: true }) }]),
      /^tools\[0\]\.input_schema: strict mode: unknown keyword: "frobnicate"/,
    );
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({ type: 'object', properties: { p: { $ref: '#/$defs/missing' } } }),
        },
      ]),
      /^tools\[0\]\.input_schema: can't resolve reference #\/\$defs\/missing/,
    );
    assert.equal(
      refusal([{ tool_name: 'a', input_schema: 'https://example.com/schema.json' }]),
      'tools[0].input_schema: schema URLs are not fetched: inline the schema',
    );
    assert.match(
      refusal([{ tool_name: 'a', output_schema: '{"type":' }]),
      /^tools\[0\]\.output_schema: the schema is not valid JSON/,
    );
    assert.equal(
      refusal([{ tool_name: 'a', output_schema: '[1]' }]),
      'tools[0].output_schema: must be a JSON Schema object',
    );
    assert.match(
      refusal([{ tool_name: 'a', input_schema: '{"type":"string"}' }]),
      /^tools\[0\]\.input_schema: args are a JSON object/,
    );
    assert.match(
      refusal([{ tool_name: 'a', input_schema: `{"description":"${'x'.repeat(DESCRIPTOR_LIMITS.maxSchemaBytes)}"}` }]),
      /^tools\[0\]\.input_schema: the schema is larger than 65536 bytes/,
    );
  });

  it('refuses hostile agent schemas at registration, with the path and the reason (they could freeze or kill the coordinator)', () => {
    // Chained refs, each doubling: 1.4 KB of text that expands to 2^22 nodes (validating {"a":1} took 1.7 s and 914 MB).
    const defs: Record<string, unknown> = { d0: { type: 'integer' } };
    for (let i = 1; i <= 22; i++)
      defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    const chained = { type: 'object', $defs: defs, properties: { a: { $ref: '#/$defs/d22' } } };
    const started = Date.now();
    assert.match(
      refusal([{ tool_name: 'a', input_schema: JSON.stringify(chained) }]),
      /^tools\[0\]\.input_schema: \/\$defs\/d1\d\/anyOf: the schema expands to more than 10000 nodes with its \$refs followed/,
    );
    assert.ok(Date.now() - started < 2000, 'refused quickly (memoised counts)');
    assert.match(
      refusal([{ tool_name: 'a', output_schema: JSON.stringify({ ...chained, type: 'object' }) }]),
      /^tools\[0\]\.output_schema: .*expands to more than 10000 nodes/,
    );
    // ReDoS.
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({
            type: 'object',
            properties: { s: { type: 'string', maxLength: 100, pattern: '^(a+)+$' } },
          }),
        },
      ]),
      /^tools\[0\]\.input_schema: \/properties\/s\/pattern: the pattern has a nested quantifier/,
    );
    assert.match(
      refusal([
        {
          tool_name: 'a',
          output_schema: JSON.stringify({
            type: 'object',
            patternProperties: { '^(a|aa)*$': {} },
            propertyNames: { maxLength: 9 },
          }),
        },
      ]),
      /^tools\[0\]\.output_schema: \/patternProperties\/\^\(a\|aa\)\*\$: the pattern has a nested quantifier or a quantified alternation/,
    );
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({
            type: 'object',
            properties: { s: { type: 'string', maxLength: 9, pattern: '(a)\\1' } },
          }),
        },
      ]),
      /\/properties\/s\/pattern: the pattern has a back-reference/,
    );
    // uniqueItems over objects, unbounded (quadratic: 300 KB of args took 6 s).
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({
            type: 'object',
            properties: { xs: { type: 'array', uniqueItems: true, items: { type: 'object' } } },
          }),
        },
      ]),
      /^tools\[0\]\.input_schema: \/properties\/xs\/uniqueItems: uniqueItems over items that are not all scalar needs "maxItems" ≤ 1000/,
    );
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({
            type: 'object',
            properties: { xs: { type: 'array', uniqueItems: true, maxItems: 5000 } },
          }),
        },
      ]),
      /\/properties\/xs\/uniqueItems: uniqueItems over items/,
    );
    // The secure meta-schema: a pattern with no maxLength.
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({ type: 'object', properties: { s: { type: 'string', pattern: '^a+$' } } }),
        },
      ]),
      /^tools\[0\]\.input_schema: \/properties\/s: is not accepted by the secure meta-schema: .*\(needs "maxLength"\)/,
    );
    // Refs that would escape the count.
    assert.match(
      refusal([
        { tool_name: 'a', input_schema: JSON.stringify({ type: 'object', properties: { p: { $ref: 'other.json' } } }) },
      ]),
      /\/properties\/p\/\$ref: only local '#\/\.\.\.' refs are accepted/,
    );
    assert.match(
      refusal([
        {
          tool_name: 'a',
          input_schema: JSON.stringify({ type: 'object', properties: { p: { $id: 'x', type: 'string' } } }),
        },
      ]),
      /\/properties\/p: \$id and anchors are accepted only at the root/,
    );
    // What stays accepted: safe patterns with maxLength, scalar or bounded uniqueItems, recursive and shared refs.
    const fine = {
      type: 'object',
      $defs: { node: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/node' } } } } },
      properties: {
        id: { type: 'string', maxLength: 64, pattern: '^[a-z][a-z0-9_-]*$' },
        tags: { type: 'array', uniqueItems: true, items: { type: 'string' } },
        pairs: { type: 'array', uniqueItems: true, maxItems: 100, items: { type: 'object' } },
        tree: { $ref: '#/$defs/node' },
        pattern: { type: 'string' },
        default: { $ref: '#/$defs/node' },
      },
    };
    const verdict = checkDescriptors([
      { tool_name: 'a', input_schema: JSON.stringify(fine), output_schema: JSON.stringify(fine) },
    ]);
    assert.ok(verdict.ok, verdict.ok ? '' : verdict.reason);
    assert.equal(verdict.tools[0].input({ id: 'a1', tree: { kids: [{ kids: [] }] } }), true);
    assert.equal(verdict.tools[0].input({ id: '1a' }), false);
  });

  it('refuses bad names, duplicates, bounds and unknown side-effect classes, naming the field', () => {
    assert.equal(refusal([{ tool_name: '' }]), 'tools[0].tool_name: must not be empty');
    assert.match(refusal([{ tool_name: 'a b' }]), /^tools\[0\]\.tool_name: 'a b' may contain only/);
    assert.match(refusal([{ tool_name: 'x'.repeat(129) }]), /^tools\[0\]\.tool_name: is longer than 128 characters/);
    assert.equal(refusal([{ tool_name: 'a' }, { tool_name: 'a' }]), "tools[1].tool_name: 'a' is listed twice");
    assert.match(
      refusal([{ tool_name: 'a', max_concurrency: 1025 }]),
      /^tools\[0\]\.max_concurrency: must be 0 \(meaning 1\) to 1024/,
    );
    assert.match(
      refusal([{ tool_name: 'a', default_timeout_s: 86_401 }]),
      /^tools\[0\]\.default_timeout_s: must be 0 \(none\) to 86400 seconds/,
    );
    assert.match(
      refusal([{ tool_name: 'a', side_effects: 'filesystem,gpu' }]),
      /^tools\[0\]\.side_effects: 'gpu' is not a side-effect class/,
    );
    assert.match(
      refusal([{ tool_name: 'a', side_effects: 'git,'.repeat(65) }]),
      /^tools\[0\]\.side_effects: is longer than 256 characters/,
    );
    assert.match(
      refusal([{ tool_name: 'a', side_effects: 'none,git' }]),
      /^tools\[0\]\.side_effects: 'none' cannot be listed with other classes/,
    );
    assert.match(
      refusal(Array.from({ length: 257 }, (_, i) => ({ tool_name: `t${i}` }))),
      /^tools: at most 256 tools per provider \(257 given\)/,
    );
    assert.ok(
      checkDescriptors(Array.from({ length: 256 }, (_, i) => ({ tool_name: `t${i}` }))).ok,
      '256 tools are fine',
    );
  });
});

describe('ProviderCatalog (RFC §18.1): registered providers, persisted, available while their agent is online', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;
  let registry: Registry;
  let catalog: ProviderCatalog;
  let changes: ToolsChange[];
  let made: string[];
  const ctx = { correlationId: 'corr-tools' };

  function open(): ProviderCatalog {
    const opened = new ProviderCatalog({
      store,
      log,
      clock,
      agents: registry,
      builtins: [builtin('workspace'), builtin('process', false)],
      external: (id, tools) => {
        made.push(id);
        return { id, describe: () => tools, call: async () => ({ external: id }) };
      },
    });
    opened.onDidChange((change) => changes.push(change));
    return opened;
  }

  function openAreas(): void {
    ({ store, log } = fixture);
    registry = new Registry(store, log, clock, { heartbeatDebounceMs: DEBOUNCE_MS, initTimeoutMs: 10 * DEBOUNCE_MS });
    catalog = open();
  }

  function closeAreas(): void {
    catalog.dispose();
    registry.dispose();
  }

  const events = (eventType: string) => log.query({ eventType, limit: 1000 });
  const info = (id: string) => catalog.infos().find((p) => p.providerId === id);

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-tool-providers-' });
    clock = fixture.clock;
    changes = [];
    made = [];
    openAreas();
    assert.equal(registry.register(validDescriptor('indexer'), ctx).accepted, true);
    assert.equal(registry.heartbeat('indexer', 'RUNNABLE', {}, ctx), true);
  });

  afterEach(() => {
    closeAreas();
    fixture.dispose();
  });

  it('registers an agent as provider: persisted with one event, listed after the built-ins, its provider made once', () => {
    const result = catalog.register('indexer', 'indexer', [grep], ctx);
    assert.ok(result.ok, JSON.stringify(result));
    assert.deepEqual(
      result.tools.map((t) => t.name),
      ['grep'],
    );
    assert.deepEqual(
      catalog.infos().map((p) => [p.providerId, p.kind, p.available, p.unavailableReason]),
      [
        ['workspace', 'builtin', true, ''],
        ['process', 'builtin', false, 'disabled: sw4rm.tools.process.enabled'],
        ['indexer', 'agent', true, ''],
      ],
    );
    assert.equal(info('indexer')?.registeredAt, clock.now());
    const [event] = events('tool.provider_registered');
    assert.deepEqual(
      [event.actor, event.correlationId, event.details.provider_id, event.details.tools, event.details.replaced],
      ['indexer', 'corr-tools', 'indexer', ['grep'], false],
    );
    assert.deepEqual(changes, [{ kind: 'provider', id: 'indexer' }]);
    assert.equal(catalog.get('indexer'), catalog.get('indexer'));
    assert.deepEqual(made, ['indexer'], 'one ToolProvider per registration');
    assert.equal(catalog.get('workspace')?.id, 'workspace');
    assert.equal(catalog.get('nobody'), undefined);
    const validators = catalog.validators('indexer', 'grep');
    assert.equal(validators?.input({ pattern: 'a' }), true);
    assert.equal(validators?.input({}), false);
    assert.equal(validators?.output?.({ matches: [] }), true);
    assert.equal(catalog.validators('indexer', 'nope'), undefined);
    assert.equal(
      catalog.validators('workspace', 'ping')?.output,
      undefined,
      'a built-in tool without an output schema',
    );
    assert.equal(catalog.validators('workspace', 'ping')?.input({}), true);
  });

  it("refuses built-in ids (ALREADY_EXISTS), another agent's id (PERMISSION_DENIED), an unregistered agent (FAILED_PRECONDITION), bad tools (VALIDATION_ERROR)", () => {
    for (const id of ['workspace', 'process', 'reasoning']) {
      const result = catalog.register(id, id, [grep], ctx);
      assert.deepEqual(result.ok ? 'ok' : result.code, 'ALREADY_EXISTS', id);
    }
    const other = catalog.register('indexer', 'someone-else', [grep], ctx);
    assert.ok(!other.ok);
    assert.equal(other.code, 'PERMISSION_DENIED');
    assert.match(other.reason, /the caller is 'indexer', provider_id is 'someone-else'/);
    const unregistered = catalog.register('ghost', 'ghost', [grep], ctx);
    assert.ok(!unregistered.ok);
    assert.deepEqual(
      [unregistered.code, unregistered.reason.startsWith('register the agent first')],
      ['FAILED_PRECONDITION', true],
    );
    const invalid = catalog.register(
      'indexer',
      'indexer',
      [{ tool_name: 'x', input_schema: '{"type":"object","properties":{"a":{"type":3}}}' }],
      ctx,
    );
    assert.ok(!invalid.ok);
    assert.equal(invalid.code, 'VALIDATION_ERROR');
    assert.match(invalid.reason, /^tools\[0\]\.input_schema: \/properties\/a\/type must be/);
    assert.equal(events('tool.provider_registered').length, 0, 'nothing refused is recorded as registered');
    assert.equal(store.tools.listProviders().length, 0);
    assert.equal(info('indexer'), undefined);
  });

  it("replaces a provider's tools on a repeat registration, with a fresh ToolProvider", () => {
    assert.ok(catalog.register('indexer', 'indexer', [grep], ctx).ok);
    catalog.get('indexer');
    clock.advance(5_000);
    assert.ok(catalog.register('indexer', 'indexer', [{ tool_name: 'count' }, { tool_name: 'grep' }], ctx).ok);
    assert.deepEqual(
      info('indexer')?.tools.map((t) => t.name),
      ['count', 'grep'],
    );
    assert.equal(info('indexer')?.registeredAt, clock.now());
    assert.equal(catalog.validators('indexer', 'grep')?.output, undefined, 'the new grep declares no output schema');
    assert.deepEqual(
      catalog
        .get('indexer')
        ?.describe()
        .map((t) => t.name),
      ['count', 'grep'],
    );
    assert.deepEqual(made, ['indexer', 'indexer']);
    assert.deepEqual(
      events('tool.provider_registered').map((e) => e.details.replaced),
      [false, true],
    );
    assert.equal(store.tools.listProviders().length, 1);
  });

  it('keeps a registration across a reopen of the store; unavailable until the agent is heard from again', async () => {
    assert.ok(catalog.register('indexer', 'indexer', [grep], ctx).ok);
    closeAreas();
    fixture.reopen(() => clock.advance(60_000));
    openAreas();
    const restored = info('indexer');
    assert.ok(restored);
    assert.deepEqual(
      restored.tools.map((t) => [t.name, t.description, t.maxConcurrency, t.sideEffectClasses]),
      [['grep', 'Searches files for a pattern.', 1, ['filesystem']]],
    );
    assert.equal(restored.available, false);
    assert.match(restored.unavailableReason, /agent 'indexer' is disconnected/);
    // The stored schemas compile again on the schema worker; a call meanwhile is refused, retryable.
    assert.throws(() => catalog.validators('indexer', 'grep'), /AGENT_UNAVAILABLE|being compiled again/);
    await catalog.whenCompiled('indexer');
    const compiled = catalog.validators('indexer', 'grep');
    assert.equal(compiled?.input({ pattern: 1 }), false, 'schemas compiled again, off the event loop');
    assert.equal(compiled?.output?.({ matches: 'no' }), false);
    assert.equal(catalog.validators('indexer', 'grep'), compiled, 'compiled once');
    assert.equal(registry.heartbeat('indexer', 'RUNNABLE', {}, ctx), true);
    assert.equal(info('indexer')?.available, true);
    assert.deepEqual(
      events('tool.provider_availability').map((e) => e.details.available),
      [true],
    );
  });

  it('follows the agent: online → unavailable (no heartbeat) → online → deregistered (kept, unavailable) → registered again', () => {
    assert.ok(catalog.register('indexer', 'indexer', [grep], ctx).ok);
    changes.length = 0;
    clock.advance(DEBOUNCE_MS + 1);
    assert.equal(info('indexer')?.available, false);
    assert.match(info('indexer')!.unavailableReason, /agent 'indexer' is unavailable/);
    assert.equal(registry.heartbeat('indexer', 'RUNNABLE', {}, ctx), true);
    assert.equal(info('indexer')?.available, true);
    assert.equal(registry.deregister('indexer', 'done', ctx), true);
    assert.equal(info('indexer')?.available, false);
    assert.match(info('indexer')!.unavailableReason, /agent 'indexer' is not registered/);
    assert.deepEqual(
      info('indexer')?.tools.map((t) => t.name),
      ['grep'],
      'the registration stays',
    );
    assert.equal(registry.register(validDescriptor('indexer'), ctx).accepted, true);
    assert.equal(info('indexer')?.available, true);
    const availability = events('tool.provider_availability');
    assert.deepEqual(
      availability.map((e) => [e.details.available, e.level]),
      [
        [false, 'WARN'],
        [true, 'INFO'],
        [false, 'WARN'],
        [true, 'INFO'],
      ],
    );
    assert.match(String(availability[0].details.reason), /unavailable/);
    assert.deepEqual(
      changes,
      Array.from({ length: 4 }, () => ({ kind: 'provider', id: 'indexer' })),
    );
  });

  it('registers in turns: one tool per event-loop turn, registrations of one provider in order, the agent checked again at the end', async () => {
    let turns = 0;
    let counting = true;
    const tick = () => {
      if (counting) {
        turns++;
        setImmediate(tick);
      }
    };
    setImmediate(tick);
    const tools = Array.from({ length: 5 }, (_, i) => ({ ...grep, tool_name: `t${i}` }));
    const first = catalog.registerInTurns('indexer', 'indexer', tools, ctx);
    const second = catalog.registerInTurns('indexer', 'indexer', [{ tool_name: 'last' }], ctx);
    const [a, b] = await Promise.all([first, second]);
    counting = false;
    assert.ok(a.ok && b.ok);
    assert.ok(turns >= 4, `other work ran between the tools (${turns} turns)`);
    assert.deepEqual(
      info('indexer')?.tools.map((t) => t.name),
      ['last'],
      'the later registration is the one kept',
    );
    assert.deepEqual(
      events('tool.provider_registered').map((e) => e.details.tools),
      [tools.map((t) => t.tool_name), ['last']],
    );

    const leaving = catalog.registerInTurns('indexer', 'indexer', tools, ctx);
    assert.equal(registry.deregister('indexer', 'gone', ctx), true);
    const refused = await leaving;
    assert.deepEqual(refused.ok ? 'ok' : [refused.code, refused.reason.startsWith('register the agent first')], [
      'FAILED_PRECONDITION',
      true,
    ]);
    const bad = await catalog.registerInTurns('indexer', 'indexer', [grep], ctx);
    assert.ok(!bad.ok);
    assert.equal(bad.code, 'FAILED_PRECONDITION');
  });

  it('describes one provider, or every provider as <provider_id>/<tool_name>; an unknown one is NOT_FOUND', () => {
    assert.ok(catalog.register('indexer', 'indexer', [grep], ctx).ok);
    assert.deepEqual(
      catalog.describe('indexer').map((t) => t.name),
      ['grep'],
    );
    assert.deepEqual(
      catalog.describe('process').map((t) => t.name),
      ['ping'],
      'an unavailable built-in still describes its tools',
    );
    assert.deepEqual(
      catalog.describe('').map((t) => t.name),
      ['workspace/ping', 'process/ping', 'indexer/grep'],
    );
    assert.throws(
      () => catalog.describe('nobody'),
      (err: ToolCallError) =>
        err.kind === 'not_found' &&
        err.details === "NOT_FOUND: no provider 'nobody' (known: workspace, process, indexer)",
    );
  });

  it('counts an agent shutting down or failed as unavailable', () => {
    assert.ok(catalog.register('indexer', 'indexer', [grep], ctx).ok);
    assert.equal(registry.transition('indexer', 'SHUTTING_DOWN', { by: 'operator', reason: 'test' }, ctx).ok, true);
    assert.equal(info('indexer')?.available, false);
    assert.equal(info('indexer')?.unavailableReason, "agent 'indexer' is SHUTTING_DOWN");
    assert.equal(registry.register(validDescriptor('fresh'), ctx).accepted, true);
    assert.ok(catalog.register('fresh', 'fresh', [grep], ctx).ok);
    assert.equal(info('fresh')?.available, true, 'INITIALIZING and online');
    assert.equal(
      registry.transition('fresh', 'FAILED_STATE', { by: 'timeout', reason: 'test', errorCode: 'init_timeout' }, ctx)
        .ok,
      true,
    );
    assert.equal(info('fresh')?.available, false);
    assert.equal(info('fresh')?.unavailableReason, "agent 'fresh' is FAILED_STATE");
  });
});

describe('SqliteToolsRepository (schema v11): calls in start order, pruned oldest first', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-tool-calls-' });
    store = fixture.store;
  });

  afterEach(() => fixture.dispose());

  const call = (callId: string, outcome: ToolCallRecord['outcome'], startedAt: number): ToolCallRecord => ({
    callId,
    callerAgentId: 'a',
    providerId: 'p',
    toolName: 't',
    via: 'grpc',
    stream: false,
    outcome,
    errorCode: '',
    errorMessage: '',
    startedAt,
    endedAt: 0,
    frames: 0,
    bytes: 0,
    attempts: 1,
    argsExcerpt: '{}',
    policy: DEFAULT_EXECUTION_POLICY,
    invocationId: '',
    messageId: '',
  });

  it("keeps a call's place when it is updated, lists newest first, finds unfinished calls, prunes in bounded batches, survives a reopen", () => {
    store.transaction(() => {
      for (let i = 0; i < 10; i++) store.tools.upsertCall(call(`c${i}`, 'running', 1000 - i));
      store.tools.upsertCall(call('c0', 'ok', 1000));
      store.tools.upsertCall(call('c1', 'queued', 999));
    });
    assert.deepEqual(
      store.tools.recentCalls(3).map((c) => c.callId),
      ['c9', 'c8', 'c7'],
      'start order, not time or update order',
    );
    assert.equal(store.tools.call('c0')?.outcome, 'ok');
    assert.equal(store.tools.call('nope'), undefined);
    assert.equal(store.tools.unfinishedCalls().length, 9);
    assert.equal(store.tools.unfinishedCalls()[0].callId, 'c1');
    assert.equal(
      store.transaction(() => store.tools.pruneCalls(4, 5)),
      5,
    );
    assert.equal(
      store.transaction(() => store.tools.pruneCalls(4, 5)),
      1,
    );
    assert.equal(
      store.transaction(() => store.tools.pruneCalls(4, 5)),
      0,
    );
    assert.deepEqual(
      store.tools.recentCalls(100).map((c) => c.callId),
      ['c9', 'c8', 'c7', 'c6'],
    );
    fixture.reopen();
    store = fixture.store;
    store.transaction(() => store.tools.upsertCall(call('new', 'running', 0)));
    assert.deepEqual(
      store.tools.recentCalls(2).map((c) => c.callId),
      ['new', 'c9'],
      'a reopened store continues the order',
    );
  });
});
