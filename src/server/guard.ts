import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../core/coordinator';
import type { Disposable } from '../core/events';
import { principalOf } from './auth';
import { callContext } from './callContext';
import { firstRefusal, type IdentityRule } from './identity';

type Handler = grpc.UntypedHandleCall;
type StreamCall = grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;

/**
 * Identity enforcement, written once (README, "Security model"): every handler of every service — built or
 * UNIMPLEMENTED — is wrapped so that, before it runs, each agent the request claims to act as (its rule in
 * identity.ts) is checked against the caller's principal. A refusal answers PERMISSION_DENIED and is logged
 * (`auth.permission_denied`). Streams opened with a credential end (UNAUTHENTICATED) as soon as it is revoked.
 */
export class IdentityGuard implements Disposable {
  /** credential id → the streams opened with it that are still open. */
  private readonly streams = new Map<string, Set<StreamCall>>();
  private readonly subscription: Disposable;

  constructor(private readonly coordinator: Coordinator) {
    this.subscription = coordinator.credentials.onDidChange((change) => {
      if (change.kind === 'revoked') this.endStreams(change.credential.id);
    });
  }

  wrap(path: string, definition: { readonly responseStream: boolean; readonly requestStream: boolean }, rule: IdentityRule, handler: Handler): Handler {
    if (definition.requestStream) {
      // No canonical RPC streams requests; one that did would need its claims checked per message.
      throw new Error(`${path}: identity checks of request streams are not supported`);
    }
    if (definition.responseStream) {
      return (call: StreamCall) => {
        const refusal = this.refusal(path, rule, call as StreamCall & { readonly request: unknown });
        if (refusal !== undefined) {
          call.emit('error', refusal);
          return;
        }
        if (this.track(call)) (handler as (call: StreamCall) => void)(call);
      };
    }
    return (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const refusal = this.refusal(path, rule, call);
      if (refusal !== undefined) {
        callback(refusal);
        return;
      }
      (handler as grpc.handleUnaryCall<unknown, unknown>)(call, callback);
    };
  }

  dispose(): void {
    this.subscription.dispose();
    this.streams.clear();
  }

  /** PERMISSION_DENIED for a call acting as an agent its principal may not act as; undefined when it may go on. */
  private refusal(path: string, rule: IdentityRule, call: { readonly request: unknown; readonly metadata: grpc.Metadata }): Partial<grpc.StatusObject> | undefined {
    const principal = principalOf(call);
    if (principal === undefined || principal.kind === 'operator') return undefined; // auth none, or the operator
    const { credentials } = this.coordinator;
    if (rule.operatorOnly) {
      credentials.recordDenial(path, principal, '', 'operator only', callContext(call, this.coordinator.ids));
      return { code: grpc.status.PERMISSION_DENIED, details: `${path} is for the operator only (the token in the data folder), not an ${principal.kind} credential` };
    }
    if (rule.actsAs.length === 0) return undefined;
    const denied = firstRefusal(rule, call.request, call.metadata, (agentId) => credentials.refusal(principal, agentId, rule.registers === true));
    if (denied === undefined) return undefined;
    credentials.recordDenial(path, principal, denied.agentId, denied.reason, callContext(call, this.coordinator.ids));
    return { code: grpc.status.PERMISSION_DENIED, details: `PERMISSION_DENIED: ${denied.reason}` };
  }

  /** Remembers an open stream under its credential; false when that credential is no longer active. */
  private track(call: StreamCall): boolean {
    const principal = principalOf(call);
    if (principal === undefined || principal.kind === 'operator') return true;
    const id = principal.credentialId;
    if (!this.coordinator.credentials.isActive(id)) {
      // Revoked between authentication and now: the stream never opens.
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: `credential ${id} was revoked` });
      return false;
    }
    let open = this.streams.get(id);
    if (open === undefined) this.streams.set(id, (open = new Set()));
    open.add(call);
    const forget = () => {
      open.delete(call);
      if (open.size === 0 && this.streams.get(id) === open) this.streams.delete(id);
    };
    call.once('close', forget);
    call.once('cancelled', forget);
    call.once('error', forget);
    call.once('finish', forget);
    return true;
  }

  private endStreams(credentialId: string): void {
    const open = this.streams.get(credentialId);
    if (open === undefined) return;
    this.streams.delete(credentialId);
    for (const call of open) {
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: `credential ${credentialId} was revoked: this stream ends` });
    }
  }
}
