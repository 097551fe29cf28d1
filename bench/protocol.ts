import * as grpc from '@grpc/grpc-js';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { loadCanonicalProtos } from '../src/server/protos';

/** The compiled bench lives in out/bench/; the repository root is two folders up. */
export const REPO_ROOT = path.resolve(__dirname, '..', '..');
export const PROTOS_DIR = path.join(REPO_ROOT, 'protos');

/** The Envelope as @grpc/proto-loader presents it with the project's LOADER_OPTIONS (longs and enums as strings). */
export interface Envelope {
  message_id: string;
  idempotency_token?: string;
  producer_id: string;
  correlation_id: string;
  sequence_number: string;
  retry_count?: number;
  message_type: string;
  content_type: string;
  content_length: string;
  timestamp?: { seconds: string; nanos: number };
  payload: Buffer;
}

export interface StreamItem {
  msg: Envelope | null;
  seq: string;
}

export interface SendMessageResponse {
  accepted: boolean;
  reason: string;
}

export interface DeliveryAckResponse {
  recorded: boolean;
}

export interface RouterClient extends grpc.Client {
  SendMessage(
    request: { msg: Envelope },
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<SendMessageResponse>,
  ): grpc.ClientUnaryCall;
  StreamIncoming(request: { agent_id: string }, metadata: grpc.Metadata): grpc.ClientReadableStream<StreamItem>;
  AckDelivery(
    request: { agent_id: string; seq: string; message_id: string; outcome: string },
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<DeliveryAckResponse>,
  ): grpc.ClientUnaryCall;
}

export interface RegistryClient extends grpc.Client {
  RegisterAgent(
    request: { agent: Record<string, unknown> },
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<{ accepted: boolean; reason: string }>,
  ): grpc.ClientUnaryCall;
  Heartbeat(
    request: { agent_id: string; state: string; health: Record<string, string> },
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<{ ok: boolean }>,
  ): grpc.ClientUnaryCall;
  DeregisterAgent(
    request: { agent_id: string; reason: string },
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<{ ok: boolean }>,
  ): grpc.ClientUnaryCall;
}

type ClientConstructor<T> = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => T;

interface CanonicalTree {
  sw4rm: {
    router: { RouterService: ClientConstructor<RouterClient> };
    registry: { RegistryService: ClientConstructor<RegistryClient> };
  };
}

let canonical: ReturnType<typeof loadCanonicalProtos> | undefined;

/** Parses the canonical protos once per process. */
export function canonicalProtos(): ReturnType<typeof loadCanonicalProtos> {
  canonical ??= loadCanonicalProtos(PROTOS_DIR);
  return canonical;
}

/**
 * Client channel options: large HTTP/2 flow-control windows and message limits, and a local subchannel pool so
 * that every agent role gets its own TCP connection instead of sharing grpc-js's global one.
 */
export const CLIENT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.use_local_subchannel_pool': 1,
  'grpc-node.flow_control_window': 16 * 1024 * 1024,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
};

/** One channel per agent role; the registry client of that role shares the router client's channel. */
export interface RoleClients {
  readonly router: RouterClient;
  readonly registry: RegistryClient;
  close(): void;
}

export function createRoleClients(address: string, role: string): RoleClients {
  const tree = canonicalProtos().grpcObject as unknown as CanonicalTree;
  const router = new tree.sw4rm.router.RouterService(address, grpc.credentials.createInsecure(), {
    ...CLIENT_CHANNEL_OPTIONS,
    'grpc.primary_user_agent': `sw4rm-bench-${role}`,
  });
  const registry = new tree.sw4rm.registry.RegistryService(address, grpc.credentials.createInsecure(), {
    channelOverride: router.getChannel(),
  });
  return {
    router,
    registry,
    close: () => {
      registry.close();
      router.close();
    },
  };
}

export function unary<Res>(invoke: (callback: grpc.requestCallback<Res>) => grpc.ClientUnaryCall): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke((err, response) => (err ? reject(err) : resolve(response as Res)));
  });
}

export function isServiceError(err: unknown): err is grpc.ServiceError {
  return typeof err === 'object' && err !== null && 'code' in err && 'details' in err;
}

export function timestampNow(): { seconds: string; nanos: number } {
  const ms = Date.now();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

/** A JSON DATA payload addressed to `to`, padded to `bytes` (or the shortest possible if `bytes` is smaller). */
export function dataPayload(to: string, n: number, bytes: number): Buffer {
  const base = JSON.stringify({ to, n, pad: '' });
  const pad = 'x'.repeat(Math.max(0, bytes - Buffer.byteLength(base)));
  return Buffer.from(JSON.stringify({ to, n, pad }));
}

export function dataEnvelope(producerId: string, sequence: number, payload: Buffer): Envelope {
  return {
    message_id: randomUUID(),
    producer_id: producerId,
    correlation_id: randomUUID(),
    sequence_number: String(sequence),
    message_type: 'DATA',
    content_type: 'application/json',
    content_length: String(payload.length),
    timestamp: timestampNow(),
    payload,
  };
}

export function ackEnvelope(producerId: string, sequence: number, acked: Envelope, stage: string): Envelope {
  const payload = Buffer.from(JSON.stringify({ ack_for_message_id: acked.message_id, ack_stage: stage }));
  return {
    message_id: randomUUID(),
    producer_id: producerId,
    correlation_id: acked.correlation_id || randomUUID(),
    sequence_number: String(sequence),
    message_type: 'ACKNOWLEDGEMENT',
    content_type: 'application/json',
    content_length: String(payload.length),
    timestamp: timestampNow(),
    payload,
  };
}

export interface AckPayload {
  ack_for_message_id?: string;
  ack_stage?: string | number;
  error_code?: string | number;
  note?: string;
}

export function parseAck(payload: Buffer): AckPayload | undefined {
  try {
    const value: unknown = JSON.parse(payload.toString('utf8'));
    return typeof value === 'object' && value !== null ? (value as AckPayload) : undefined;
  } catch {
    return undefined;
  }
}

export function isStage(stage: string | number | undefined, name: string, number: number): boolean {
  return stage === name || stage === number || stage === String(number);
}
