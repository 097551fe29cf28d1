import { isoUtc } from '../clock';
import { type HitlInvocation, parseInvocationRequest } from '../hitl/model';
import { TERMINAL_TASK_STATES, type TaskRecord, describeWaiting } from '../scheduler/model';
import type { NodeRecord, WorkflowNodeDefinition, WorkflowRecord, WorkflowState } from './model';
import { firstOf, MAX_AUTOMATIC_RETRIES, nodeOf, type LiveWorkflow } from './state';

/**
 * What the engine tells: the HITL question about a FAILED node (a TASK_ESCALATION to a person), and the words a node's
 * `waiting` and a workflow's reason hold (what the views and GetWorkflowState show).
 */

/** The component name of the engine's HITL invocations (origin `internal`). */
export const WORKFLOW_COMPONENT = 'workflow';
/** What a person may answer about a FAILED node with `on_failure: hitl`, and what each does. */
export const WORKFLOW_HITL_ACTIONS = {
  approve:
    'retry: the node runs again (a new run, a new task): at once when a person approves; after 1 s, 2 s, 4 s… and at most 3 times between resumes when a rule or a fallback approves',
  modify:
    'skip it with an output: the node is not run again and counts as COMPLETED with the edited payload as its output (a JSON object); its output_mapping and route apply',
  deny: 'fail: the node stays FAILED, its dependents are SKIPPED and the workflow ends FAILED once nothing runs',
} as const;

/** The question about a FAILED node with `on_failure: hitl`. */
export function question(live: LiveWorkflow, def: WorkflowNodeDefinition, node: NodeRecord, now: number) {
  const wf = live.record.workflowId;
  return parseInvocationRequest(
    {
      reason_type: 'TASK_ESCALATION',
      summary:
        `Workflow ${wf.slice(0, 128)}: node ${def.nodeId.slice(0, 128)} (agent ${def.agentId.slice(0, 128)}, run ${node.runs}) FAILED: ${node.error.slice(0, 1000)}`.slice(
          0,
          4096,
        ),
      facts: {
        workflow_id: wf,
        node_id: def.nodeId,
        agent_id: def.agentId,
        run: node.runs,
        task_id: node.taskId,
        error: node.error.slice(0, 4096),
        output: node.output.slice(0, 4096),
        actions: WORKFLOW_HITL_ACTIONS,
      },
      subject: { task_id: node.taskId },
      risk_notes: [
        'approve → the node runs again; modify → the node counts as COMPLETED with your edited payload as its output; deny → the workflow fails. No answer in time: the HITL fallback (deny by default) fails it.',
      ],
      proposed_actions: ['approve', 'modify', 'deny'],
    },
    { requester: `workflow:${wf}`, correlationId: wf, now },
  );
}

/** Who answered a question, in words: a person, a rule, the fallback, or nobody. */
export function answeredBy(invocation: HitlInvocation): string {
  const d = invocation.decision;
  return d
    ? d.origin.kind === 'human'
      ? `${d.origin.by} (a person)`
      : d.origin.kind === 'rule'
        ? `the HITL rule '${d.origin.rule ?? ''}'`
        : d.origin.kind === 'fallback'
          ? `the HITL fallback ${d.origin.policy ?? ''}`
          : `nobody (cancelled by ${d.origin.by})`
    : 'nobody';
}

/** A READY node's `waiting` by its trigger (a SCHEDULE node's with its next fire time). */
export function readyWaiting(def: WorkflowNodeDefinition, workflowId: string, fireAt: number | null): string {
  switch (def.trigger) {
    case 'DEPENDENCY':
      return 'its task to be submitted';
    case 'MANUAL':
      return 'a person: Run Node';
    case 'SCHEDULE':
      return scheduleWaiting(def, fireAt!);
    case 'EVENT':
      return `event '${def.metadata.event}': a NOTIFICATION to coordinator {"workflow_event": "${def.metadata.event}"} with correlation_id ${workflowId}`;
  }
}

export function scheduleWaiting(def: WorkflowNodeDefinition, fireAt: number): string {
  return `schedule '${def.metadata.schedule}': next ${isoUtc(fireAt)}`;
}

export function retryWaiting(retries: number, fireAt: number, who: string): string {
  return `its automatic retry ${retries} of ${MAX_AUTOMATIC_RETRIES} at ${isoUtc(fireAt)} (approved by ${who})`;
}

/** A READY node of a workflow that ended before it started: it waits for a resume. */
export function endedWaiting(state: WorkflowState): string {
  return `a resume: the workflow ended ${state} before this node started (ResumeWorkflow runs it)`;
}

/** A READY node held while a node of its workflow is FAILED for good. */
export function heldWaiting(live: LiveWorkflow): string {
  const first = live.failed.values().next().value as string;
  return `a resume: node ${first} FAILED (${nodeOf(live, first).error.slice(0, 200)}), so no new node starts; resume the workflow to run this one`.slice(
    0,
    1024,
  );
}

/** A READY node whose task the scheduler refused for now (BUFFER_FULL, or its agent not registered). */
export function blockedWaiting(code: string, agentId: string, reason: string): string {
  return code === 'BUFFER_FULL'
    ? `room in the scheduler's queue (${reason}): submitted again when a task ends`
    : `agent ${agentId} to register (${reason}): submitted again when it does`;
}

/** Nothing runs and nobody is asked: what the workflow waits for (schedules, events, agents), in words. */
export function waitingFor(live: LiveWorkflow): string {
  const parts: string[] = [];
  for (const id of firstOf(live.due, 5)) parts.push(`${id}: ${nodeOf(live, id).waiting}`);
  for (const [event, ids] of live.events) {
    if (parts.length >= 10) break;
    if (ids.size > 0) parts.push(`event '${event}' for ${firstOf(ids, 5).join(', ')}`);
  }
  for (const [id, why] of firstOf(live.blocked, 5))
    parts.push(why ? `agent ${why} for ${id}` : `room in the scheduler's queue for ${id}`);
  return parts.length ? `waiting for ${parts.slice(0, 10).join('; ')}` : '';
}

/** What a PENDING node waits for: the workflow's start, or its dependencies not COMPLETED yet. */
export function pendingWaiting(record: WorkflowRecord, def: WorkflowNodeDefinition): string {
  if (record.state === 'DEFINED') return 'the workflow has not started';
  const open = def.dependencies.filter((d) => record.nodes.get(d)?.status !== 'COMPLETED');
  return open.length ? `dependencies: ${open.join(', ')}`.slice(0, 1024) : '';
}

/** What a RUNNING node waits for: its task, queued (and why) or on its agent. */
export function taskWaiting(task: TaskRecord): string {
  if (task.state === 'QUEUED')
    return `its task ${task.taskId}, queued: ${task.waiting ? describeWaiting(task.waiting) : 'next in line'}`;
  if (TERMINAL_TASK_STATES.has(task.state)) return '';
  return `its task ${task.taskId} on ${task.assignedAgentId} (${task.state})`;
}
