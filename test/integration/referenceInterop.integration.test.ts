import { strict as assert } from 'node:assert';
import type { RouterOptions } from '../../src/core/router/router';
import type { CoordinatorHost } from '../../src/server/host';
import type { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { clientsFor, startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { WireAgent, wireJson, type WireInbox } from '../support/routerWire';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** common.proto Envelope.state as the stream carried it (enums by name). */
const stateOf = (msg: object): unknown => (msg as { state?: unknown }).state;

/**
 * What unmodified reference clients send, over real gRPC: numeric RegistrationType values (reference numbering),
 * sequence_number 1 on every envelope, envelopes with no recipient (fan-out opt-in), and the delivered
 * envelope's `state`.
 */
describe('Reference clients over gRPC', function () {
  this.timeout(20_000);

  let dataDir: string;
  let host: CoordinatorHost;
  let clients: CoordinatorClients;
  const closers: Array<{ close(): void }> = [];

  async function start(router: Partial<RouterOptions> = {}): Promise<void> {
    dataDir = makeTempDir('sw4rm-int-reference-');
    host = await startHost(dataDir, { router });
    clients = clientsFor(host);
  }

  async function stop(): Promise<void> {
    for (const closer of closers.splice(0)) closer.close();
    clients?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  }

  async function agent(agentId: string): Promise<{ client: WireAgent; inbox: WireInbox }> {
    const response = await clients.registerAgent(descriptorMessage(agentId));
    assert.equal(response.accepted, true, response.reason);
    const client = new WireAgent(`127.0.0.1:${host.port}`, host.token, agentId);
    const inbox = client.openInbox();
    closers.push(inbox, client);
    await pollUntil(
      `${agentId}'s stream`,
      () => (host.coordinator.router.inboxStats(agentId).streaming ? true : undefined),
      5_000,
    );
    return { client, inbox };
  }

  describe('with the default options', () => {
    beforeEach(() => start());
    afterEach(() => stop());

    it('reads registration_type 0, 1, 2 as the reference protos number them', async () => {
      for (const [id, wire, expected] of [
        ['zero', 0, 'STANDARD_AGENT'],
        ['one', 1, 'STANDARD_AGENT'],
        ['two', 2, 'SWARM_GATEWAY'],
      ] as const) {
        const response = await clients.registerAgent(descriptorMessage(id, { registration_type: wire }));
        assert.equal(response.accepted, true, `${id}: ${response.reason}`);
        assert.equal(
          host.coordinator.registry.get(id)?.descriptor.registrationType,
          expected,
          `registration_type ${wire}`,
        );
      }
      const refused = await clients.registerAgent(descriptorMessage('three', { registration_type: 3 }));
      assert.equal(refused.accepted, false);
      assert.match(refused.reason, /^VALIDATION_ERROR: registration_type '3'/);
    });

    it('accepts distinct messages that all carry sequence_number 1, and refuses a resend of one of them', async () => {
      const { client: sender } = await agent('sender');
      const { inbox: receiverInbox } = await agent('receiver');
      const first = { ...sender.envelope({ payload: { n: 1 } }), sequence_number: '1' };
      const second = { ...sender.envelope({ payload: { n: 2 } }), sequence_number: '1' };
      assert.deepEqual(await sender.send(first, 'receiver'), { accepted: true, reason: '' });
      assert.deepEqual(await sender.send(second, 'receiver'), { accepted: true, reason: '' });
      const delivered = await receiverInbox.message(second.message_id);
      assert.deepEqual(wireJson(delivered.msg), { n: 2 });
      assert.equal(stateOf(delivered.msg), 'ENVELOPE_STATE_SENT', 'the delivered envelope carries its state');
      const resend = { ...second, message_id: sender.envelope().message_id };
      const result = await sender.send(resend, 'receiver');
      assert.equal(result.accepted, false);
      assert.match(result.reason, /^ALREADY_IN_PROGRESS: /);
      assert.equal(host.coordinator.log.query({ eventType: 'dedup.sequence_reused' }).length, 1);
    });

    it('refuses an unaddressed message NO_ROUTE (RFC §12)', async () => {
      const { client: sender } = await agent('sender');
      await agent('receiver');
      const result = await sender.send(sender.envelope({ payload: { n: 1 } }));
      assert.match(result.reason, /^NO_ROUTE: no recipient/);
    });
  });

  describe("with unaddressed: 'fanout'", () => {
    beforeEach(() => start({ unaddressed: 'fanout' }));
    afterEach(() => stop());

    it('delivers an unaddressed envelope to every other agent as its own copy; ACKs come back naming the original', async () => {
      const { client: sender, inbox: senderInbox } = await agent('sender');
      const { client: alpha, inbox: alphaInbox } = await agent('alpha');
      const { client: beta, inbox: betaInbox } = await agent('beta');
      const msg = sender.envelope({ payload: { hello: 'all' } });
      assert.deepEqual(await sender.send(msg), { accepted: true, reason: '' });

      const fromSender = (item: { msg: { producer_id: string; message_type: string } }) =>
        item.msg.producer_id === 'sender' && item.msg.message_type === 'DATA';
      const copyA = await alphaInbox.waitFor('the copy for alpha', fromSender);
      const copyB = await betaInbox.waitFor('the copy for beta', fromSender);
      assert.notEqual(copyA.msg.message_id, copyB.msg.message_id);
      assert.notEqual(copyA.msg.message_id, msg.message_id);
      assert.deepEqual(wireJson(copyA.msg), { hello: 'all' });
      assert.equal(stateOf(copyA.msg), 'ENVELOPE_STATE_SENT');
      assert.equal(senderInbox.items.filter(fromSender).length, 0);

      assert.deepEqual(await alpha.ack(copyA.msg.message_id, 'RECEIVED'), { accepted: true, reason: '' });
      assert.deepEqual(await beta.ack(copyB.msg.message_id, 'FULFILLED'), { accepted: true, reason: '' });
      const fromAlpha = await senderInbox.ackFor(
        msg.message_id,
        (a) => a.recipient_id === 'alpha',
        'the ACK from alpha',
      );
      const fromBeta = await senderInbox.ackFor(msg.message_id, (a) => a.recipient_id === 'beta', 'the ACK from beta');
      assert.equal(fromAlpha.ack_stage, 'RECEIVED');
      assert.equal(fromAlpha.copy_message_id, copyA.msg.message_id);
      assert.equal(fromBeta.ack_stage, 'FULFILLED');
      assert.equal(host.coordinator.router.message(copyA.msg.message_id)?.state, 'RECEIVED');
      assert.equal(host.coordinator.router.message(copyB.msg.message_id)?.state, 'FULFILLED');
    });
  });
});
