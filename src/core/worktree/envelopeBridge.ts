import { DisposableStore, type Disposable } from '../events';
import type { EventLog } from '../log/eventLog';
import type { Refusal } from '../router/envelope';
import type { CoordinatorMailbox } from '../router/model';
import {
  BINDINGS_COMPONENT,
  BindingRequestError,
  BindingStateError,
  type BindingStatus,
  type WorktreeBindings,
} from './bindings';

/** The message type of WORKTREE_CONTROL envelopes, and of the coordinator's replies to them. */
export const WORKTREE_CONTROL = 'WORKTREE_CONTROL';

/** RFC §16: the seven WORKTREE_CONTROL operations, as the payload's `action` names them (any case). */
export const WORKTREE_ACTIONS = [
  'bind',
  'unbind',
  'switch_request',
  'switch_approve',
  'switch_reject',
  'switch_revoke',
  'status',
] as const;
export type WorktreeAction = (typeof WORKTREE_ACTIONS)[number];

/** message-types.txt's "Switch Context" example calls SWITCH_REQUEST `switch`. */
const ALIASES: Readonly<Record<string, WorktreeAction>> = { switch: 'switch_request' };

function text(json: Record<string, unknown>, ...names: string[]): string {
  for (const name of names) {
    const value = json[name];
    if (typeof value === 'string') return value;
  }
  return '';
}

/** The coordinator's reply to a WORKTREE_CONTROL envelope: the binding after the operation. */
export function statusJson(action: WorktreeAction, b: BindingStatus): Record<string, unknown> {
  return {
    type: 'WORKTREE_STATUS',
    action,
    ok: true,
    agent_id: b.agentId,
    state: b.state,
    repo_id: b.repoId,
    worktree_id: b.worktreeId,
    home_worktree_id: b.homeWorktreeId,
    worktree_path: b.worktreePath,
    ...(b.switch ? { target_worktree_id: b.switch.targetWorktreeId, invocation_id: b.switch.invocationId } : {}),
    ...(b.nonHomeUntil !== null ? { until_ms: b.nonHomeUntil } : {}),
    ...(b.failure ? { reason: b.failure.reason, error: b.failure.detail, retries: b.failure.retries } : {}),
  };
}

function errorJson(action: WorktreeAction, agentId: string, err: unknown): Record<string, unknown> {
  const code =
    err instanceof BindingRequestError
      ? err.code
      : err instanceof BindingStateError
        ? 'VALIDATION_ERROR'
        : 'INTERNAL_ERROR';
  return {
    type: 'WORKTREE_STATUS',
    action,
    ok: false,
    agent_id: agentId,
    error_code: code,
    error: err instanceof Error ? err.message : String(err),
  };
}

/**
 * WORKTREE_CONTROL over the messaging plane: an envelope addressed to `coordinator` with a JSON payload
 * `{"action": "bind" | "unbind" | "switch_request" | "switch_approve" | "switch_reject" | "switch_revoke" | "status", …}`
 * acts on the producer's own binding; the reply (a WORKTREE_CONTROL envelope `{"type":"WORKTREE_STATUS", …}` with
 * the request's correlation_id) commits with the transition. SWITCH_APPROVE and SWITCH_REJECT are an operator's:
 * an agent's envelope asking for them is refused PERMISSION_DENIED.
 */
export function bindWorktreeControlToRouter(
  bindings: WorktreeBindings,
  router: CoordinatorMailbox,
  log: EventLog,
): Disposable {
  const store = new DisposableStore();
  store.add(
    router.handleAtCoordinator(WORKTREE_CONTROL, (envelope, json, ctx): Refusal | undefined => {
      if (!json)
        return {
          code: 'VALIDATION_ERROR',
          detail: 'a WORKTREE_CONTROL to the coordinator carries a JSON object payload (content_type application/json)',
        };
      const named = text(json, 'action', 'operation').trim().toLowerCase();
      const action =
        ALIASES[named] ??
        ((WORKTREE_ACTIONS as readonly string[]).find((a) => a === named) as WorktreeAction | undefined);
      if (!action)
        return {
          code: 'VALIDATION_ERROR',
          detail: `action must be one of ${WORKTREE_ACTIONS.join(', ')}, not ${JSON.stringify(json.action ?? json.operation ?? null)}`,
        };
      const agentId = text(json, 'agent_id') || envelope.producerId;
      if (agentId !== envelope.producerId) {
        return {
          code: 'PERMISSION_DENIED',
          detail: `an agent acts on its own binding: agent_id '${agentId.slice(0, 80)}' is not the producer`,
        };
      }
      if (action === 'switch_approve' || action === 'switch_reject') {
        return {
          code: 'PERMISSION_DENIED',
          detail: `${action.toUpperCase()} is an operator action (ApproveSwitch/RejectSwitch with the operator credential, or the WORKTREE_OVERRIDE approval)`,
        };
      }
      const reply = (payload: Record<string, unknown>) =>
        router.replyFromCoordinator(envelope.messageId, WORKTREE_CONTROL, payload, {
          correlationId: envelope.correlationId,
        });
      const within = (b: BindingStatus) => reply(statusJson(action, b));
      const answerError = (err: unknown) => {
        try {
          reply(errorJson(action, agentId, err));
        } catch (failed) {
          log.internalError(BINDINGS_COMPONENT, ctx.correlationId, failed, { message_id: envelope.messageId });
        }
      };
      let started: Promise<BindingStatus>;
      try {
        switch (action) {
          case 'status':
            within(bindings.status(agentId));
            return undefined;
          case 'bind':
            started = bindings.bind(agentId, text(json, 'repo_id'), text(json, 'worktree_id'), ctx, within);
            break;
          case 'unbind':
            started = bindings.unbind(agentId, ctx, within);
            break;
          case 'switch_request': {
            const repo = text(json, 'new_repo_id', 'target_repo_id');
            const current = bindings.status(agentId);
            if (repo !== '' && repo !== current.repoId) {
              return {
                code: 'VALIDATION_ERROR',
                detail: `a switch stays in the bound repository '${current.repoId}'; '${repo.slice(0, 80)}' is another one`,
              };
            }
            const requiresHitl = typeof json.requires_hitl === 'boolean' ? json.requires_hitl : true;
            started = bindings.requestSwitch(
              agentId,
              text(json, 'target_worktree_id', 'new_worktree_id', 'worktree_id'),
              ctx,
              { requiresHitl, reason: text(json, 'reason', 'purpose') || undefined },
              within,
            );
            break;
          }
          case 'switch_revoke':
            started = bindings.revokeSwitch(agentId, agentId, ctx, within);
            break;
        }
      } catch (err) {
        if (err instanceof BindingRequestError)
          return {
            code: err.code === 'PERMISSION_DENIED' ? 'PERMISSION_DENIED' : 'VALIDATION_ERROR',
            detail: err.message,
          };
        throw err;
      }
      // An operation refused once it ran (an illegal transition, an unknown target) is answered with ok false.
      started.catch(answerError);
      return undefined;
    }),
  );
  return store;
}
