import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { CoordinatorHost } from '../../src/server/host';
import { CANONICAL_SERVICES, serviceDefinition } from '../../src/server/protos';
import { canonicalDefinition } from '../support/clients';
import { startHost, stopHost } from '../support/host';
import { declaredRpcPaths } from '../support/protoRpcs';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** The RPCs the coordinator implements (walking skeleton, messaging plane, HITL, worktrees, tools, scheduler, negotiation, handoffs, workflows); every other one must answer UNIMPLEMENTED. */
const IMPLEMENTED = new Set([
  '/sw4rm.registry.RegistryService/RegisterAgent',
  '/sw4rm.registry.RegistryService/Heartbeat',
  '/sw4rm.registry.RegistryService/DeregisterAgent',
  '/sw4rm.logging.LoggingService/Ingest',
  '/sw4rm.router.RouterService/SendMessage',
  '/sw4rm.router.RouterService/StreamIncoming',
  '/sw4rm.router.RouterService/AckDelivery',
  '/sw4rm.hitl.HitlService/Decide',
  '/sw4rm.worktree.WorktreeService/Bind',
  '/sw4rm.worktree.WorktreeService/Unbind',
  '/sw4rm.worktree.WorktreeService/RequestSwitch',
  '/sw4rm.worktree.WorktreeService/ApproveSwitch',
  '/sw4rm.worktree.WorktreeService/RejectSwitch',
  '/sw4rm.worktree.WorktreeService/Status',
  '/sw4rm.tool.ToolService/Call',
  '/sw4rm.tool.ToolService/CallStream',
  '/sw4rm.tool.ToolService/Cancel',
  '/sw4rm.connector.ConnectorService/DescribeTools',
  '/sw4rm.connector.ConnectorService/RegisterProvider',
  '/sw4rm.scheduler.SchedulerService/SubmitTask',
  '/sw4rm.scheduler.SchedulerService/RequestPreemption',
  '/sw4rm.scheduler.SchedulerService/ShutdownAgent',
  '/sw4rm.scheduler.SchedulerService/PollActivityBuffer',
  '/sw4rm.scheduler.SchedulerService/PurgeActivity',
  '/sw4rm.activity.ActivityService/AppendArtifact',
  '/sw4rm.activity.ActivityService/ListArtifacts',
  '/sw4rm.reasoning.ReasoningProxy/CheckParallelism',
  '/sw4rm.reasoning.ReasoningProxy/EvaluateDebate',
  '/sw4rm.reasoning.ReasoningProxy/Summarize',
  '/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles',
  '/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles',
  '/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation',
  '/sw4rm.scheduler.SchedulerPolicyService/HitlAction',
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal',
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote',
  '/sw4rm.negotiation_room.NegotiationRoomService/GetVotes',
  '/sw4rm.negotiation_room.NegotiationRoomService/GetDecision',
  '/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision',
  '/sw4rm.negotiation.NegotiationService/Open',
  '/sw4rm.negotiation.NegotiationService/Propose',
  '/sw4rm.negotiation.NegotiationService/Counter',
  '/sw4rm.negotiation.NegotiationService/Evaluate',
  '/sw4rm.negotiation.NegotiationService/Decide',
  '/sw4rm.negotiation.NegotiationService/Abort',
  '/sw4rm.handoff.HandoffService/RequestHandoff',
  '/sw4rm.handoff.HandoffService/AcceptHandoff',
  '/sw4rm.handoff.HandoffService/RejectHandoff',
  '/sw4rm.handoff.HandoffService/GetPendingHandoffs',
  '/sw4rm.handoff.HandoffService/CompleteHandoff',
  '/sw4rm.handoff.HandoffService/CancelDelegation',
  '/sw4rm.workflow.WorkflowService/CreateWorkflow',
  '/sw4rm.workflow.WorkflowService/StartWorkflow',
  '/sw4rm.workflow.WorkflowService/GetWorkflowState',
  '/sw4rm.workflow.WorkflowService/ResumeWorkflow',
]);

type Method = grpc.MethodDefinition<unknown, unknown>;

function allMethods(): Method[] {
  const methods: Method[] = [];
  for (const name of CANONICAL_SERVICES) {
    for (const method of Object.values(serviceDefinition(canonicalDefinition(), name))) methods.push(method as Method);
  }
  return methods;
}

/** Calls any RPC with an empty request and answers the status it ends with (responses are a failure). */
function callWithEmptyRequest(
  client: grpc.Client,
  method: Method,
  metadata: grpc.Metadata,
): Promise<grpc.StatusObject> {
  const options: grpc.CallOptions = { deadline: Date.now() + 10_000 };
  return new Promise((resolve, reject) => {
    const unexpected = (response: unknown) => reject(new Error(`${method.path} answered ${JSON.stringify(response)}`));
    const settle = (err: grpc.ServiceError | null, response?: unknown) => (err ? resolve(err) : unexpected(response));
    if (!method.requestStream && !method.responseStream) {
      client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        {},
        metadata,
        options,
        settle,
      );
    } else if (!method.requestStream && method.responseStream) {
      const stream = client.makeServerStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        {},
        metadata,
        options,
      );
      stream.on('data', unexpected);
      stream.on('error', (err: grpc.ServiceError) => resolve(err));
      stream.on('status', (status: grpc.StatusObject) => {
        if (status.code === grpc.status.OK) unexpected('an OK stream end');
      });
    } else if (method.requestStream && !method.responseStream) {
      const call = client.makeClientStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        metadata,
        options,
        settle,
      );
      call.write({});
      call.end();
    } else {
      const call = client.makeBidiStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        metadata,
        options,
      );
      call.on('data', unexpected);
      call.on('error', (err: grpc.ServiceError) => resolve(err));
      call.write({});
      call.end();
    }
  });
}

describe('RPCs not implemented yet', () => {
  let dataDir: string;
  let host: CoordinatorHost;
  let client: grpc.Client;

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-unimpl-');
    host = await startHost(dataDir);
    client = new grpc.Client(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  function authorized(): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${host.token}`);
    return metadata;
  }

  it('covers all 15 services, and every implemented RPC exists in the protos', () => {
    const paths = allMethods().map((m) => m.path);
    assert.equal(new Set(paths.map((p) => p.split('/')[1])).size, 15);
    for (const path of IMPLEMENTED) assert.ok(paths.includes(path), path);
    // Every RPC the .proto files declare, counted from their text.
    assert.deepEqual([...paths].sort(), declaredRpcPaths(), `${paths.length} RPCs in all`);
  });

  it('answers UNIMPLEMENTED, saying "not implemented yet", for every other RPC of the 15 services', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const method of allMethods()) {
      if (IMPLEMENTED.has(method.path)) continue;
      const status = await callWithEmptyRequest(client, method, authorized());
      checked++;
      if (
        status.code !== grpc.status.UNIMPLEMENTED ||
        !status.details.includes('not implemented yet') ||
        !status.details.includes(method.path)
      ) {
        wrong.push(`${method.path}: ${grpc.status[status.code]} ${JSON.stringify(status.details)}`);
      }
    }
    assert.deepEqual(wrong, []);
    assert.equal(checked, allMethods().length - IMPLEMENTED.size, `${checked} RPCs checked`);
  });

  it('implements every RPC of RouterService (the messaging plane)', () => {
    const router = allMethods()
      .filter((m) => m.path.startsWith('/sw4rm.router.RouterService/'))
      .map((m) => m.path)
      .sort();
    assert.deepEqual(router, [...IMPLEMENTED].filter((p) => p.startsWith('/sw4rm.router.')).sort());
  });

  it('answers an implemented RouterService RPC instead of UNIMPLEMENTED', async () => {
    const send = allMethods().find((m) => m.path === '/sw4rm.router.RouterService/SendMessage');
    assert.ok(send);
    const response = await new Promise<{ accepted: boolean; reason: string }>((resolve, reject) => {
      client.makeUnaryRequest(
        send.path,
        send.requestSerialize,
        send.responseDeserialize,
        {},
        authorized(),
        { deadline: Date.now() + 10_000 },
        (err, value) => (err ? reject(err) : resolve(value as { accepted: boolean; reason: string })),
      );
    });
    assert.equal(response.accepted, false);
    assert.match(response.reason, /^VALIDATION_ERROR: /);
  });

  it('answers HitlService.Decide with a validation error for an invocation without a reason type', async () => {
    const decide = allMethods().find((m) => m.path === '/sw4rm.hitl.HitlService/Decide');
    assert.ok(decide);
    const status = await callWithEmptyRequest(client, decide, authorized());
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT);
    assert.match(status.details, /^VALIDATION_ERROR: reason_type must be one of CONFLICT, SECURITY_APPROVAL/);
  });

  it('answers the tool RPCs for a provider that is not registered with NOT_FOUND, saying so', async () => {
    for (const path of ['/sw4rm.tool.ToolService/Call', '/sw4rm.tool.ToolService/CallStream']) {
      const method = allMethods().find((m) => m.path === path);
      assert.ok(method, path);
      const metadata = authorized();
      metadata.set('sw4rm-agent-id', 'someone');
      const status = await new Promise<grpc.StatusObject>((resolve, reject) => {
        const request = { provider_id: 'mcp-elsewhere', tool_name: 'x' };
        if (method.responseStream) {
          const stream = client.makeServerStreamRequest(
            method.path,
            method.requestSerialize,
            method.responseDeserialize,
            request,
            metadata,
            { deadline: Date.now() + 10_000 },
          );
          stream.on('data', () => reject(new Error('a frame')));
          stream.on('error', resolve);
        } else {
          client.makeUnaryRequest(
            method.path,
            method.requestSerialize,
            method.responseDeserialize,
            request,
            metadata,
            { deadline: Date.now() + 10_000 },
            (err) => (err ? resolve(err) : reject(new Error('an answer'))),
          );
        }
      });
      assert.equal(status.code, grpc.status.NOT_FOUND, path);
      assert.match(status.details, /^NOT_FOUND: no (tool )?provider 'mcp-elsewhere'/, path);
    }
  });

  it('still asks for credentials first', async () => {
    for (const path of [
      '/sw4rm.router.RouterService/StreamIncoming',
      '/sw4rm.hitl.HitlService/',
      '/sw4rm.tool.ToolService/',
    ]) {
      const method = allMethods().find((m) => m.path.startsWith(path));
      assert.ok(method, path);
      const status = await callWithEmptyRequest(client, method, new grpc.Metadata());
      assert.equal(status.code, grpc.status.UNAUTHENTICATED, method.path);
    }
  });
});
