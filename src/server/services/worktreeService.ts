import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { BindingRequestError, type BindingStatus } from '../../core/worktree/bindings';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';

interface StatusResponse {
  repo_id: string;
  worktree_id: string;
  state: string;
}

function statusResponse(b: BindingStatus): StatusResponse {
  return { repo_id: b.repoId, worktree_id: b.worktreeId, state: b.state };
}

/** The gRPC status of a refused operation (statusOf: BindingRequestError by its kind, BindingStateError FAILED_PRECONDITION). */
const errorStatus = statusOf;

/** Who may approve or reject a switch: only the operator credential (an agent may not approve its own, or any). */
function operatorOf(call: { readonly metadata: grpc.Metadata }): string | undefined {
  return principalOf(call)?.kind === 'operator' ? 'operator' : undefined;
}

const OPERATOR_ONLY =
  'PERMISSION_DENIED: approving or rejecting a worktree switch is an operator action: call it with the operator credential, ' +
  'or decide the WORKTREE_OVERRIDE approval in the editor or the operator console (with auth none there is no operator credential)';

/**
 * sw4rm.worktree.WorktreeService over the core's WorktreeBindings (RFC §16): Bind, Unbind, RequestSwitch, Status for
 * the agent the caller acts as (identity.ts checks agent_id); ApproveSwitch and RejectSwitch for the operator only.
 */
export class WorktreeServiceAdapter {
  static readonly serviceName = 'sw4rm.worktree.WorktreeService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { worktrees, ids, store } = this.coordinator;
    type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void;
    const run =
      <Req, Res>(work: (call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>): Unary<Req, Res> =>
      (call, callback) => {
        let started: Promise<Res>;
        try {
          started = work(call);
        } catch (err) {
          callback(errorStatus(err));
          return;
        }
        started.then(
          (response) => answerWhenDurable(store, callback, response),
          (err: unknown) => callback(errorStatus(err)),
        );
      };
    return {
      Bind: run<{ agent_id?: string; repo_id?: string; worktree_id?: string }, { ok: boolean; reason: string }>(
        async (call) => {
          const { agent_id = '', repo_id = '', worktree_id = '' } = call.request;
          const b = await worktrees.bind(agent_id, repo_id, worktree_id, callContext(call, ids));
          return b.state === 'BIND_FAILED'
            ? { ok: false, reason: `${b.failure!.reason}: ${b.failure!.detail}` }
            : { ok: true, reason: '' };
        },
      ),
      Unbind: run<{ agent_id?: string }, { ok: boolean }>(async (call) => {
        await worktrees.unbind(call.request.agent_id ?? '', callContext(call, ids));
        return { ok: true };
      }),
      RequestSwitch: run<{ agent_id?: string; target_worktree_id?: string; requires_hitl?: boolean }, StatusResponse>(
        async (call) => {
          const { agent_id = '', target_worktree_id = '', requires_hitl = false } = call.request;
          return statusResponse(
            await worktrees.requestSwitch(agent_id, target_worktree_id, callContext(call, ids), {
              requiresHitl: requires_hitl,
            }),
          );
        },
      ),
      ApproveSwitch: run<{ agent_id?: string; target_worktree_id?: string; ttl_ms?: string | number }, StatusResponse>(
        async (call) => {
          const operator = operatorOf(call);
          if (!operator)
            throw new BindingRequestError(
              'permission_denied',
              'PERMISSION_DENIED',
              OPERATOR_ONLY.replace(/^PERMISSION_DENIED: /, ''),
            );
          const { agent_id = '', target_worktree_id = '', ttl_ms = 0 } = call.request;
          return statusResponse(
            await worktrees.approveSwitch(
              agent_id,
              target_worktree_id,
              Number(ttl_ms),
              operator,
              callContext(call, ids),
            ),
          );
        },
      ),
      RejectSwitch: run<{ agent_id?: string; reason?: string }, StatusResponse>(async (call) => {
        const operator = operatorOf(call);
        if (!operator)
          throw new BindingRequestError(
            'permission_denied',
            'PERMISSION_DENIED',
            OPERATOR_ONLY.replace(/^PERMISSION_DENIED: /, ''),
          );
        const { agent_id = '', reason = '' } = call.request;
        return statusResponse(await worktrees.rejectSwitch(agent_id, reason, operator, callContext(call, ids)));
      }),
      Status: run<{ agent_id?: string }, StatusResponse>(async (call) => {
        const agentId = call.request.agent_id ?? '';
        if (agentId.trim() === '')
          throw new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', 'agent_id is required');
        return statusResponse(worktrees.status(agentId));
      }),
    };
  }
}
