import type { TaskRecord } from '../scheduler/model';
import type { TurnOrigin } from './model';

/**
 * The prompts the coordinator sends an agent in session mode (README, "Run a workflow of coding agents"): one template
 * per thing that starts a turn. Each says what the turn is for, gives what the agent needs (a task's params and scope,
 * a message's payload) and names the MCP tools of the swarm's bridge (attached to the session as `sw4rm`) to call when
 * done. Plain functions of their inputs: test/unit/sessionPrompts.test.ts reads them.
 */

/** The most of a task's params or a message's payload a prompt carries; the rest is named, not pasted. */
export const PROMPT_PAYLOAD_MAX_CHARS = 32 * 1024;

function bounded(text: string): string {
  return text.length <= PROMPT_PAYLOAD_MAX_CHARS
    ? text
    : `${text.slice(0, PROMPT_PAYLOAD_MAX_CHARS)}\n… (cut: ${text.length} characters; call current_task / read_inbox for all of it)`;
}

/** A payload as a prompt shows it: JSON pretty-printed, text as it is, anything else by its size and type. */
export function payloadText(payload: Uint8Array, contentType: string): string {
  const base = contentType.split(';')[0].trim().toLowerCase();
  const textual = base === '' || base.startsWith('text/') || base.endsWith('json') || base.endsWith('+json');
  if (!textual) return `(${payload.byteLength} bytes of ${contentType || 'binary data'})`;
  const text = Buffer.from(payload).toString('utf8');
  if (base.endsWith('json')) {
    try {
      return bounded(JSON.stringify(JSON.parse(text), null, 2));
    } catch {
      // Not JSON after all: shown as text.
    }
  }
  return bounded(text);
}

/** The first turn's preamble: who the agent is and where its rules are. */
export function preamble(agentId: string, instructionsPath: string | undefined): string {
  return (
    `You are ${agentId}, an agent of a SW4RM swarm, working in this git worktree (your own: commit your work on its branch). ` +
    'The coordinator sends you your work as prompts like this one. The swarm\'s tools are the MCP server "sw4rm" ' +
    '(send_message, read_inbox, ack_message, current_task, complete_task, fail_task, request_decision, …).' +
    (instructionsPath ? ` ${instructionsPath} in this worktree has the swarm's rules.` : '') +
    '\n\n'
  );
}

/** What started a task's turn: a workflow node when the workflow engine submitted it, else the task. */
export function originOfTask(task: Pick<TaskRecord, 'taskId' | 'submittedBy'>): TurnOrigin {
  if (task.submittedBy.startsWith('workflow:')) {
    const workflowId = task.submittedBy.slice('workflow:'.length);
    const prefix = `wf:${workflowId}:`;
    const rest = task.taskId.startsWith(prefix) ? task.taskId.slice(prefix.length) : '';
    const nodeId = rest.includes(':') ? rest.slice(0, rest.lastIndexOf(':')) : '';
    return { kind: 'node', workflowId, nodeId, taskId: task.taskId };
  }
  return { kind: 'task', taskId: task.taskId };
}

/** A scheduler `run`: the task, its params and scope, and how to end it. */
export function taskPrompt(
  task: Pick<TaskRecord, 'taskId' | 'priority' | 'params' | 'contentType' | 'scopeText' | 'submittedBy'>,
): string {
  const origin = originOfTask(task);
  const what =
    origin.kind === 'node'
      ? `Node '${origin.nodeId}' of workflow '${origin.workflowId}' is yours: task ${task.taskId}.`
      : `The scheduler gave you task ${task.taskId} (priority ${task.priority}, from ${task.submittedBy}).`;
  const params = task.params.byteLength > 0 ? payloadText(task.params, task.contentType) : '(none)';
  return [
    what,
    '',
    'Its params:',
    params,
    '',
    `Its scope: ${task.scopeText || '(none)'}`,
    '',
    'Do the work in this worktree. When it is done, call complete_task with a short `result` (JSON: what the next step ' +
      'needs, e.g. {"summary": "…", "files": […]}) and a `note`; if you cannot do it, call fail_task with the reason. ' +
      'If you end your turn without either, the task completes with your last message as its result.',
  ].join('\n');
}

/** A message that reached the agent while it was idle. */
export function messagePrompt(
  from: string,
  messageId: string,
  messageType: string,
  correlationId: string,
  body: string,
): string {
  return [
    `A ${messageType} message from ${from} arrived (message_id ${messageId}${correlationId ? `, correlation_id ${correlationId}` : ''}):`,
    '',
    body,
    '',
    'Answer it as it asks: send_message to reply to its sender (same correlation_id), or do what it asks. When you end ' +
      'your turn the message is acknowledged FULFILLED with your last message as the note; call ack_message with ' +
      '`rejected` or `failed` first if you will not or cannot do it.',
  ].join('\n');
}

/** The final acknowledgement of a message the agent sent, reaching it while idle (what an agent waiting for an answer waits for). */
export function acknowledgementPrompt(
  from: string,
  forMessageId: string,
  stage: string,
  note: string,
  errorCode: string,
): string {
  return [
    `${from} acknowledged your message ${forMessageId}: ${stage}${errorCode ? ` (${errorCode})` : ''}.`,
    note ? `Its note:\n${bounded(note)}` : '(no note)',
    '',
    'Carry on with your work if this was what you were waiting for; otherwise end your turn.',
  ].join('\n');
}
