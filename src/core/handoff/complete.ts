import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { Speaker } from '../policy/model';
import { TERMINAL_TASK_STATES } from '../scheduler/model';
import { partyOf, speakerName } from './access';
import type { HandoffChanges } from './changes';
import type { HandoffTasks } from './deps';
import type { HandoffRecord, HandoffRepository } from './model';
import type { HandoffNotices } from './notices';
import { denied, identifier, invalid, LIMITS, notFound, precondition } from './refusals';
import { completed, type HandoffMemory, type OpenRecord } from './state';

export interface CompleteDeps {
  readonly clock: Clock;
  readonly guard: Guard;
  readonly handoffs: Pick<HandoffRepository, 'get' | 'put'>;
  readonly tasks: Pick<HandoffTasks, 'task' | 'handOff'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly notices: HandoffNotices;
  /** leaving.ts. */
  readonly acceptorGone: (record: HandoffRecord) => string | undefined;
  readonly acceptorLeft: (record: OpenRecord, why: string) => void;
}

/**
 * CompleteHandoff(COMPLETED): a party (the requester or the accepting agent) or the operator; ACCEPTED only. The work
 * is transferred: the task handed off (if any) is closed (Scheduler.handOff), and from now on the router refuses the
 * requester's sends with the handoff's correlation id. Any other status is refused: CancelDelegation withdraws a handoff.
 */
export function complete(
  deps: CompleteDeps,
  requestId: string,
  status: string,
  speaker: Speaker,
  ctx: CallContext,
): { readonly success: boolean; readonly message: string } {
  identifier('request_id', requestId, LIMITS.request_id, true);
  if (status !== 'COMPLETED') {
    throw invalid(
      `status must be COMPLETED, not ${status || 'HANDOFF_STATUS_UNSPECIFIED'}: CompleteHandoff records that the work was transferred; to withdraw a handoff call CancelDelegation, to decline one RejectHandoff`,
    );
  }
  const { memory, changes, tasks } = deps;
  const record = memory.get(requestId) ?? deps.handoffs.get(requestId);
  if (!record) throw notFound(requestId);
  const party = partyOf(record, speaker);
  if (party === undefined) {
    throw denied(
      `only the parties of handoff '${requestId}' (its origin and the agent that accepted it) or the operator may complete it; ${speakerName(speaker)} is neither`,
    );
  }
  if (record.state === 'COMPLETED')
    return { success: true, message: `handoff '${requestId}' was already completed by ${record.completedBy}` };
  if (record.state !== 'ACCEPTED')
    throw precondition(`handoff '${requestId}' is ${record.state}: only an ACCEPTED handoff can be completed`);
  const gone = deps.acceptorGone(record);
  if (gone !== undefined) {
    // Its departure is recorded now (it goes back to PENDING) if that could not be done when it happened.
    deps.guard.run('acceptor_left', () => deps.acceptorLeft(memory.get(requestId)!, gone));
    throw precondition(
      `handoff '${requestId}' cannot be completed: the accepting agent '${record.acceptedBy}' is not registered or failed (${gone}); it goes back to PENDING for another agent`,
    );
  }
  const open = memory.get(requestId)!;
  const hctx: CallContext = { ...ctx, correlationId: open.correlationId };
  let closing = false;
  const done = changes.change(
    open,
    (draft, tx) => {
      completed(draft, party, deps.clock.now());
      deps.handoffs.put(draft);
      const notices: Record<string, unknown> = {};
      for (const to of new Set([draft.fromAgent, draft.acceptedBy])) {
        if (!to.startsWith('operator:'))
          notices[to] = deps.notices.toParty(draft, to, 'completed', { completed_by: party }, hctx);
      }
      const task = draft.taskId === '' ? undefined : tasks.task(draft.taskId);
      closing = task !== undefined && !TERMINAL_TASK_STATES.has(task.state);
      changes.event(draft, party, 'handoff.completed', {
        completed_by: party,
        accepted_by: draft.acceptedBy,
        task_id: draft.taskId || undefined,
        task_closed: draft.taskId === '' ? undefined : closing,
        task_state: closing ? 'CANCELLED' : task?.state,
        transferred: { from_agent: draft.fromAgent, correlation_id: draft.correlationId },
        principal: ctx.principal,
        notices,
      });
      // Last: the scheduler changes its memory as it closes the task (nothing of ours can fail after it).
      if (closing)
        closing =
          tasks.handOff(draft.taskId, `handed off to ${draft.acceptedBy} by handoff ${draft.requestId}`, hctx) !==
          undefined;
      const entry = {
        requestId,
        fromAgent: draft.fromAgent,
        correlationId: draft.correlationId,
        acceptedBy: draft.acceptedBy,
      };
      tx.install(() => memory.addTransfer(entry));
    },
    'complete',
  );
  const task =
    done.taskId === '' ? '' : closing ? `; task '${done.taskId}' closed` : `; task '${done.taskId}' had ended already`;
  return {
    success: true,
    message: `handoff '${requestId}' completed: '${done.acceptedBy}' owns the work (correlation_id '${done.correlationId}')${task}`,
  };
}
