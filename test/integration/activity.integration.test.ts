import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { bearer, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ArtifactMessage {
  negotiation_id: string;
  kind: string;
  version: string;
  content_type: string;
  content: Buffer;
  created_at: string;
}
type Client = ServiceClient;

/** sw4rm.activity.ActivityService over real gRPC with the canonical protos: artifacts appended, refused, listed, kept across a restart. */
describe('ActivityService over real gRPC (AppendArtifact, ListArtifacts)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let client: Client;

  const connect = (): Client => serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.activity.ActivityService');
  const metadata = (): grpc.Metadata => bearer(host.token);

  const artifact = (more: Partial<ArtifactMessage> = {}): Partial<ArtifactMessage> => ({
    negotiation_id: 'neg-1',
    kind: 'contract',
    version: 'v1',
    content_type: 'application/json',
    content: Buffer.from('{"terms":1}'),
    ...more,
  });

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-activity-');
    host = await startHost(dataDir);
    client = connect();
  });

  afterEach(async () => {
    client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it('appends artifacts and lists them in order, by kind, after a restart too', async () => {
    assert.deepEqual(await unary(client, 'AppendArtifact', { artifact: artifact() }, metadata()), {
      ok: true,
      reason: '',
    });
    assert.deepEqual(
      await unary(
        client,
        'AppendArtifact',
        {
          artifact: artifact({
            kind: 'diff',
            version: 'v2',
            content_type: 'text/x-diff',
            content: Buffer.from([0, 1, 2, 255]),
            created_at: '2026-03-04T05:06:07.000Z',
          }),
        },
        metadata(),
      ),
      { ok: true, reason: '' },
    );
    assert.deepEqual(
      await unary(client, 'AppendArtifact', { artifact: artifact({ negotiation_id: 'neg-2' }) }, metadata()),
      { ok: true, reason: '' },
    );

    client.close();
    await stopHost(host);
    host = await startHost(dataDir);
    client = connect();

    const { items } = await unary<{ items: ArtifactMessage[] }>(
      client,
      'ListArtifacts',
      { negotiation_id: 'neg-1', kind: '' },
      metadata(),
    );
    assert.deepEqual(
      items.map((a) => [a.kind, a.version, a.content_type, [...a.content]]),
      [
        ['contract', 'v1', 'application/json', [...Buffer.from('{"terms":1}')]],
        ['diff', 'v2', 'text/x-diff', [0, 1, 2, 255]],
      ],
    );
    assert.match(
      items[0].created_at,
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/,
      'created_at defaults to when it was appended',
    );
    assert.equal(items[1].created_at, '2026-03-04T05:06:07.000Z');
    const diffs = await unary<{ items: ArtifactMessage[] }>(
      client,
      'ListArtifacts',
      { negotiation_id: 'neg-1', kind: 'diff' },
      metadata(),
    );
    assert.deepEqual(
      diffs.items.map((a) => a.kind),
      ['diff'],
    );
    assert.equal(host.coordinator.log.query({ eventType: 'activity.artifact_appended' }).length, 3);
  });

  it('answers ok=false with the reason for an artifact it refuses, and stores nothing', async () => {
    const refused: Array<[Partial<ArtifactMessage> | null, RegExp]> = [
      [null, /artifact is required/],
      [artifact({ negotiation_id: '' }), /negotiation_id is required/],
      [artifact({ kind: 'poem' }), /kind must be one of contract, diff, decision, score, note/],
      [artifact({ content: Buffer.alloc(1024 * 1024 + 1) }), /content is larger than 1048576 bytes/],
      [artifact({ created_at: 'soon' }), /created_at is not an ISO-8601/],
    ];
    for (const [given, reason] of refused) {
      const answer = await unary<{ ok: boolean; reason: string }>(
        client,
        'AppendArtifact',
        given ? { artifact: given } : {},
        metadata(),
      );
      assert.equal(answer.ok, false);
      assert.match(answer.reason, reason);
    }
    const { items } = await unary<{ items: ArtifactMessage[] }>(
      client,
      'ListArtifacts',
      { negotiation_id: 'neg-1' },
      metadata(),
    );
    assert.deepEqual(items, []);
  });

  it('refuses a ListArtifacts without a negotiation or with an unknown kind (INVALID_ARGUMENT), and an unauthenticated call', async () => {
    await expectStatus(
      unary(client, 'ListArtifacts', { negotiation_id: '' }, metadata()),
      grpc.status.INVALID_ARGUMENT,
    );
    const bad = await expectStatus(
      unary(client, 'ListArtifacts', { negotiation_id: 'neg-1', kind: 'poem' }, metadata()),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(bad.details, /^VALIDATION_ERROR: kind must be empty or one of/);
    await expectStatus(
      unary(client, 'AppendArtifact', { artifact: artifact() }, new grpc.Metadata()),
      grpc.status.UNAUTHENTICATED,
    );
  });

  it('a negotiation too big for one ListArtifacts answer: RESOURCE_EXHAUSTED saying to list one kind at a time, which works', async () => {
    const big = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.activity.ActivityService', {
      'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1,
    });
    try {
      const mib = Buffer.alloc(1024 * 1024, 7);
      for (const kind of ['diff', 'contract']) {
        for (let i = 0; i < 8; i++) {
          assert.deepEqual(
            await unary(
              big,
              'AppendArtifact',
              { artifact: artifact({ negotiation_id: 'big', kind, content: mib }) },
              metadata(),
            ),
            { ok: true, reason: '' },
          );
        }
      }
      const all = await expectStatus(
        unary(big, 'ListArtifacts', { negotiation_id: 'big', kind: '' }, metadata()),
        grpc.status.RESOURCE_EXHAUSTED,
      );
      assert.match(all.details, /^BUFFER_FULL: the 16 artifacts hold 16777216 bytes.*list them one kind at a time/);
      const diffs = await unary<{ items: ArtifactMessage[] }>(
        big,
        'ListArtifacts',
        { negotiation_id: 'big', kind: 'diff' },
        metadata(),
      );
      assert.equal(diffs.items.length, 8);
      assert.ok(diffs.items.every((a) => a.kind === 'diff' && a.content.length === mib.length));
    } finally {
      big.close();
    }
  });

  it('only the participants of a negotiation and the operator append or list its artifacts; others get PERMISSION_DENIED (logged)', async () => {
    const ctx = { correlationId: 'test' };
    for (const id of ['alice', 'bob', 'mallory'])
      assert.equal(host.coordinator.registry.register(validDescriptor(id), ctx).accepted, true);
    host.coordinator.negotiations.open(
      {
        negotiationId: 'deal',
        correlationId: '',
        topic: 'price',
        participants: ['alice', 'bob'],
        intensity: '',
        debateTimeoutMs: 0,
        profileHint: '',
        preferences: {},
        schema: '',
      },
      { kind: 'operator', label: 'operator' },
      ctx,
    );
    await host.coordinator.store.whenDurable();
    const tokenOf = (id: string) => host.coordinator.credentials.mintAgent(id, 'test', `agent ${id}`, ctx).token;
    const alice = bearer(tokenOf('alice'));
    const mallory = bearer(tokenOf('mallory'));

    assert.deepEqual(await unary(client, 'AppendArtifact', { artifact: artifact({ negotiation_id: 'deal' }) }, alice), {
      ok: true,
      reason: '',
    });
    assert.deepEqual(
      await unary(
        client,
        'AppendArtifact',
        { artifact: artifact({ negotiation_id: 'deal', kind: 'note' }) },
        metadata(),
      ),
      { ok: true, reason: '' },
    );
    const listed = await unary<{ items: ArtifactMessage[] }>(
      client,
      'ListArtifacts',
      { negotiation_id: 'deal', kind: '' },
      alice,
    );
    assert.deepEqual(
      listed.items.map((a) => a.kind),
      ['contract', 'note'],
    );

    // Not a participant: refused for a known negotiation and for an unknown one alike (the answer does not tell which).
    for (const negotiationId of ['deal', 'no-such-deal']) {
      const append = await expectStatus(
        unary(client, 'AppendArtifact', { artifact: artifact({ negotiation_id: negotiationId }) }, mallory),
        grpc.status.PERMISSION_DENIED,
      );
      assert.match(
        append.details,
        /^PERMISSION_DENIED: agent:mallory may not append artifacts to negotiation .*only its participants and the operator may/,
      );
      const list = await expectStatus(
        unary(client, 'ListArtifacts', { negotiation_id: negotiationId, kind: '' }, mallory),
        grpc.status.PERMISSION_DENIED,
      );
      assert.match(list.details, /^PERMISSION_DENIED: agent:mallory may not list the artifacts of negotiation /);
      await expectStatus(
        unary(client, 'ListArtifacts', { negotiation_id: negotiationId, kind: 'contract' }, mallory),
        grpc.status.PERMISSION_DENIED,
      );
    }
    const all = await unary<{ items: ArtifactMessage[] }>(
      client,
      'ListArtifacts',
      { negotiation_id: 'deal', kind: '' },
      metadata(),
    );
    assert.deepEqual(
      all.items.map((a) => a.kind),
      ['contract', 'note'],
      'nothing stored for mallory',
    );
    const refusals = host.coordinator.log.query({ eventType: 'activity.artifact_refused' });
    assert.equal(refusals.length, 6);
    assert.ok(refusals.every((e) => (e.details as { code?: string }).code === 'PERMISSION_DENIED'));
  });
});
