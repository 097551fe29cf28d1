import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import * as http2 from 'node:http2';
import type { Claim } from '../../src/server/identity';
import { canonicalDefinition } from './clients';

/** How a call ended: a status, or `open` for a stream still open when we stopped waiting (it was let through). */
export interface CallOutcome {
  readonly code: grpc.status | 'open';
  readonly details: string;
  readonly metadata?: grpc.Metadata;
  readonly response?: unknown;
}

/** Every canonical RPC by its path, with what a generic client needs to call it. */
export function canonicalMethods(
  definition: protoLoader.PackageDefinition = canonicalDefinition(),
): Map<string, protoLoader.MethodDefinition<object, object>> {
  const methods = new Map<string, protoLoader.MethodDefinition<object, object>>();
  for (const entry of Object.values(definition)) {
    if ('format' in entry) continue;
    for (const method of Object.values(entry as protoLoader.ServiceDefinition)) methods.set(method.path, method);
  }
  return methods;
}

/**
 * Calls any RPC by path with a plain grpc.Client. A unary call answers its status (OK with its response); a server
 * stream answers its status if it ends within `openMs`, else `open` (and is cancelled).
 */
export function callPath(
  client: grpc.Client,
  method: protoLoader.MethodDefinition<object, object>,
  request: object,
  metadata: grpc.Metadata,
  openMs = 400,
): Promise<CallOutcome> {
  const deadline = Date.now() + 5_000;
  return new Promise((resolve) => {
    if (!method.responseStream) {
      let initial: grpc.Metadata | undefined;
      const call = client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        metadata,
        { deadline },
        (err, response) =>
          resolve(
            err
              ? { code: err.code, details: err.details, metadata: initial }
              : { code: grpc.status.OK, details: '', metadata: initial, response },
          ),
      );
      call.on('metadata', (m) => {
        initial = m;
      });
      return;
    }
    const stream = client.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      metadata,
      {},
    );
    let settled = false;
    const settle = (outcome: CallOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const timer = setTimeout(() => {
      settle({ code: 'open', details: '' });
      stream.cancel();
    }, openMs);
    stream.on('data', () => undefined);
    stream.on('error', (err: grpc.ServiceError) => settle({ code: err.code, details: err.details }));
    stream.on('status', (status: grpc.StatusObject) => settle({ code: status.code, details: status.details }));
  });
}

/** A request (and metadata) in which `claim` names `agentId`, everything else left at its default. */
export function claimingRequest(
  claim: Claim,
  agentId: string,
): { request: Record<string, unknown>; metadata: Record<string, string> } {
  if ('metadata' in claim) return { request: {}, metadata: { [claim.metadata]: agentId } };
  if ('json' in claim)
    return { request: { [claim.json]: Buffer.from(JSON.stringify({ [claim.keys[0]]: agentId })) }, metadata: {} };
  const parts = claim.field.split('.');
  const request: Record<string, unknown> = {};
  let node = request;
  for (const part of parts.slice(0, -1)) node = (node[part] = {}) as Record<string, unknown>;
  node[parts[parts.length - 1]] = agentId;
  return { request, metadata: {} };
}

export function describeClaim(claim: Claim): string {
  if ('field' in claim) return claim.field;
  if ('metadata' in claim) return `metadata ${claim.metadata}`;
  return `${claim.json} JSON ${claim.keys[0]}`;
}

/**
 * Sends one request over raw HTTP/2 with the given header fields repeated as given (grpc-js clients refuse to send
 * two `authorization` values), and answers the grpc-status and grpc-message of the answer.
 */
export function rawGrpcCall(
  port: number,
  path: string,
  headers: Array<[string, string]>,
): Promise<{ status: string; message: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`, {
      strictSingleValueFields: false,
    } as http2.SecureClientSessionOptions);
    session.on('error', reject);
    const raw: string[] = [':method', 'POST', ':path', path, 'content-type', 'application/grpc', 'te', 'trailers'];
    for (const [name, value] of headers) raw.push(name, value);
    const stream = session.request(raw as unknown as http2.OutgoingHttpHeaders);
    let status = '';
    let message = '';
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
      if (h['grpc-message'] !== undefined) message = decodeURIComponent(String(h['grpc-message']));
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('data', () => undefined);
    stream.on('error', reject);
    stream.on('close', () => {
      session.close();
      resolve({ status, message });
    });
    stream.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}
