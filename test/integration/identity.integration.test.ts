import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENROLMENT_FILE_NAME } from '../../src/core/auth/enrolment';
import type { CoordinatorHost } from '../../src/server/host';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { PROTOS_DIR } from '../support/paths';
import { loadCredentialsDefinition } from '../../src/server/services/credentialsService';
import { bearer } from '../support/clients';
import { callPath, canonicalMethods, rawGrpcCall, type CallOutcome } from '../support/identityClient';
import { pollUntil } from '../support/poll';
import { envelope, ROUTER_PATHS } from '../support/routerClient';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const methods = canonicalMethods();
const REGISTER = '/sw4rm.registry.RegistryService/RegisterAgent';
const HEARTBEAT = '/sw4rm.registry.RegistryService/Heartbeat';
const DEREGISTER = '/sw4rm.registry.RegistryService/DeregisterAgent';
const ctx = { correlationId: 'identity-test' };

describe('agent identity bound to credentials (README, "Security model")', () => {
  let dataDir: string;
  let host: CoordinatorHost;
  let client: grpc.Client;
  let tokenA: string;
  let tokenB: string;

  const call = (
    rpc: string,
    request: object,
    token: string | undefined,
    extra: Record<string, string> = {},
    openMs?: number,
  ): Promise<CallOutcome> => callPath(client, methods.get(rpc)!, request, bearer(token, extra), openMs);
  const register = (id: string, token: string | undefined) => call(REGISTER, { agent: descriptorMessage(id) }, token);

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-identity-');
    host = await startHost(dataDir);
    client = new grpc.Client(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure());
    tokenA = host.coordinator.credentials.mintAgent('a', 'test', 'agent a', ctx).token;
    tokenB = host.coordinator.credentials.mintAgent('b', 'test', 'agent b', ctx).token;
    assert.equal((await register('a', tokenA)).code, grpc.status.OK);
    assert.equal((await register('b', tokenB)).code, grpc.status.OK);
  });

  afterEach(async () => {
    client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  describe('an agent credential acts only as its agent', () => {
    it("refuses A opening B's inbox stream", async () => {
      const outcome = await call(ROUTER_PATHS.StreamIncoming, { agent_id: 'b' }, tokenA);
      assert.equal(outcome.code, grpc.status.PERMISSION_DENIED);
      assert.match(outcome.details, /this credential acts as agent 'a'; the call acts as 'b'/);
      assert.equal(
        (await call(ROUTER_PATHS.StreamIncoming, { agent_id: 'a' }, tokenA)).code,
        'open',
        'its own stream opens',
      );
    });

    it("refuses A confirming B's delivery, sending as B, and acknowledging as B", async () => {
      assert.equal(
        (await call(ROUTER_PATHS.AckDelivery, { agent_id: 'b', seq: '1', message_id: 'm' }, tokenA)).code,
        grpc.status.PERMISSION_DENIED,
      );
      const data = envelope({ producer_id: 'b', sequence_number: 1, payload: { to: 'a' } });
      assert.equal(
        (await call(ROUTER_PATHS.SendMessage, { msg: data }, tokenA, { 'sw4rm-to': 'a' })).code,
        grpc.status.PERMISSION_DENIED,
      );
      const ack = envelope({
        producer_id: 'b',
        sequence_number: 2,
        message_type: 'ACKNOWLEDGEMENT',
        payload: { ack_for_message_id: data.message_id, ack_stage: 'FULFILLED' },
      });
      assert.equal((await call(ROUTER_PATHS.SendMessage, { msg: ack }, tokenA)).code, grpc.status.PERMISSION_DENIED);
      const own = envelope({ producer_id: 'a', sequence_number: 1 });
      const sent = await call(ROUTER_PATHS.SendMessage, { msg: own }, tokenA, { 'sw4rm-to': 'b' });
      assert.deepEqual(
        [sent.code, (sent.response as { accepted: boolean }).accepted],
        [grpc.status.OK, true],
        'sending as itself is accepted',
      );
    });

    it('refuses A re-registering, heartbeating or deregistering B; B stays as it was', async () => {
      const before = host.coordinator.registry.get('b');
      assert.equal(
        (await call(REGISTER, { agent: descriptorMessage('b', { name: 'taken over' }) }, tokenA)).code,
        grpc.status.PERMISSION_DENIED,
      );
      assert.equal(
        (await call(HEARTBEAT, { agent_id: 'b', state: 'RUNNABLE' }, tokenA)).code,
        grpc.status.PERMISSION_DENIED,
      );
      assert.equal(
        (await call(DEREGISTER, { agent_id: 'b', reason: 'gone' }, tokenA)).code,
        grpc.status.PERMISSION_DENIED,
      );
      assert.deepEqual(host.coordinator.registry.get('b'), before);
      assert.equal(host.coordinator.log.query({ eventType: 'auth.permission_denied' }).length, 3);
    });

    it('refuses a HITL request on behalf of B, and asks as A when no requester is named', async () => {
      const decide = '/sw4rm.hitl.HitlService/Decide';
      const context = Buffer.from(JSON.stringify({ reason_type: 'SECURITY_APPROVAL', summary: 's', agent_id: 'b' }));
      assert.equal(
        (await call(decide, { reason_type: 'SECURITY_APPROVAL', context }, tokenA)).code,
        grpc.status.PERMISSION_DENIED,
      );
      assert.equal(
        (await call(decide, { reason_type: 'SECURITY_APPROVAL' }, tokenA, { 'sw4rm-agent-id': 'b' })).code,
        grpc.status.PERMISSION_DENIED,
      );
      void call(decide, { reason_type: 'SECURITY_APPROVAL', context: Buffer.from('{"summary":"mine"}') }, tokenA);
      await pollUntil('the invocation', () => host.coordinator.hitl.list().length === 1 || undefined);
      assert.equal(host.coordinator.hitl.list()[0].requester, 'a');
    });

    it('lets the operator token act for any agent', async () => {
      assert.deepEqual((await call(HEARTBEAT, { agent_id: 'b', state: 'RUNNABLE' }, host.token)).response, {
        ok: true,
      });
      assert.equal((await call(ROUTER_PATHS.StreamIncoming, { agent_id: 'a' }, host.token)).code, 'open');
      assert.equal(host.coordinator.log.query({ eventType: 'auth.permission_denied' }).length, 0);
    });
  });

  describe('revocation', () => {
    it('ends an open inbox stream at once (UNAUTHENTICATED) and refuses later calls', async () => {
      const stream = client.makeServerStreamRequest(
        ROUTER_PATHS.StreamIncoming,
        methods.get(ROUTER_PATHS.StreamIncoming)!.requestSerialize,
        methods.get(ROUTER_PATHS.StreamIncoming)!.responseDeserialize,
        { agent_id: 'a' },
        bearer(tokenA),
        {},
      );
      const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
      stream.on('data', () => undefined);
      await pollUntil('the stream', () => host.coordinator.router.inboxStats('a').streaming || undefined);
      const id = tokenA.split('.')[1];
      const revoked = host.coordinator.credentials.revoke(id, 'test', ctx);
      assert.notEqual(revoked.revokedAt, null);
      const error = await ended;
      assert.equal(error.code, grpc.status.UNAUTHENTICATED);
      assert.match(error.details, /revoked/);
      const later = await call(HEARTBEAT, { agent_id: 'a' }, tokenA);
      assert.equal(later.code, grpc.status.UNAUTHENTICATED);
      assert.match(later.details, /revoked/);
      assert.ok(
        host.coordinator.credentials.list().some((c) => c.id === id && c.revokedAt !== null),
        'a revoked credential stays listed',
      );
      assert.equal(
        (await call(HEARTBEAT, { agent_id: 'b' }, tokenB)).code,
        grpc.status.OK,
        "B's credential is untouched",
      );
    });
  });

  describe('authentication', () => {
    it('refuses two authorization headers with UNAUTHENTICATED, even when the first is the operator token', async () => {
      const answer = await rawGrpcCall(host.port, HEARTBEAT, [
        ['authorization', `Bearer ${host.token}`],
        ['authorization', 'Bearer other'],
      ]);
      assert.equal(answer.status, String(grpc.status.UNAUTHENTICATED));
      assert.match(answer.message, /more than one authorization header/);
      const one = await rawGrpcCall(host.port, HEARTBEAT, [['authorization', `Bearer ${host.token}`]]);
      assert.equal(one.status, String(grpc.status.OK));
    });

    it('refuses an unknown credential and a forged secret with UNAUTHENTICATED, logging no secret', async () => {
      const [, id, secret] = tokenA.split('.');
      const forged = `sw4rm.${id}.${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
      for (const token of [forged, 'sw4rm.nope.secret', 'sw4rm.']) {
        const outcome = await call(HEARTBEAT, { agent_id: 'a' }, token);
        assert.equal(outcome.code, grpc.status.UNAUTHENTICATED, token);
      }
      const events = host.coordinator.log.query({ eventType: 'auth.unauthenticated' });
      assert.equal(events.length, 3);
      assert.ok(!JSON.stringify(events).includes(secret.slice(0, 20)));
    });
  });

  describe('enrolment (what terminals carry)', () => {
    let enrolment: string;

    beforeEach(() => {
      enrolment = host.terminalEnvironment().SW4RM_TOKEN;
    });

    it('gives terminals the enrolment credential, never the operator token; kept 0600 across restarts', async () => {
      assert.match(enrolment, /^sw4rm\./);
      assert.notEqual(enrolment, host.token);
      assert.equal(host.environment().SW4RM_TOKEN, host.token);
      const file = path.join(dataDir, ENROLMENT_FILE_NAME);
      assert.equal(fs.readFileSync(file, 'utf8').trim(), enrolment);
      if (process.platform !== 'win32') assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      client.close();
      await stopHost(host);
      host = await startHost(dataDir);
      client = new grpc.Client(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure());
      assert.equal(host.terminalEnvironment().SW4RM_TOKEN, enrolment, 'the same enrolment credential after a restart');
    });

    it('registers a new agent id, answers its own credential once in sw4rm-agent-credential, and acts as it', async () => {
      const first = await register('e1', enrolment);
      assert.equal(first.code, grpc.status.OK);
      const minted = first.metadata?.get('sw4rm-agent-credential')[0];
      assert.equal(typeof minted, 'string');
      assert.match(String(minted), /^sw4rm\./);
      assert.equal(
        (await call(HEARTBEAT, { agent_id: 'e1', state: 'RUNNABLE' }, enrolment)).code,
        grpc.status.OK,
        'the enrolment credential acts as e1',
      );
      assert.equal(
        (await call(HEARTBEAT, { agent_id: 'e1', state: 'RUNNABLE' }, String(minted))).code,
        grpc.status.OK,
        'so does its own credential',
      );
      assert.equal((await call(HEARTBEAT, { agent_id: 'a' }, String(minted))).code, grpc.status.PERMISSION_DENIED);
      const again = await register('e1', enrolment);
      assert.equal(again.code, grpc.status.OK);
      assert.equal(again.metadata?.get('sw4rm-agent-credential').length, 0, 'a re-registration mints nothing');
      assert.equal(host.coordinator.credentials.list().filter((c) => c.agentId === 'e1').length, 1);
      assert.equal(host.coordinator.log.query({ eventType: 'agent.enrolled' }).length, 1);
    });

    it('cannot take an agent registered with another credential, one with a credential of its own, or one enrolled before a rotation', async () => {
      assert.equal(
        (await register('a', enrolment)).code,
        grpc.status.PERMISSION_DENIED,
        'a is registered with its own credential',
      );
      assert.equal(
        (await call(ROUTER_PATHS.StreamIncoming, { agent_id: 'a' }, enrolment)).code,
        grpc.status.PERMISSION_DENIED,
      );
      assert.equal((await register('op', host.token)).code, grpc.status.OK);
      assert.equal((await register('op', enrolment)).code, grpc.status.PERMISSION_DENIED, 'registered by the operator');
      host.coordinator.credentials.mintAgent('reserved', 'editor:test', 'reserved', ctx);
      const reserved = await register('reserved', enrolment);
      assert.equal(reserved.code, grpc.status.PERMISSION_DENIED, 'claimed by an operator-minted credential');
      assert.match(reserved.details, /has a credential of its own/);
      assert.equal((await register('e2', enrolment)).code, grpc.status.OK);
      const rotated = host.rotateEnrolment('test').SW4RM_TOKEN;
      assert.notEqual(rotated, enrolment);
      assert.equal(
        (await call(HEARTBEAT, { agent_id: 'e2' }, enrolment)).code,
        grpc.status.UNAUTHENTICATED,
        'the old enrolment credential is revoked',
      );
      assert.equal((await register('e2', rotated)).code, grpc.status.PERMISSION_DENIED, 'e2 was enrolled elsewhere');
      assert.equal((await register('e3', rotated)).code, grpc.status.OK);
    });
  });

  it('keeps the operator-only credentials service away from agent and enrolment credentials', async () => {
    const list = '/sw4rm.vscode.credentials.CredentialsService/ListCredentials';
    const definition = canonicalMethods(loadCredentialsDefinition(PROTOS_DIR)).get(list)!;
    assert.equal((await callPath(client, definition, {}, bearer(tokenA))).code, grpc.status.PERMISSION_DENIED);
    assert.equal(
      (await callPath(client, definition, {}, bearer(host.terminalEnvironment().SW4RM_TOKEN))).code,
      grpc.status.PERMISSION_DENIED,
    );
    const listed = await callPath(client, definition, {}, bearer(host.token));
    assert.equal(listed.code, grpc.status.OK);
    assert.ok((listed.response as { credentials: unknown[] }).credentials.length >= 3);
  });
});
