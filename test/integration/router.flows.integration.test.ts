import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { RouterOptions } from '../../src/core/router/router';
import type { CoordinatorHost } from '../../src/server/host';
import type { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { clientsFor, startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { WireAgent, wireJson, type WireInbox } from '../support/routerWire';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * The canonical flows of RFC Appendix C (C.1–C.3) and the inbox-stream contract of README "Routing messages",
 * over real gRPC: a CoordinatorHost on a free port, agents registered through RegistryService, envelopes through
 * RouterService.SendMessage, inboxes through StreamIncoming. Waiting is done by watching the streams with deadlines.
 */
describe('RouterService flows over gRPC (RFC Appendix C)', function () {
  this.timeout(20_000);

  let dataDir: string;
  let host: CoordinatorHost;
  let clients: CoordinatorClients;
  const agents: WireAgent[] = [];
  const inboxes: WireInbox[] = [];

  async function start(router: Partial<RouterOptions> = {}): Promise<void> {
    dataDir = makeTempDir('sw4rm-int-flows-');
    host = await startHost(dataDir, { router });
    clients = clientsFor(host);
  }

  async function stop(): Promise<void> {
    for (const inbox of inboxes.splice(0)) inbox.close();
    for (const agent of agents.splice(0)) agent.close();
    clients?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  }

  /** Registers `agentId` and answers a wire client for it. */
  async function agent(agentId: string): Promise<WireAgent> {
    const response = await clients.registerAgent(descriptorMessage(agentId));
    assert.equal(response.accepted, true, response.reason);
    const client = new WireAgent(`127.0.0.1:${host.port}`, host.token, agentId);
    agents.push(client);
    return client;
  }

  /** Opens `client`'s inbox and waits until the coordinator has attached it. */
  async function inbox(client: WireAgent, resumeAfter?: string): Promise<WireInbox> {
    const opened = client.openInbox(resumeAfter);
    inboxes.push(opened);
    await pollUntil(
      `${client.agentId}'s stream to be attached`,
      () => (host.coordinator.router.inboxStats(client.agentId).streaming ? true : undefined),
      5_000,
    );
    return opened;
  }

  describe('with the default options', () => {
    before(() => start());
    after(() => stop());

    it("C.1 task submission: DATA → delivered on the consumer's stream → ACK RECEIVED, FULFILLED → both forwarded to the producer", async () => {
      const operator = await agent('operator');
      const worker = await agent('agent-b');
      const operatorInbox = await inbox(operator);
      const workerInbox = await inbox(worker);

      const task = operator.envelope({
        payload: { task_type: 'CreateTicket', title: 'Fix header overlap' },
        correlation_id: 'wf-1111',
      });
      assert.deepEqual(await operator.send(task, 'agent-b'), { accepted: true, reason: '' });

      const delivered = await workerInbox.message(task.message_id);
      assert.equal(delivered.msg.producer_id, 'operator');
      assert.equal(delivered.msg.correlation_id, 'wf-1111');
      assert.equal(delivered.msg.message_type, 'DATA');
      assert.deepEqual(wireJson(delivered.msg), { task_type: 'CreateTicket', title: 'Fix header overlap' });
      assert.ok(Number(delivered.seq) >= 1);

      assert.deepEqual(await worker.ack(task.message_id, 'RECEIVED'), { accepted: true, reason: '' });
      const received = await operatorInbox.ackFor(task.message_id, (a) => a.ack_stage === 'RECEIVED', 'ACK RECEIVED');
      assert.equal(received.ack_stage, 'RECEIVED');
      assert.deepEqual(await worker.ack(task.message_id, 'FULFILLED', { note: 'ticket 42 created' }), {
        accepted: true,
        reason: '',
      });
      const fulfilled = await operatorInbox.ackFor(
        task.message_id,
        (a) => a.ack_stage === 'FULFILLED',
        'ACK FULFILLED',
      );
      assert.equal(fulfilled.note, 'ticket 42 created');

      const acks = operatorInbox.items
        .filter((i) => i.msg.message_type === 'ACKNOWLEDGEMENT')
        .map((i) => [wireJson(i.msg).ack_stage, i.msg.producer_id]);
      assert.deepEqual(
        acks,
        [
          ['RECEIVED', 'agent-b'],
          ['FULFILLED', 'agent-b'],
        ],
        'in order, as the consumer sent them',
      );
      assert.equal(host.coordinator.router.message(task.message_id)?.state, 'FULFILLED');
      const changes = host.coordinator.log
        .query({ correlationId: 'wf-1111', eventType: 'message.state_changed' })
        .map((e) => [e.details.from, e.details.to]);
      assert.deepEqual(changes, [
        ['SENT', 'RECEIVED'],
        ['RECEIVED', 'FULFILLED'],
      ]);
    });

    it('never sees a sw4rm-to value padded with spaces: HTTP/2 drops the field, so the message has no recipient (NO_ROUTE)', async () => {
      const sender = await agent('sender-pad');
      await agent('target-pad');
      const padded = sender.envelope({ payload: { n: 1 } });
      const result = await sender.send(padded, ' target-pad');
      assert.equal(result.accepted, false);
      assert.match(
        result.reason,
        /^NO_ROUTE: no recipient/,
        'the field did not arrive at all (the router would trim a value it saw)',
      );
      assert.deepEqual(await sender.send(sender.envelope({ payload: { n: 2 } }), 'target-pad'), {
        accepted: true,
        reason: '',
      });
    });

    it('keeps a message for an agent that is not streaming and delivers it when it streams', async () => {
      const sender = await agent('sender-w');
      const sleeper = await agent('sleeper-w');
      const m = sender.envelope({ payload: { wake: 'up' } });
      assert.deepEqual(await sender.send(m, 'sleeper-w'), { accepted: true, reason: '' });
      assert.equal(host.coordinator.router.inboxStats('sleeper-w').queued, 1);

      const sleeperInbox = await inbox(sleeper);
      const item = await sleeperInbox.message(m.message_id);
      assert.deepEqual(wireJson(item.msg), { wake: 'up' });
    });

    it('resumes with sw4rm-resume-after: what was processed is not sent again; a newer stream ends the older with ABORTED', async () => {
      const sender = await agent('sender-r');
      const reader = await agent('reader-r');
      const first = await inbox(reader);
      const m1 = sender.envelope();
      const m2 = sender.envelope();
      await sender.send(m1, 'reader-r');
      await sender.send(m2, 'reader-r');
      const seq1 = (await first.message(m1.message_id)).seq;
      await first.message(m2.message_id);

      const resumed = reader.openInbox(seq1);
      inboxes.push(resumed);
      const status = await first.ended();
      assert.equal(status.code, grpc.status.ABORTED, status.details);
      assert.match(status.details, /a newer stream for reader-r replaced this one/);
      const again = await resumed.message(m2.message_id);
      assert.ok(Number(again.seq) > Number(seq1), 'redelivered under a new seq');
      assert.ok(
        !resumed.items.some((i) => i.msg.message_id === m1.message_id),
        'm1 (up to the resume seq) is not sent again',
      );

      const beyond = reader.openInbox('999999');
      inboxes.push(beyond);
      const refused = await beyond.ended();
      assert.equal(refused.code, grpc.status.OUT_OF_RANGE, refused.details);
      assert.match(refused.details, /sw4rm-resume-after 999999 is beyond the last delivered seq/);

      const malformed = reader.openInbox('last');
      inboxes.push(malformed);
      assert.equal((await malformed.ended()).code, grpc.status.INVALID_ARGUMENT);
    });

    it('confirms deliveries with AckDelivery: recorded, not sent again on the next stream; unknown seq → recorded false', async () => {
      const sender = await agent('sender-a');
      const reader = await agent('reader-a');
      const first = await inbox(reader);
      const confirmed = sender.envelope();
      const unconfirmed = sender.envelope();
      await sender.send(confirmed, 'reader-a');
      await sender.send(unconfirmed, 'reader-a');
      const item = await first.message(confirmed.message_id);
      await first.message(unconfirmed.message_id);

      assert.deepEqual(await reader.ackDelivery(item.seq, confirmed.message_id), { recorded: true });
      assert.deepEqual(await reader.ackDelivery('999999', ''), { recorded: false });
      assert.deepEqual(
        await reader.ackDelivery(item.seq, unconfirmed.message_id),
        { recorded: false },
        'seq and message_id must match',
      );
      assert.equal(host.coordinator.router.message(confirmed.message_id)?.delivery, 'done');

      const second = await inbox(reader);
      await second.message(unconfirmed.message_id);
      assert.ok(
        !second.items.some((i) => i.msg.message_id === confirmed.message_id),
        'a confirmed delivery is not repeated',
      );
    });

    it('fails a message at once on AckDelivery PERMANENT_FAILURE and tells the producer', async () => {
      const sender = await agent('sender-p');
      const reader = await agent('reader-p');
      const senderInbox = await inbox(sender);
      const readerInbox = await inbox(reader);
      const m = sender.envelope();
      await sender.send(m, 'reader-p');
      const item = await readerInbox.message(m.message_id);
      assert.deepEqual(await reader.ackDelivery(item.seq, m.message_id, 'DELIVERY_ACK_OUTCOME_PERMANENT_FAILURE'), {
        recorded: true,
      });
      const nack = await senderInbox.ackFor(m.message_id, (a) => a.ack_stage === 'FAILED', 'a NACK FAILED');
      assert.equal(nack.ack_stage, 'FAILED');
      assert.equal(host.coordinator.router.message(m.message_id)?.state, 'FAILED');
      assert.ok(
        host.coordinator.router.deadLetters({ producerId: 'sender-p' }).some((l) => l.messageId === m.message_id),
      );
    });
  });

  describe('C.2 timeout, retry, late ACK, idempotent reconcile (ackTimeoutMs 300)', () => {
    before(() => start({ ackTimeoutMs: 300 }));
    after(() => stop());

    it('NACK ACK_TIMEOUT → retry with the same token is delivered → late ACKs for m1 → a further retry gets DUPLICATE_DETECTED (original m1, FULFILLED)', async () => {
      const a = await agent('agent-a');
      const b = await agent('agent-b2');
      const aInbox = await inbox(a);
      const bInbox = await inbox(b);

      const m1 = a.envelope({
        idempotency_token: 'agent-a:create:abc',
        correlation_id: 'wf-2222',
        payload: { op: 'create', user: 'alice' },
      });
      assert.deepEqual(await a.send(m1, 'agent-b2'), { accepted: true, reason: '' });
      await bInbox.message(m1.message_id);
      // B stays silent: the coordinator times m1 out and NACKs the producer.
      const nack = await aInbox.ackFor(
        m1.message_id,
        (x) => x.error_code === 'ACK_TIMEOUT',
        'a NACK ACK_TIMEOUT',
        5_000,
      );
      assert.equal(nack.ack_stage, 'TIMED_OUT');
      assert.equal(host.coordinator.router.message(m1.message_id)?.state, 'TIMED_OUT');

      const m2 = a.envelope({
        idempotency_token: 'agent-a:create:abc',
        retry_count: 1,
        correlation_id: 'wf-2222',
        payload: { op: 'create', user: 'alice' },
      });
      assert.deepEqual(await a.send(m2, 'agent-b2'), { accepted: true, reason: '' });
      const retried = await bInbox.message(m2.message_id);
      assert.equal(retried.msg.retry_count, 1);
      assert.equal(retried.msg.idempotency_token, 'agent-a:create:abc');

      assert.deepEqual(
        await b.ack(m1.message_id, 'RECEIVED'),
        { accepted: true, reason: '' },
        'the late ACK for m1 is accepted',
      );
      assert.deepEqual(await b.ack(m1.message_id, 'FULFILLED', { note: 'alice created' }), {
        accepted: true,
        reason: '',
      });
      await aInbox.ackFor(m1.message_id, (x) => x.ack_stage === 'FULFILLED', 'the forwarded late ACK FULFILLED');

      const m3 = a.envelope({ idempotency_token: 'agent-a:create:abc', retry_count: 2, correlation_id: 'wf-2222' });
      const answer = await a.send(m3, 'agent-b2');
      assert.equal(answer.accepted, false);
      assert.ok(answer.reason.startsWith('DUPLICATE_DETECTED: '), answer.reason);
      const detail = JSON.parse(answer.reason.slice('DUPLICATE_DETECTED: '.length)) as Record<string, unknown>;
      assert.equal(detail.original_message_id, m1.message_id);
      assert.equal(detail.original_status, 'FULFILLED');
      assert.match(String(detail.cached_at), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.equal((detail.cached_result as Record<string, unknown>).note, 'alice created');

      const onStream = await aInbox.ackFor(
        m3.message_id,
        (x) => x.status === 'DUPLICATE_DETECTED',
        'DUPLICATE_DETECTED',
      );
      assert.equal(onStream.original_message_id, m1.message_id);
      assert.equal(onStream.original_status, 'FULFILLED');
      const late = host.coordinator.log.query({ correlationId: 'wf-2222' }).map((e) => e.eventType);
      assert.ok(
        late.some((t) => t.startsWith('message.late_ack')),
        `the late ACK is logged: ${late.join(', ')}`,
      );
    });
  });

  describe('C.3 buffer overflow rejection (capacity 1)', () => {
    before(() => start({ capacity: 1 }));
    after(() => stop());

    it("forwards the consumer's ACK REJECTED buffer_full to the producer", async () => {
      const a = await agent('agent-a3');
      const b = await agent('agent-b3');
      const aInbox = await inbox(a);
      const bInbox = await inbox(b);
      const mx = a.envelope({ correlation_id: 'wf-3333' });
      assert.deepEqual(await a.send(mx, 'agent-b3'), { accepted: true, reason: '' });
      await bInbox.message(mx.message_id);
      assert.deepEqual(
        await b.ack(mx.message_id, 'REJECTED', { error_code: 'buffer_full', note: 'Inbound buffer capacity exceeded' }),
        { accepted: true, reason: '' },
      );
      const rejected = await aInbox.ackFor(mx.message_id, (x) => x.ack_stage === 'REJECTED', 'ACK REJECTED');
      assert.equal(rejected.error_code, 'buffer_full');
      const record = host.coordinator.router.message(mx.message_id);
      assert.equal(record?.state, 'REJECTED');
      assert.equal(record?.errorCode, 'BUFFER_FULL');
      assert.equal(
        host.coordinator.router.deadLetters({ producerId: 'agent-a3' }).length,
        0,
        'buffer_full is retryable: no dead letter',
      );
    });

    it("refuses the message over capacity itself with BUFFER_FULL and a NACK on the producer's stream; nothing is dropped", async () => {
      const a = await agent('agent-a4');
      const b = await agent('agent-b4');
      const aInbox = await inbox(a);
      const first = a.envelope();
      assert.deepEqual(await a.send(first, 'agent-b4'), { accepted: true, reason: '' });
      const second = a.envelope();
      const refused = await a.send(second, 'agent-b4');
      assert.equal(refused.accepted, false);
      assert.match(refused.reason, /^BUFFER_FULL: the inbox of agent-b4 holds 1 messages not yet READ \(capacity 1\)/);
      const nack = await aInbox.ackFor(second.message_id, (x) => x.error_code === 'BUFFER_FULL', 'a NACK BUFFER_FULL');
      assert.equal(nack.ack_stage, 'REJECTED');

      const bInbox = await inbox(b);
      await bInbox.message(first.message_id);
      assert.deepEqual(await b.ack(first.message_id, 'READ'), { accepted: true, reason: '' });
      const retry = a.envelope();
      assert.deepEqual(await a.send(retry, 'agent-b4'), { accepted: true, reason: '' }, 'READ frees the slot');
      await bInbox.message(retry.message_id);
    });
  });
});
