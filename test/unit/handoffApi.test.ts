import { strict as assert } from 'node:assert';
import { HANDOFF_CONTEXT_CONTENT_TYPE, MAX_NEGOTIATION_PAYLOAD_SHOWN, type HandoffChange } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { HandoffRequestInput } from '../../src/core/handoff/handoffs';
import type { Speaker } from '../../src/core/policy/speaker';
import { rejection } from '../support/apiErrors';
import { RouterHarness, ctx } from '../support/routerHarness';

const as = (agentId: string): Speaker => ({
  kind: 'agent',
  label: `agent:${agentId}`,
  mayActAs: (id) => id === agentId,
});
const CONTEXT = {
  conversation_history: [{ role: 'user', content: 'Hello' }],
  tool_state: {},
  metadata: { agent_id: 'a' },
};

describe("CoordinatorApi: the handoff section (the editor's Handoffs)", () => {
  let h: RouterHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new RouterHarness({}, { heartbeatDebounceMs: 86_400_000 }, undefined, {
      handoffs: { routeToOperator: true, defaultTimeoutMs: 60_000 },
    });
    api = new InProcessCoordinatorApi(h.coordinator);
    for (const [id, caps] of [
      ['a', ['review']],
      ['b', ['review']],
      ['c', ['other']],
    ] as const) {
      h.register(id, { capabilities: [...caps] });
      h.stream(id);
      h.registry.heartbeat(id, 'RUNNABLE', {}, ctx());
    }
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  function request(extra: Partial<HandoffRequestInput> = {}) {
    return h.coordinator.handoffs.request(
      {
        requestId: 'h1',
        fromAgent: 'a',
        toAgent: '',
        reason: 'needs review',
        context: Buffer.from(JSON.stringify(CONTEXT)),
        contextContentType: HANDOFF_CONTEXT_CONTENT_TYPE,
        capabilitiesRequired: ['review'],
        priority: 0,
        timeoutMs: null,
        budget: null,
        delegationPolicy: null,
        taskId: '',
        correlationId: '',
        parentRequestId: '',
        carryWorktree: false,
        ...extra,
      },
      as(extra.fromAgent ?? 'a'),
      ctx(),
    );
  }

  it('lists pending first, then the most recently updated, with the context as text; one handoff by id; plain data', async () => {
    request();
    await h.coordinator.handoffs.accept('h1', 'b', as('b'), ctx());
    h.clock.advance(1_000);
    request({ requestId: 'h2', capabilitiesRequired: ['nobody-has-this'] });
    h.clock.advance(1_000);
    request({ requestId: 'h3' });
    const list = await api.handoffs();
    assert.deepEqual(
      list.map((v) => [v.requestId, v.state, v.awaitingOperator]),
      [
        ['h3', 'PENDING', false],
        ['h2', 'PENDING', true],
        ['h1', 'ACCEPTED', false],
      ],
    );
    assert.deepEqual(structuredClone(list), list);
    const one = await api.handoff('h1');
    assert.ok(one);
    assert.equal(one.acceptedBy, 'b');
    assert.equal(one.fromAgent, 'a');
    assert.equal(one.reason, 'needs review');
    assert.deepEqual(JSON.parse(one.context.text), CONTEXT);
    assert.equal(one.context.contentType, HANDOFF_CONTEXT_CONTENT_TYPE);
    assert.equal(one.context.bytes, Buffer.byteLength(JSON.stringify(CONTEXT)));
    assert.equal(one.context.truncated, false);
    assert.equal('context' in one && Buffer.isBuffer(one.context), false, 'no bytes cross the API');
    assert.equal(await api.handoff('nope'), undefined);
    assert.equal((await api.handoffs(1)).length, 1);
  });

  it('a large context is shown cut, with its whole size; binary contexts as their size only', async () => {
    const big = { ...CONTEXT, metadata: { blob: 'x'.repeat(200_000) } };
    request({ context: Buffer.from(JSON.stringify(big)) });
    request({ requestId: 'h2', contextContentType: '', context: Buffer.from([0xff, 0x00, 0xfe]) });
    const [binary, listed] = await api.handoffs();
    assert.equal(listed.context.truncated, true);
    assert.equal(listed.context.text.length, MAX_NEGOTIATION_PAYLOAD_SHOWN);
    assert.equal(listed.context.bytes, Buffer.byteLength(JSON.stringify(big)));
    assert.equal((await api.handoff('h1'))!.context.bytes, Buffer.byteLength(JSON.stringify(big)));
    assert.deepEqual([binary.context.binary, binary.context.bytes, binary.context.text], [true, 3, '']);
  });

  it('the operator accepts or rejects a handoff that waits for a person; others are refused; changes fire onDidChangeHandoffs', async () => {
    const seen: HandoffChange[] = [];
    const subscription = api.onDidChangeHandoffs((change) => seen.push(change));
    request({ capabilitiesRequired: ['nobody-has-this'] });
    request({ requestId: 'h2', capabilitiesRequired: ['nobody-has-this'] });
    request({ requestId: 'h3' });
    const accepted = await api.acceptHandoff('h1', 'alice');
    assert.equal(accepted.state, 'ACCEPTED');
    assert.equal(accepted.acceptedBy, 'operator:alice');
    assert.equal(typeof accepted.context.text, 'string');
    const refusedAgain = await rejection(api.acceptHandoff('h1', 'alice'));
    assert.equal(refusedAgain.code, 'refused');
    assert.match(refusedAgain.message, /does not wait for a person/);
    assert.equal(
      (await rejection(api.acceptHandoff('h3', 'alice'))).code,
      'refused',
      "offered to an agent: not the operator's",
    );
    assert.equal((await rejection(api.acceptHandoff('nope', 'alice'))).code, 'not_found');
    assert.equal((await rejection(api.rejectHandoff('h2', ' ', 'alice'))).code, 'invalid');
    const declined = await api.rejectHandoff('h2', 'not now', 'alice');
    assert.equal(declined.state, 'REJECTED');
    assert.equal(declined.rejectionReason, 'not now');
    assert.deepEqual(
      seen.map((c) => [c.requestId, c.state]),
      [
        ['h1', 'PENDING'],
        ['h2', 'PENDING'],
        ['h3', 'PENDING'],
        ['h1', 'ACCEPTED'],
        ['h2', 'REJECTED'],
      ],
    );
    const operatorEvents = h.events('handoff.accepted').filter((e) => e.actor === 'operator:alice');
    assert.equal(operatorEvents.length, 1);
    subscription.dispose();
    api.dispose();
    assert.equal((await rejection(api.handoffs())).code, 'stopped');
    request({ requestId: 'h4' });
    assert.equal(seen.length, 5, 'no event after dispose');
  });
});
