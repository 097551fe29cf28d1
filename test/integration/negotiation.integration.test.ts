import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { Disposable } from '../../src/core/events';
import type { CoordinatorHost } from '../../src/server/host';
import { ServiceCaller } from '../support/clients';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { wireJson, type WireItem } from '../support/routerWire';
import { TaskTestAgent } from '../support/taskAgents';
import { makeTempDir, removeTempDir } from '../support/tempDir';

type Method = 'Open' | 'Propose' | 'Counter' | 'Evaluate' | 'Decide' | 'Abort';

/** NegotiationService over a real grpc-js channel: one bearer token, optional call metadata. */
class NegotiationClient extends ServiceCaller<Method> {
  constructor(address: string, token: string) {
    super(address, token, 'sw4rm.negotiation.NegotiationService');
  }
}

async function rejects(promise: Promise<unknown>, code: grpc.status, details: RegExp): Promise<string> {
  try {
    await promise;
  } catch (err) {
    const e = err as grpc.ServiceError;
    assert.equal(e.code, code, e.details);
    assert.match(e.details, details);
    return e.details;
  }
  assert.fail('expected a refusal');
}

/**
 * NegotiationService end to end (README "Debates"): a real server on port 0, three real agents registered and streaming
 * their inboxes, each speaking with its own agent credential; every §17.1 event read off the wire.
 */
describe('NegotiationService over gRPC (debates, RFC §17)', function () {
  this.timeout(30_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let operatorSeat: Disposable;
  const agents = new Map<string, TaskTestAgent>();
  const clients = new Map<string, NegotiationClient>();
  let operator: NegotiationClient;

  const address = () => `127.0.0.1:${host.port}`;
  const as = (agentId: string) => clients.get(agentId)!;
  const acked = new Set<string>();

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-negotiation-');
    host = await startHost(dataDir);
    operatorSeat = host.coordinator.hitl.attachOperator('editor:test');
    operator = new NegotiationClient(address(), host.token!);
    for (const id of ['alice', 'bob', 'carol', 'mallory']) {
      const agent = new TaskTestAgent(address(), host.token, id, 'negotiator');
      agents.set(id, agent);
      await agent.start();
      const token = host.coordinator.credentials.mintAgent(id, 'test', `agent ${id}`, { correlationId: 'test' }).token;
      clients.set(id, new NegotiationClient(address(), token));
    }
  });

  afterEach(async () => {
    for (const a of agents.values()) a.close();
    agents.clear();
    for (const c of clients.values()) c.close();
    clients.clear();
    operator?.close();
    operatorSeat?.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  /** The NEGOTIATION items `agentId` received, once `count` are there; each delivery is confirmed. */
  async function events(agentId: string, count: number): Promise<WireItem[]> {
    const agent = agents.get(agentId)!;
    const negotiation = () => agent.inbox.items.filter((i) => i.msg.message_type === 'NEGOTIATION');
    await pollUntil(
      `${count} NEGOTIATION events at ${agentId} (has ${negotiation().length})`,
      () => (negotiation().length >= count ? true : undefined),
      5_000,
    );
    const items = negotiation();
    for (const item of items) {
      if (acked.has(item.msg.message_id)) continue;
      acked.add(item.msg.message_id);
      // As an agent should: confirm the delivery, then ACK the event READ (an inbox holds `capacity` messages not READ).
      await agent.wire.ackDelivery(item.seq, item.msg.message_id);
      await agent.ackMessage(item.msg.message_id, 'READ');
    }
    return items;
  }

  it('Open → policy → Propose → Counter → Evaluate → Decide: every event at every participant, in order, correlation_id and bytes preserved', async () => {
    const schema = JSON.stringify({
      type: 'object',
      properties: { price: { type: 'number' }, note: { type: 'string' } },
      required: ['price'],
    });
    await operator.call(
      'Open',
      {
        negotiation_id: 'deal-1',
        correlation_id: 'deal-1',
        topic: 'price of the API migration',
        participants: ['alice', 'bob', 'carol'],
        intensity: 'MEDIUM',
        debate_timeout: { seconds: 600, nanos: 0 },
      },
      {
        'sw4rm-proposal-schema': schema,
        'sw4rm-negotiation-preferences': JSON.stringify({ alice: { max_rounds: 2 } }),
      },
    );
    // Byte-exact: odd spacing and non-ASCII text survive as sent.
    const v1 = Buffer.from('{"price": 100,  "note": "first offer \u2014 \u00e9t\u00e9"}', 'utf8');
    const v2 = Buffer.from('{ "price": 90, "note": "counter" }\n', 'utf8');
    await as('alice').call('Propose', {
      negotiation_id: 'deal-1',
      from_agent: 'alice',
      content_type: 'application/json',
      payload: v1,
    });
    await as('bob').call('Counter', {
      negotiation_id: 'deal-1',
      from_agent: 'bob',
      content_type: 'application/json',
      payload: v2,
    });
    await as('carol').call('Evaluate', {
      negotiation_id: 'deal-1',
      from_agent: 'carol',
      confidence_score: 0.9,
      notes: 'fine by me',
    });
    // A participant decides by consensus only on a round every other participant accepted: not on bytes nobody proposed.
    await rejects(
      as('bob').call('Decide', {
        negotiation_id: 'deal-1',
        decided_by: 'consensus',
        content_type: 'application/json',
        result: Buffer.from('{"price": 95}'),
      }),
      grpc.status.FAILED_PRECONDITION,
      /^FAILED_PRECONDITION: .*equals no round/,
    );
    await rejects(
      as('bob').call('Decide', {
        negotiation_id: 'deal-1',
        decided_by: 'policy',
        content_type: 'application/json',
        result: v2,
      }),
      grpc.status.PERMISSION_DENIED,
      /^PERMISSION_DENIED: /,
    );
    // Carol accepted bob's round 2; alice's Decide is her own acceptance.
    const result = v2;
    await as('alice').call('Decide', {
      negotiation_id: 'deal-1',
      decided_by: 'consensus',
      content_type: 'application/json',
      result,
    });

    const seen: string[][] = [];
    for (const id of ['alice', 'bob', 'carol']) {
      const items = await events(id, 6);
      const json = items.map((i) => wireJson<Record<string, unknown>>(i.msg));
      seen.push(json.map((j) => String(j.kind)));
      assert.deepEqual(
        json.map((j) => j.kind),
        ['open', 'policy', 'propose', 'counter', 'evaluate', 'decide'],
        `${id}'s events in order`,
      );
      assert.deepEqual(
        json.map((j) => j.seq),
        [1, 2, 3, 4, 5, 6],
      );
      for (const item of items) {
        assert.equal(item.msg.correlation_id, 'deal-1');
        assert.equal(item.msg.producer_id, 'coordinator');
        assert.equal(item.msg.content_type, 'application/json');
      }
      assert.deepEqual([json[0].topic, json[0].corr], ['price of the API migration', 'deal-1']);
      assert.equal(json[1].negotiation_id, 'deal-1');
      assert.equal(json[1].profile, 'MEDIUM');
      assert.equal(
        (json[1].policy as Record<string, unknown>).max_rounds,
        2,
        "alice's preference, clamped, is in the broadcast policy",
      );
      assert.deepEqual([json[2].from, json[2].ct], ['alice', 'application/json']);
      assert.ok(
        Buffer.from(String(json[2].payload_b64), 'base64').equals(v1),
        'propose payload_b64 decodes to the bytes sent',
      );
      assert.ok(
        Buffer.from(String(json[3].payload_b64), 'base64').equals(v2),
        'counter payload_b64 decodes to the bytes sent',
      );
      assert.deepEqual([json[4].from, json[4].score, json[4].notes], ['carol', 0.9, 'fine by me']);
      assert.deepEqual([json[5].by, json[5].ct, json[5].round], ['consensus', 'application/json', 2]);
      assert.ok(Buffer.from(String(json[5].result_b64), 'base64').equals(result));
      for (const j of json) assert.match(String(j.ts), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    assert.equal(new Set(seen.map((s) => s.join())).size, 1, 'all participants saw the same order');
    assert.equal((await events('mallory', 0)).length, 0, 'a non-participant hears nothing');
    await rejects(
      as('alice').call('Counter', {
        negotiation_id: 'deal-1',
        from_agent: 'alice',
        content_type: 'application/json',
        payload: v1,
      }),
      grpc.status.FAILED_PRECONDITION,
      /^NEGOTIATION_CLOSED: /,
    );
  });

  it('a burst of concurrent calls: every participant gets the same events in the same order (seq 1…n, no gap)', async () => {
    await operator.call('Open', {
      negotiation_id: 'burst',
      topic: 'many rounds',
      participants: ['alice', 'bob', 'carol'],
      intensity: 'HIGHEST',
    });
    await as('alice').call('Propose', {
      negotiation_id: 'burst',
      from_agent: 'alice',
      content_type: 'text/plain',
      payload: Buffer.from('offer 0'),
    });
    // Seven counters in flight at once from three clients: the coordinator serialises them; the order it chose is the order everyone sees.
    const authors = ['bob', 'carol', 'alice', 'bob', 'carol', 'alice', 'bob'];
    await Promise.all(
      authors.map((who, i) =>
        as(who).call('Counter', {
          negotiation_id: 'burst',
          from_agent: who,
          content_type: 'text/plain',
          payload: Buffer.from(`offer ${i + 1} by ${who}`),
        }),
      ),
    );
    const total = 2 + 1 + authors.length;
    const orders: string[] = [];
    for (const id of ['alice', 'bob', 'carol']) {
      const json = (await events(id, total)).map((i) => wireJson<Record<string, unknown>>(i.msg));
      assert.deepEqual(
        json.map((j) => j.seq),
        Array.from({ length: total }, (_, k) => k + 1),
        `${id}: seq in order, none missing`,
      );
      orders.push(
        json.map((j) => `${String(j.kind)}:${j.from ?? ''}:${j.round ?? ''}:${j.payload_b64 ?? ''}`).join('|'),
      );
    }
    assert.equal(new Set(orders).size, 1, 'the three participants saw the identical sequence');
    const rounds = host.coordinator.negotiations.detail('burst')!.rounds;
    assert.equal(rounds.length, 8);
    assert.deepEqual(
      rounds.map((r) => r.n),
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
  });

  it('refuses a non-participant, a credential lying about from_agent, and an invalid draft (which uses no round)', async () => {
    await as('alice').call(
      'Open',
      { negotiation_id: 'deal-2', topic: 'schedule', participants: ['alice', 'bob'], intensity: 'LOW' },
      {
        'sw4rm-proposal-schema': JSON.stringify({
          type: 'object',
          required: ['date'],
          properties: { date: { type: 'string' } },
        }),
      },
    );
    await rejects(
      as('mallory').call('Propose', {
        negotiation_id: 'deal-2',
        from_agent: 'mallory',
        content_type: 'application/json',
        payload: Buffer.from('{"date":"x"}'),
      }),
      grpc.status.PERMISSION_DENIED,
      /^PERMISSION_DENIED: /,
    );
    await rejects(
      as('alice').call('Propose', {
        negotiation_id: 'deal-2',
        from_agent: 'bob',
        content_type: 'application/json',
        payload: Buffer.from('{"date":"x"}'),
      }),
      grpc.status.PERMISSION_DENIED,
      /^PERMISSION_DENIED: /,
    );
    await rejects(
      as('mallory').call('Open', { negotiation_id: 'deal-3', topic: 't', participants: ['alice', 'bob'] }),
      grpc.status.PERMISSION_DENIED,
      /takes no part/,
    );
    const details = await rejects(
      as('alice').call('Propose', {
        negotiation_id: 'deal-2',
        from_agent: 'alice',
        content_type: 'application/json',
        payload: Buffer.from('{"date": 5}'),
      }),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: .*\/date/,
    );
    assert.match(details, /no round was used/);
    assert.equal(host.coordinator.negotiations.get('deal-2')?.rounds, 0);
    await as('alice').call('Propose', {
      negotiation_id: 'deal-2',
      from_agent: 'alice',
      content_type: 'application/json',
      payload: Buffer.from('{"date": "2026-12-01"}'),
    });
    assert.equal(host.coordinator.negotiations.detail('deal-2')?.rounds[0].n, 1, 'the next valid draft is round 1');
    const items = await events('bob', 3);
    assert.deepEqual(
      items.map((i) => wireJson<{ kind: string }>(i.msg).kind),
      ['open', 'policy', 'propose'],
    );

    await as('bob').call('Abort', { negotiation_id: 'deal-2', reason: 'calendar full' });
    for (const id of ['alice', 'bob']) {
      const abort = wireJson<Record<string, unknown>>((await events(id, 4))[3].msg);
      assert.deepEqual([abort.kind, abort.reason], ['abort', 'calendar full']);
    }
    await rejects(
      as('mallory').call('Abort', { negotiation_id: 'deal-2', reason: 'x' }),
      grpc.status.FAILED_PRECONDITION,
      /NEGOTIATION_CLOSED/,
    );
    await rejects(
      operator.call('Open', {
        negotiation_id: 'deal-4',
        correlation_id: 'other',
        topic: 't',
        participants: ['alice', 'bob'],
      }),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: correlation_id/,
    );
  });

  it("Open refuses bad sw4rm-negotiation-preferences as preferences.<agent>.<field>, and preferences not the opener's to state", async () => {
    const open = (client: NegotiationClient, preferences: string) =>
      client.call(
        'Open',
        { negotiation_id: 'deal-p', topic: 't', participants: ['alice', 'bob'] },
        { 'sw4rm-negotiation-preferences': preferences },
      );
    await rejects(
      open(operator, '{"alice": {"max_rounds": -1}}'),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: preferences\.alice\.max_rounds: must be a non-negative number \(0 = no preference\), not -1$/,
    );
    await rejects(
      open(operator, '{"alice": 5}'),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: preferences\.alice: must be an AgentPreferences object$/,
    );
    await rejects(
      open(operator, 'not json'),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: preferences: sw4rm-negotiation-preferences is not valid JSON/,
    );
    await rejects(
      open(operator, '{"carol": {"max_rounds": 2}}'),
      grpc.status.INVALID_ARGUMENT,
      /^VALIDATION_ERROR: preferences\.carol: 'carol' is not a participant/,
    );
    await rejects(
      open(as('alice'), '{"alice": {"max_rounds": 2}, "bob": {"max_rounds": 1}}'),
      grpc.status.PERMISSION_DENIED,
      /^PERMISSION_DENIED: preferences\.bob: agent:alice may not state preferences for bob$/,
    );
    assert.equal(host.coordinator.negotiations.get('deal-p'), undefined);
    await open(as('alice'), '{"alice": {"max_rounds": 2}}');
    assert.deepEqual(Object.keys(host.coordinator.negotiations.get('deal-p')!.effective.applied), ['alice']);
  });
});
