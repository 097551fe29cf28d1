import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import {
  CANONICAL_SERVICES,
  LOADER_OPTIONS,
  PROTO_FILES,
  loadCanonicalProtos,
  loadPackageDefinition,
  serviceDefinition,
} from '../../src/server/protos';
import { declaredRpcPaths } from '../support/protoRpcs';

// Compiled to out/test/unit/, so the repository root is three levels up.
const PROTOS_DIR = path.resolve(__dirname, '../../../protos');

const EXPECTED_FILES = [
  'activity.proto',
  'common.proto',
  'connector.proto',
  'handoff.proto',
  'hitl.proto',
  'logging.proto',
  'negotiation.proto',
  'negotiation_room.proto',
  'policy.proto',
  'reasoning.proto',
  'registry.proto',
  'router.proto',
  'scheduler.proto',
  'scheduler_policy.proto',
  'tool.proto',
  'workflow.proto',
  'worktree.proto',
];

const EXPECTED_SERVICES = [
  'sw4rm.activity.ActivityService',
  'sw4rm.connector.ConnectorService',
  'sw4rm.handoff.HandoffService',
  'sw4rm.hitl.HitlService',
  'sw4rm.logging.LoggingService',
  'sw4rm.negotiation.NegotiationService',
  'sw4rm.negotiation_room.NegotiationRoomService',
  'sw4rm.reasoning.ReasoningProxy',
  'sw4rm.registry.RegistryService',
  'sw4rm.router.RouterService',
  'sw4rm.scheduler.SchedulerPolicyService',
  'sw4rm.scheduler.SchedulerService',
  'sw4rm.tool.ToolService',
  'sw4rm.workflow.WorkflowService',
  'sw4rm.worktree.WorktreeService',
];

const EXPECTED_RPC_PATHS = [
  '/sw4rm.activity.ActivityService/AppendArtifact',
  '/sw4rm.activity.ActivityService/ListArtifacts',
  '/sw4rm.connector.ConnectorService/DescribeTools',
  '/sw4rm.connector.ConnectorService/RegisterProvider',
  '/sw4rm.handoff.HandoffService/AcceptHandoff',
  '/sw4rm.handoff.HandoffService/CancelDelegation',
  '/sw4rm.handoff.HandoffService/CompleteHandoff',
  '/sw4rm.handoff.HandoffService/GetPendingHandoffs',
  '/sw4rm.handoff.HandoffService/RejectHandoff',
  '/sw4rm.handoff.HandoffService/RequestHandoff',
  '/sw4rm.hitl.HitlService/Decide',
  '/sw4rm.logging.LoggingService/Ingest',
  '/sw4rm.negotiation.NegotiationService/Abort',
  '/sw4rm.negotiation.NegotiationService/Counter',
  '/sw4rm.negotiation.NegotiationService/Decide',
  '/sw4rm.negotiation.NegotiationService/Evaluate',
  '/sw4rm.negotiation.NegotiationService/Open',
  '/sw4rm.negotiation.NegotiationService/Propose',
  '/sw4rm.negotiation_room.NegotiationRoomService/GetDecision',
  '/sw4rm.negotiation_room.NegotiationRoomService/GetVotes',
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal',
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote',
  '/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision',
  '/sw4rm.reasoning.ReasoningProxy/CheckParallelism',
  '/sw4rm.reasoning.ReasoningProxy/EvaluateDebate',
  '/sw4rm.reasoning.ReasoningProxy/Summarize',
  '/sw4rm.registry.RegistryService/DeregisterAgent',
  '/sw4rm.registry.RegistryService/Heartbeat',
  '/sw4rm.registry.RegistryService/RegisterAgent',
  '/sw4rm.router.RouterService/AckDelivery',
  '/sw4rm.router.RouterService/SendMessage',
  '/sw4rm.router.RouterService/StreamIncoming',
  '/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/HitlAction',
  '/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles',
  '/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy',
  '/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles',
  '/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation',
  '/sw4rm.scheduler.SchedulerService/PollActivityBuffer',
  '/sw4rm.scheduler.SchedulerService/PurgeActivity',
  '/sw4rm.scheduler.SchedulerService/RequestPreemption',
  '/sw4rm.scheduler.SchedulerService/ShutdownAgent',
  '/sw4rm.scheduler.SchedulerService/SubmitTask',
  '/sw4rm.tool.ToolService/Call',
  '/sw4rm.tool.ToolService/CallStream',
  '/sw4rm.tool.ToolService/Cancel',
  '/sw4rm.workflow.WorkflowService/CreateWorkflow',
  '/sw4rm.workflow.WorkflowService/GetWorkflowState',
  '/sw4rm.workflow.WorkflowService/ResumeWorkflow',
  '/sw4rm.workflow.WorkflowService/StartWorkflow',
  '/sw4rm.worktree.WorktreeService/ApproveSwitch',
  '/sw4rm.worktree.WorktreeService/Bind',
  '/sw4rm.worktree.WorktreeService/RejectSwitch',
  '/sw4rm.worktree.WorktreeService/RequestSwitch',
  '/sw4rm.worktree.WorktreeService/Status',
  '/sw4rm.worktree.WorktreeService/Unbind',
];

// The RFC's tool.proto declares CallStream as server-streaming next to the router's StreamIncoming.
const EXPECTED_SERVER_STREAMING = ['/sw4rm.router.RouterService/StreamIncoming', '/sw4rm.tool.ToolService/CallStream'];

interface FieldDescriptor {
  name: string;
  number: number;
  type: string;
  typeName: string;
  label: string;
}

interface EnumValueDescriptor {
  name: string;
  number: number;
}

function isService(definition: protoLoader.AnyDefinition): definition is protoLoader.ServiceDefinition {
  return !('format' in definition);
}

function serviceNames(packageDefinition: protoLoader.PackageDefinition): string[] {
  return Object.keys(packageDefinition)
    .filter((name) => isService(packageDefinition[name]))
    .sort();
}

function methods(packageDefinition: protoLoader.PackageDefinition): protoLoader.MethodDefinition<object, object>[] {
  return serviceNames(packageDefinition).flatMap((name) =>
    Object.values(packageDefinition[name] as protoLoader.ServiceDefinition),
  );
}

function fieldsOf(packageDefinition: protoLoader.PackageDefinition, typeName: string): FieldDescriptor[] {
  const definition = packageDefinition[typeName];
  assert.ok(definition, `${typeName} is defined`);
  assert.ok(!isService(definition), `${typeName} is a message`);
  return (definition.type as { field: FieldDescriptor[] }).field;
}

function fieldOf(
  packageDefinition: protoLoader.PackageDefinition,
  typeName: string,
  fieldName: string,
): FieldDescriptor {
  const field = fieldsOf(packageDefinition, typeName).find((candidate) => candidate.name === fieldName);
  assert.ok(field, `${typeName}.${fieldName} exists`);
  return field;
}

function enumValues(packageDefinition: protoLoader.PackageDefinition, typeName: string): Record<string, number> {
  const definition = packageDefinition[typeName];
  assert.ok(definition, `${typeName} is defined`);
  assert.ok(!isService(definition), `${typeName} is an enum`);
  const values = (definition.type as { value: EnumValueDescriptor[] }).value;
  return Object.fromEntries(values.map((value) => [value.name, value.number]));
}

describe('canonical SW4RM protos', () => {
  let packageDefinition: protoLoader.PackageDefinition;

  before(() => {
    packageDefinition = loadPackageDefinition(PROTOS_DIR);
  });

  it('lists exactly the 17 canonical files, and protos/ holds exactly those at its top level', () => {
    assert.equal(PROTO_FILES.length, 17);
    assert.deepEqual([...PROTO_FILES].sort(), EXPECTED_FILES);
    const onDisk = fs
      .readdirSync(PROTOS_DIR, { withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith('.proto'))
      .map((entry) => entry.name)
      .sort();
    assert.deepEqual(onDisk, EXPECTED_FILES);
  });

  it("uses the reference clients' loader options", () => {
    assert.equal(LOADER_OPTIONS.keepCase, true);
    assert.equal(LOADER_OPTIONS.longs, String);
    assert.equal(LOADER_OPTIONS.enums, String);
    assert.equal(LOADER_OPTIONS.defaults, true);
    assert.equal(LOADER_OPTIONS.oneofs, true);
  });

  describe('each file loads on its own with protos/ as the only include dir', () => {
    for (const file of EXPECTED_FILES) {
      it(file, () => {
        const single = protoLoader.loadSync(file, { ...LOADER_OPTIONS, includeDirs: [PROTOS_DIR] });
        assert.ok(
          Object.keys(single).some((name) => name.startsWith('sw4rm.')),
          `${file} defines sw4rm types`,
        );
      });
    }
  });

  it('defines exactly the 15 canonical services', () => {
    assert.deepEqual(serviceNames(packageDefinition), EXPECTED_SERVICES);
    assert.deepEqual([...CANONICAL_SERVICES].sort(), EXPECTED_SERVICES);
  });

  it('exposes exactly the canonical RPC paths the .proto files declare', () => {
    // Counted from the .proto files' text, not written down: the list below, the files and the loader agree.
    assert.deepEqual(EXPECTED_RPC_PATHS, declaredRpcPaths(PROTOS_DIR));
    const paths = methods(packageDefinition)
      .map((method) => method.path)
      .sort();
    assert.deepEqual(paths, EXPECTED_RPC_PATHS);
  });

  it('states the number of RPCs in README.md and ARCHITECTURE.md as the .proto files declare them', () => {
    const declared = declaredRpcPaths(PROTOS_DIR).length;
    const root = path.resolve(PROTOS_DIR, '..');
    const stated = ['README.md', 'ARCHITECTURE.md'].flatMap((doc) =>
      [...fs.readFileSync(path.join(root, doc), 'utf8').matchAll(/\ball (\d+)(?: canonical)? RPCs\b/gi)].map(
        (match) => ({ doc, count: Number(match[1]) }),
      ),
    );
    assert.ok(
      stated.some(({ doc }) => doc === 'README.md'),
      'README.md says how many RPCs there are ("All <n> RPCs")',
    );
    assert.deepEqual(
      stated.filter(({ count }) => count !== declared),
      [],
      `the protos declare ${declared} RPCs`,
    );
  });

  it("makes StreamIncoming (and the RFC's ToolService.CallStream) server-streaming and every other RPC unary", () => {
    const all = methods(packageDefinition);
    assert.deepEqual(
      all.filter((method) => method.requestStream).map((method) => method.path),
      [],
      'no client-streaming RPCs',
    );
    assert.deepEqual(
      all
        .filter((method) => method.responseStream)
        .map((method) => method.path)
        .sort(),
      EXPECTED_SERVER_STREAMING,
    );
  });

  it('puts scheduler.proto and scheduler_policy.proto both in package sw4rm.scheduler', () => {
    assert.ok(packageDefinition['sw4rm.scheduler.SubmitTaskRequest']);
    assert.ok(packageDefinition['sw4rm.scheduler.SetNegotiationPolicyRequest']);
    assert.deepEqual(
      Object.keys(packageDefinition).filter((name) => name.startsWith('sw4rm.scheduler_policy.')),
      [],
    );
  });

  it('keeps the field numbers and types clients depend on', () => {
    const expectations: Array<[string, string, number, string, string?]> = [
      ['sw4rm.common.Envelope', 'payload', 15, 'TYPE_BYTES'],
      ['sw4rm.common.Envelope', 'state', 16, 'TYPE_ENUM', 'EnvelopeState'],
      ['sw4rm.common.Envelope', 'parent_correlation_id', 100, 'TYPE_STRING'],
      ['sw4rm.router.StreamItem', 'msg', 1, 'TYPE_MESSAGE'],
      ['sw4rm.router.StreamItem', 'seq', 2, 'TYPE_INT64'],
      ['sw4rm.router.DeliveryAckRequest', 'seq', 2, 'TYPE_INT64'],
      ['sw4rm.router.DeliveryAckRequest', 'outcome', 4, 'TYPE_ENUM', 'DeliveryAckOutcome'],
      ['sw4rm.registry.AgentDescriptor', 'registration_type', 100, 'TYPE_ENUM', 'RegistrationType'],
      ['sw4rm.registry.AgentDescriptor', 'max_concurrent_delegations', 101, 'TYPE_UINT32'],
      ['sw4rm.handoff.HandoffRequest', 'budget', 100, 'TYPE_MESSAGE', 'BudgetEnvelope'],
      ['sw4rm.handoff.HandoffRequest', 'delegation_policy', 101, 'TYPE_MESSAGE', 'SwarmDelegationPolicy'],
      ['sw4rm.handoff.HandoffResponse', 'rejection_code', 100, 'TYPE_ENUM', 'common.ErrorCode'],
      ['sw4rm.handoff.HandoffResponse', 'retry_after_ms', 101, 'TYPE_UINT64'],
      ['sw4rm.handoff.HandoffResponse', 'redirect_to_agent_id', 110, 'TYPE_STRING'],
      ['sw4rm.reasoning.TextSegment', 'seq', 3, 'TYPE_INT64'],
      ['sw4rm.negotiation_room.WaitForDecisionRequest', 'timeout_seconds', 3, 'TYPE_UINT32'],
      ['sw4rm.workflow.WorkflowState', 'workflow_data', 3, 'TYPE_STRING'],
    ];
    for (const [typeName, fieldName, number, type, referenced] of expectations) {
      const field = fieldOf(packageDefinition, typeName, fieldName);
      assert.equal(field.number, number, `${typeName}.${fieldName} number`);
      assert.equal(field.type, type, `${typeName}.${fieldName} type`);
      // protobufjs reports type references relative to the enclosing package, so compare the tail only.
      if (referenced !== undefined) {
        assert.ok(field.typeName.endsWith(referenced), `${typeName}.${fieldName} refers to ${referenced}`);
      }
    }
  });

  it('keeps the enum values clients depend on', () => {
    assert.deepEqual(enumValues(packageDefinition, 'sw4rm.common.EnvelopeState'), {
      ENVELOPE_STATE_UNSPECIFIED: 0,
      ENVELOPE_STATE_SENT: 1,
      ENVELOPE_STATE_RECEIVED: 2,
      ENVELOPE_STATE_READ: 3,
      ENVELOPE_STATE_FULFILLED: 4,
      ENVELOPE_STATE_REJECTED: 5,
      ENVELOPE_STATE_FAILED: 6,
      ENVELOPE_STATE_TIMED_OUT: 7,
    });
    const errorCodes = enumValues(packageDefinition, 'sw4rm.common.ErrorCode');
    assert.equal(errorCodes.TTL_EXPIRED, 13);
    assert.equal(errorCodes.DUPLICATE_DETECTED, 14);
    assert.equal(errorCodes.ALREADY_IN_PROGRESS, 15);
    assert.equal(errorCodes.OVERLOADED, 16);
    assert.equal(errorCodes.REDIRECT, 20);
    assert.equal(errorCodes.INTERNAL_ERROR, 99);
    assert.deepEqual(enumValues(packageDefinition, 'sw4rm.registry.RegistrationType'), {
      REGISTRATION_TYPE_UNSPECIFIED: 0,
      STANDARD_AGENT: 1,
      SWARM_GATEWAY: 2,
    });
    assert.deepEqual(enumValues(packageDefinition, 'sw4rm.router.DeliveryAckOutcome'), {
      DELIVERY_ACK_OUTCOME_DELIVERED: 0,
      DELIVERY_ACK_OUTCOME_PERMANENT_FAILURE: 1,
    });
    assert.equal(enumValues(packageDefinition, 'sw4rm.handoff.HandoffStatus').EXPIRED, 5);
  });

  it('round-trips an envelope the way a reference client encodes it', () => {
    const sendMessage = serviceDefinition(packageDefinition, 'sw4rm.router.RouterService').SendMessage;
    const bytes = sendMessage.requestSerialize({
      msg: {
        message_id: 'm-1',
        message_type: 'DATA',
        sequence_number: '7',
        state: 'ENVELOPE_STATE_SENT',
        parent_correlation_id: 'parent-1',
        payload: Buffer.from('{"to":"agent-b"}'),
      },
    });
    const decoded = sendMessage.requestDeserialize(bytes) as { msg: Record<string, unknown> };
    assert.equal(decoded.msg.message_type, 'DATA');
    assert.equal(decoded.msg.sequence_number, '7');
    assert.equal(decoded.msg.state, 'ENVELOPE_STATE_SENT');
    assert.equal(decoded.msg.parent_correlation_id, 'parent-1');
    assert.equal(decoded.msg.correlation_id, '', 'defaults are filled in');
    assert.equal(Buffer.from(decoded.msg.payload as Uint8Array).toString(), '{"to":"agent-b"}');
  });

  it('builds a grpc-js object tree with a client constructor per service', () => {
    const { grpcObject } = loadCanonicalProtos(PROTOS_DIR);
    for (const fullName of EXPECTED_SERVICES) {
      let node: unknown = grpcObject;
      for (const part of fullName.split('.')) {
        node = (node as Record<string, unknown>)[part];
      }
      assert.equal(typeof node, 'function', `${fullName} is a client constructor`);
      assert.ok((node as { service?: unknown }).service, `${fullName} carries its service definition`);
    }
  });

  it('serviceDefinition returns a service and rejects unknown names and non-services', () => {
    const router = serviceDefinition(packageDefinition, 'sw4rm.router.RouterService');
    assert.deepEqual(Object.keys(router).sort(), ['AckDelivery', 'SendMessage', 'StreamIncoming']);
    assert.equal(router.StreamIncoming.path, '/sw4rm.router.RouterService/StreamIncoming');
    assert.throws(() => serviceDefinition(packageDefinition, 'sw4rm.router.NoSuchService'), /No service named/);
    assert.throws(() => serviceDefinition(packageDefinition, 'sw4rm.common.Envelope'), /not a service/);
    assert.throws(() => serviceDefinition(packageDefinition, 'toString'), /No service named/);
  });
});
