import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../core/coordinator';
import type { Disposable } from '../core/events';
import { principalOf } from './auth';
import { callContext } from './callContext';
import { firstRefusal, type IdentityRule } from './identity';

type Handler = grpc.UntypedHandleCall;
type StreamCall = grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;
/** The events that end a call, after which it is forgotten (a unary call is also forgotten when it answers). */
const STREAM_END_EVENTS: readonly string[] = ['close', 'cancelled', 'error', 'finish'];
const UNARY_END_EVENTS: readonly string[] = ['cancelled'];
/** A call in flight under a credential: `revoke` stops its work (as a client cancel would) and answers UNAUTHENTICATED. */
interface Bound {
  revoke(details: string): void;
}

/**
 * Identity enforcement, written once (README, "Security model"): every handler of every service — built or
 * UNIMPLEMENTED — is wrapped so that, before it runs, each agent the request claims to act as (its rule in
 * identity.ts) is checked against the caller's principal. A refusal answers PERMISSION_DENIED and is logged
 * (`auth.permission_denied`). Every call opened with a credential — unary or streamed — ends (UNAUTHENTICATED) as soon
 * as it is revoked: the handler first sees its call 'cancelled' (so a tool call is abandoned and its process killed, a
 * WaitForDecision or HITL wait stops waiting, exactly as on a client cancel), then the call is answered UNAUTHENTICATED
 * and whatever the handler answers later is dropped.
 */
export class IdentityGuard implements Disposable {
  /** credential id → the calls opened with it that are still open. */
  private readonly streams = new Map<string, Set<Bound>>();
  private readonly subscription: Disposable;

  constructor(private readonly coordinator: Coordinator) {
    this.subscription = coordinator.credentials.onDidChange((change) => {
      if (change.kind === 'revoked') this.endStreams(change.credential.id);
    });
  }

  wrap(
    path: string,
    definition: { readonly responseStream: boolean; readonly requestStream: boolean },
    rule: IdentityRule,
    handler: Handler,
  ): Handler {
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
        const bound: Bound = {
          revoke: (details) => {
            call.emit('cancelled', 'revoked');
            call.emit('error', { code: grpc.status.UNAUTHENTICATED, details });
          },
        };
        if (this.track(call, STREAM_END_EVENTS, bound, (status) => call.emit('error', status)))
          (handler as (call: StreamCall) => void)(call);
      };
    }
    return (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const refusal = this.refusal(path, rule, call);
      if (refusal !== undefined) {
        callback(refusal);
        return;
      }
      let answered = false;
      let forget = (): void => undefined;
      const answer: grpc.sendUnaryData<unknown> = (...args) => {
        if (answered) return;
        answered = true;
        forget();
        callback(...args);
      };
      const bound: Bound = {
        revoke: (details) => {
          if (answered) return;
          call.emit('cancelled', 'revoked');
          answer({ code: grpc.status.UNAUTHENTICATED, details });
        },
      };
      // grpc-js emits only 'cancelled' on a unary call (a client cancel, a deadline); else the call ends with its answer.
      const tracked = this.track(call, UNARY_END_EVENTS, bound, (status) => answer(status));
      if (tracked === false) return;
      forget = tracked === true ? forget : tracked;
      (handler as grpc.handleUnaryCall<unknown, unknown>)(call, answer);
    };
  }

  dispose(): void {
    this.subscription.dispose();
    this.streams.clear();
  }

  /** PERMISSION_DENIED for a call acting as an agent its principal may not act as; undefined when it may go on. */
  private refusal(
    path: string,
    rule: IdentityRule,
    call: { readonly request: unknown; readonly metadata: grpc.Metadata },
  ): Partial<grpc.StatusObject> | undefined {
    const principal = principalOf(call);
    if (principal === undefined || principal.kind === 'operator') return undefined; // auth none, or the operator
    const { credentials } = this.coordinator;
    if (rule.operatorOnly) {
      credentials.recordDenial(path, principal, '', 'operator only', callContext(call, this.coordinator.ids));
      return {
        code: grpc.status.PERMISSION_DENIED,
        details: `${path} is for the operator only (the token in the data folder), not an ${principal.kind} credential`,
      };
    }
    if (rule.actsAs.length === 0) return undefined;
    const denied = firstRefusal(rule, call.request, call.metadata, (agentId) =>
      credentials.refusal(principal, agentId, rule.registers === true),
    );
    if (denied === undefined) return undefined;
    credentials.recordDenial(path, principal, denied.agentId, denied.reason, callContext(call, this.coordinator.ids));
    return { code: grpc.status.PERMISSION_DENIED, details: `PERMISSION_DENIED: ${denied.reason}` };
  }

  /**
   * Remembers an open call under its credential: false (after refusing it) when that credential is no longer active,
   * true when no credential is involved, else the function that forgets it.
   */
  private track(
    call: grpc.ServerUnaryCall<unknown, unknown> | StreamCall,
    endEvents: readonly string[],
    bound: Bound,
    refuse: (status: Partial<grpc.StatusObject>) => void,
  ): boolean | (() => void) {
    const principal = principalOf(call);
    if (principal === undefined || principal.kind === 'operator') return true;
    const id = principal.credentialId;
    if (!this.coordinator.credentials.isActive(id)) {
      // Revoked between authentication and now: the call never starts.
      refuse({ code: grpc.status.UNAUTHENTICATED, details: `credential ${id} was revoked` });
      return false;
    }
    let open = this.streams.get(id);
    if (open === undefined) this.streams.set(id, (open = new Set()));
    open.add(bound);
    const forget = () => {
      open.delete(bound);
      if (open.size === 0 && this.streams.get(id) === open) this.streams.delete(id);
    };
    const events = call as unknown as NodeJS.EventEmitter;
    for (const event of endEvents) events.once(event, forget);
    return forget;
  }

  private endStreams(credentialId: string): void {
    const open = this.streams.get(credentialId);
    if (open === undefined) return;
    this.streams.delete(credentialId);
    for (const bound of [...open]) bound.revoke(`credential ${credentialId} was revoked: this call ends`);
  }
}
