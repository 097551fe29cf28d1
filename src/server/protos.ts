import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * The 17 canonical SW4RM .proto files, in the order of the RFC's Appendix A table.
 * They live in one folder and import each other by bare file name, so that folder is the include root.
 */
export const PROTO_FILES: readonly string[] = Object.freeze([
  'common.proto',
  'registry.proto',
  'router.proto',
  'scheduler.proto',
  'scheduler_policy.proto',
  'worktree.proto',
  'tool.proto',
  'hitl.proto',
  'negotiation.proto',
  'negotiation_room.proto',
  'handoff.proto',
  'workflow.proto',
  'connector.proto',
  'reasoning.proto',
  'activity.proto',
  'logging.proto',
  'policy.proto',
]);

/**
 * The @grpc/proto-loader options the reference SDK clients use. loadPackageDefinition() adds includeDirs.
 * The well-known types (google/protobuf/timestamp.proto, duration.proto) come from proto-loader's bundled copies.
 */
export const LOADER_OPTIONS: Readonly<protoLoader.Options> = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The fully-qualified names of the 15 canonical services (policy.proto has none). */
export const CANONICAL_SERVICES: readonly string[] = Object.freeze([
  'sw4rm.registry.RegistryService',
  'sw4rm.router.RouterService',
  'sw4rm.scheduler.SchedulerService',
  'sw4rm.scheduler.SchedulerPolicyService',
  'sw4rm.worktree.WorktreeService',
  'sw4rm.tool.ToolService',
  'sw4rm.hitl.HitlService',
  'sw4rm.negotiation.NegotiationService',
  'sw4rm.negotiation_room.NegotiationRoomService',
  'sw4rm.handoff.HandoffService',
  'sw4rm.workflow.WorkflowService',
  'sw4rm.connector.ConnectorService',
  'sw4rm.reasoning.ReasoningProxy',
  'sw4rm.activity.ActivityService',
  'sw4rm.logging.LoggingService',
]);

/** Parsed definitions by folder: parsing the 17 files is most of a server's start, and they do not change. */
const parsed = new Map<string, protoLoader.PackageDefinition>();

/**
 * Loads all canonical files from protosDir (once per folder and thread: later calls answer the same definition, which
 * nothing mutates). The result's keys are fully-qualified names.
 */
export function loadPackageDefinition(protosDir: string): protoLoader.PackageDefinition {
  let definition = parsed.get(protosDir);
  if (!definition) {
    definition = protoLoader.loadSync([...PROTO_FILES], { ...LOADER_OPTIONS, includeDirs: [protosDir] });
    parsed.set(protosDir, definition);
  }
  return definition;
}

/** Loads all canonical files from protosDir as a grpc-js object tree (e.g. `tree.sw4rm.router.RouterService`). */
export function loadProtos(protosDir: string): grpc.GrpcObject {
  return grpc.loadPackageDefinition(loadPackageDefinition(protosDir));
}

/** Both forms at once, for a server that needs service definitions and a client tree from one parse. */
export function loadCanonicalProtos(protosDir: string): {
  packageDefinition: protoLoader.PackageDefinition;
  grpcObject: grpc.GrpcObject;
} {
  const packageDefinition = loadPackageDefinition(protosDir);
  return { packageDefinition, grpcObject: grpc.loadPackageDefinition(packageDefinition) };
}

/**
 * Returns the service definition for a fully-qualified service name, ready for `server.addService()`.
 * Throws when the name is unknown or names a message or enum rather than a service.
 */
export function serviceDefinition(
  packageDefinition: protoLoader.PackageDefinition,
  fullName: string,
): grpc.ServiceDefinition {
  const entry = Object.prototype.hasOwnProperty.call(packageDefinition, fullName)
    ? packageDefinition[fullName]
    : undefined;
  if (entry === undefined) {
    throw new Error(`No service named ${fullName} in the package definition`);
  }
  if (!isServiceDefinition(entry)) {
    throw new Error(`${fullName} is a message or enum type, not a service`);
  }
  return entry as unknown as grpc.ServiceDefinition;
}

function isServiceDefinition(entry: protoLoader.AnyDefinition): entry is protoLoader.ServiceDefinition {
  // Message and enum definitions carry a `format` string; service definitions map method names to methods.
  return !('format' in entry && typeof entry.format === 'string');
}
