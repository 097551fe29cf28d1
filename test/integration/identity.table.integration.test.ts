import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { CANONICAL_SERVICES } from '../../src/server/protos';
import type { CoordinatorHost } from '../../src/server/host';
import { firstRefusal, IDENTITY_RULES } from '../../src/server/identity';
import { bearer, CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { callPath, canonicalMethods, claimingRequest, describeClaim } from '../support/identityClient';
import { declaredRpcPaths } from '../support/protoRpcs';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * Generated from the identity table (src/server/identity.ts): for every RPC, every place that names the acting
 * agent is tried with an agent credential of `self` naming `victim`. A service built later is covered as soon as
 * its RPCs are in the table; a canonical RPC missing from the table stops the server from starting.
 */
const methods = canonicalMethods();
const built = new Set([
  'sw4rm.registry.RegistryService',
  'sw4rm.router.RouterService',
  'sw4rm.hitl.HitlService',
  'sw4rm.logging.LoggingService',
  'sw4rm.worktree.WorktreeService',
  'sw4rm.tool.ToolService',
  'sw4rm.connector.ConnectorService',
  'sw4rm.activity.ActivityService',
  'sw4rm.scheduler.SchedulerService',
  'sw4rm.negotiation_room.NegotiationRoomService',
  'sw4rm.negotiation.NegotiationService',
  'sw4rm.handoff.HandoffService',
  'sw4rm.workflow.WorkflowService',
]);
/** Operator actions: the handler, reached, refuses every agent credential (its own details, not the identity check's). */
const OPERATOR_ONLY = new Set([
  '/sw4rm.worktree.WorktreeService/ApproveSwitch',
  '/sw4rm.worktree.WorktreeService/RejectSwitch',
]);

describe('the identity table', () => {
  it('counts a HITL requester named in the nested context object as well as at the top level', () => {
    const rule = IDENTITY_RULES['/sw4rm.hitl.HitlService/Decide'];
    const onlySelf = (agentId: string) => (agentId === 'self' ? undefined : `not ${agentId}`);
    for (const context of [
      { context: { requester: 'victim' } },
      { requester: 'self', context: { agent_id: 'victim' } },
      { context: { agentId: 'victim' } },
    ]) {
      assert.deepEqual(
        firstRefusal(rule, { context: Buffer.from(JSON.stringify(context)) }, new grpc.Metadata(), onlySelf)?.agentId,
        'victim',
        JSON.stringify(context),
      );
    }
    assert.equal(
      firstRefusal(rule, { context: Buffer.from('{"context":{"requester":"self"}}') }, new grpc.Metadata(), onlySelf),
      undefined,
    );
  });

  it('has one rule for each canonical RPC the .proto files declare, and no other', () => {
    const paths = [...methods.keys()].filter((p) => CANONICAL_SERVICES.some((s) => p.startsWith(`/${s}/`))).sort();
    assert.deepEqual(paths, declaredRpcPaths());
    assert.deepEqual(Object.keys(IDENTITY_RULES).sort(), paths);
    for (const [path, rule] of Object.entries(IDENTITY_RULES))
      assert.ok(rule.note.length > 0, `${path} says what its fields mean`);
  });
});

describe('every RPC that names an agent refuses an agent credential acting as another (generated)', () => {
  let dataDir: string;
  let host: CoordinatorHost;
  let client: grpc.Client;
  let selfToken: string;

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-identity-table-');
    host = await startHost(dataDir);
    const operator = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    for (const id of ['self', 'victim'])
      assert.equal((await operator.registerAgent(descriptorMessage(id))).accepted, true);
    operator.close();
    selfToken = host.coordinator.credentials.mintAgent('self', 'test', 'generated identity tests', {
      correlationId: 'test',
    }).token;
    client = new grpc.Client(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  for (const [path, rule] of Object.entries(IDENTITY_RULES)) {
    const service = path.split('/')[1];
    for (const claim of rule.actsAs) {
      it(`${path} (${describeClaim(claim)}): acting as another agent is PERMISSION_DENIED and logged`, async () => {
        const { request, metadata } = claimingRequest(claim, 'victim');
        const before = host.coordinator.log.query({ eventType: 'auth.permission_denied' }).length;
        const outcome = await callPath(client, methods.get(path)!, request, bearer(selfToken, metadata));
        assert.equal(outcome.code, grpc.status.PERMISSION_DENIED, `${path}: ${outcome.details}`);
        assert.match(outcome.details, /this credential acts as agent 'self'; the call acts as 'victim'/);
        const events = host.coordinator.log.query({ eventType: 'auth.permission_denied' });
        assert.equal(events.length, before + 1);
        const event = events[events.length - 1];
        assert.equal(event.level, 'WARN');
        assert.deepEqual(
          [event.details.rpc, event.details.claimed_agent, event.details.principal],
          [path, 'victim', 'agent'],
        );
        assert.equal(typeof event.details.credential_id, 'string');
        assert.ok(!JSON.stringify(event).includes(selfToken.split('.')[2]), 'the secret is never logged');
      });

      it(`${path} (${describeClaim(claim)}): acting as itself reaches the ${built.has(service) ? 'handler' : 'UNIMPLEMENTED answer'}`, async () => {
        const { request, metadata } = claimingRequest(claim, 'self');
        const outcome = await callPath(client, methods.get(path)!, request, bearer(selfToken, metadata));
        if (OPERATOR_ONLY.has(path))
          assert.match(
            outcome.details,
            /^PERMISSION_DENIED: approving or rejecting a worktree switch is an operator action/,
          );
        else if (built.has(service))
          assert.notEqual(outcome.code, grpc.status.PERMISSION_DENIED, `${path}: ${outcome.details}`);
        else assert.equal(outcome.code, grpc.status.UNIMPLEMENTED, `${path}: ${outcome.details}`);
      });
    }
  }

  for (const [path, rule] of Object.entries(IDENTITY_RULES).filter(([, r]) => r.actsAs.length === 0)) {
    it(`${path} names no agent: an agent credential reaches it`, async () => {
      const outcome = await callPath(client, methods.get(path)!, {}, bearer(selfToken));
      assert.notEqual(outcome.code, grpc.status.PERMISSION_DENIED, rule.note);
      assert.notEqual(outcome.code, grpc.status.UNAUTHENTICATED);
    });
  }
});
