import { strict as assert } from 'node:assert';
import type { OutboxUpdate } from '../../src/core/router/model';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, ctx, json } from '../support/routerHarness';

const A = 'agent-a';
const ACK_TIMEOUT_MS = 10_000;

describe("Router outbox (CoordinatorOutbox: the coordinator's own tracked messages to agents)", () => {
  let h: RouterHarness;
  let sink: CollectingSink;
  let updates: OutboxUpdate[];

  beforeEach(() => {
    h = new RouterHarness();
    h.register(A);
    h.register('peer');
    sink = h.stream(A).sink;
    updates = [];
    h.router.onDidUpdateOutbox((u) => updates.push(u));
  });

  afterEach(() => h.dispose());

  function control(payload: Record<string, unknown>, correlationId = 'task-1', ttlMs?: number) {
    const result = h.router.sendToAgent(
      {
        to: A,
        messageType: 'CONTROL',
        contentType: 'application/json',
        payload: Buffer.from(JSON.stringify(payload)),
        correlationId,
        ttlMs,
      },
      ctx('outbox'),
    );
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    return result.messageId;
  }

  it("sends a tracked CONTROL envelope from coordinator, delivered on the agent's stream with the given correlation id", () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    const delivered = sink.ofType('CONTROL');
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0].envelope.messageId, id);
    assert.equal(delivered[0].envelope.producerId, COORDINATOR_ID);
    assert.equal(delivered[0].envelope.correlationId, 'task-1');
    assert.equal(delivered[0].envelope.contentType, 'application/json');
    assert.deepEqual(json(delivered[0].envelope), { command: 'run', task_id: 'task-1' });
    assert.equal(h.state(id), 'SENT');
  });

  it("reports RECEIVED, READ and FULFILLED from the agent's ACKs with their note and error code, byAck", () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    h.acked(A, id, 'RECEIVED', { note: 'starting' });
    h.acked(A, id, 'READ');
    h.acked(A, id, 'FULFILLED', { note: 'yielded' });
    assert.deepEqual(
      updates.map((u) => [u.messageId, u.state, u.note, u.byAck, u.recipientId, u.correlationId]),
      [
        [id, 'RECEIVED', 'starting', true, A, 'task-1'],
        [id, 'READ', '', true, A, 'task-1'],
        [id, 'FULFILLED', 'yielded', true, A, 'task-1'],
      ],
    );
  });

  it("carries a FULFILLED ACK's `result` as JSON text ('' without one, and for the router's own ends)", () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    h.acked(A, id, 'RECEIVED');
    h.acked(A, id, 'FULFILLED', { result: { files: 3, ok: true } });
    assert.deepEqual(
      updates.map((u) => [u.state, u.result]),
      [
        ['RECEIVED', ''],
        ['FULFILLED', '{"files":3,"ok":true}'],
      ],
    );
    const other = control({ command: 'run', task_id: 'task-2' }, 'task-2');
    h.clock.advance(ACK_TIMEOUT_MS + 1);
    assert.deepEqual(
      updates.filter((u) => u.messageId === other).map((u) => [u.state, u.result]),
      [['TIMED_OUT', '']],
    );
  });

  it('reports an ACK FAILED with its error_code, byAck', () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    h.acked(A, id, 'FAILED', { error_code: 'VALIDATION_ERROR', note: 'bad params' });
    assert.equal(updates.length, 1);
    assert.equal(updates[0].state, 'FAILED');
    assert.equal(updates[0].errorCode, 'VALIDATION_ERROR');
    assert.equal(updates[0].note, 'bad params');
    assert.equal(updates[0].byAck, true);
  });

  it("reports the router's own end (an ACK timeout) with byAck false", () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    h.clock.advance(ACK_TIMEOUT_MS + 1);
    assert.equal(h.state(id), 'TIMED_OUT');
    assert.deepEqual(
      updates.map((u) => [u.state, u.errorCode, u.byAck]),
      [['TIMED_OUT', 'ACK_TIMEOUT', false]],
    );
  });

  it('fires inside the transaction that records the state (the message already reads in its new state)', () => {
    const id = control({ command: 'run', task_id: 'task-1' });
    const seen: Array<[string | undefined, number]> = [];
    // The store's transaction depth (private: read here only to observe where the listener runs): 1 inside the
    // transaction that records the ACK, 0 if the event fired after it.
    const depth = () => (h.store as unknown as { engine: { depth: number } }).engine.depth;
    assert.equal(depth(), 0);
    h.router.onDidUpdateOutbox((u) => seen.push([h.store.router.getMessage(u.messageId)?.state, depth()]));
    h.acked(A, id, 'RECEIVED');
    assert.deepEqual(seen, [['RECEIVED', 1]]);
    assert.equal(depth(), 0);
  });

  it('stays silent for messages between agents', () => {
    const m = h.sendData('peer', A);
    h.acked(A, m.messageId, 'RECEIVED');
    h.acked(A, m.messageId, 'FULFILLED');
    assert.deepEqual(updates, []);
  });

  it('refuses an unknown recipient as an answer (NO_ROUTE), nothing sent', () => {
    const result = h.router.sendToAgent(
      {
        to: 'nobody',
        messageType: 'CONTROL',
        contentType: 'application/json',
        payload: Buffer.from('{}'),
        correlationId: 'x',
      },
      ctx('outbox'),
    );
    assert.equal(result.accepted, false);
    assert.equal(result.accepted ? '' : result.code, 'NO_ROUTE');
  });
});
