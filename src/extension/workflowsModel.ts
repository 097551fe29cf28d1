import type {
  HandoffState,
  HandoffView,
  NodeStatus,
  WorkflowDetail,
  WorkflowFileIssue,
  WorkflowNodeDefinition,
  WorkflowNodeDetail,
  WorkflowNodeView,
  WorkflowState,
  WorkflowSummary,
} from '../core/api';
import { notificationText } from './notificationText';

/** The Workflows view's top-level sections, in the order they are shown. */
export const WORKFLOW_SECTIONS = ['workflows', 'handoffs'] as const;
export type WorkflowSection = (typeof WORKFLOW_SECTIONS)[number];

export const WORKFLOW_SECTION_LABELS: Readonly<Record<WorkflowSection, string>> = {
  workflows: 'Workflows',
  handoffs: 'Handoffs',
};

/** Workflows the view lists (running and waiting first, then the most recently updated). */
export const WORKFLOWS_LISTED = 100;
/** Handoffs the view lists (pending first, then the most recently updated). */
export const HANDOFFS_LISTED = 100;
/** Nodes shown under one workflow, in the author's order; a row after them says how many there are. */
export const NODES_SHOWN = 500;

/** A row's text: label, description, plain-text tooltip (ids, reasons and errors come from agents and authors). */
export interface WorkflowRow {
  readonly label: string;
  readonly description: string;
  readonly tooltip: string;
  /** A codicon id; the view adds the colour (`tone`). */
  readonly icon: string;
  readonly tone: 'passed' | 'failed' | 'warning' | 'none';
  /** A person must act (a workflow waiting for a decision, a MANUAL node ready to run, a handoff routed to the operator). */
  readonly needsYou: boolean;
  readonly contextValue: string;
}

// ---------------------------------------------------------------- words and numbers

/** A duration in words that fit a row: `850 ms`, `12 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`. */
export function formatDuration(ms: number): string {
  const value = Math.max(0, Math.round(ms));
  if (value < 1000) return `${value} ms`;
  const seconds = Math.floor(value / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 ? `${minutes} min ${seconds % 60} s` : `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

function time(ms: number | null): string {
  return ms === null ? '—' : new Date(ms).toISOString();
}

function cut(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

// ---------------------------------------------------------------- workflows

/** Nodes that ended (COMPLETED, FAILED or SKIPPED): the `n` of `n/m done`. */
export function nodesDone(counts: Readonly<Record<NodeStatus, number>>): number {
  return counts.COMPLETED + counts.FAILED + counts.SKIPPED;
}

const ACTIVE_WORKFLOW_STATES: ReadonlySet<WorkflowState> = new Set(['RUNNING', 'WAITING']);

/** A workflow that is not over: Cancel applies; its row starts expanded. */
export function workflowIsActive(state: WorkflowState): boolean {
  return ACTIVE_WORKFLOW_STATES.has(state);
}

/** What a workflow is doing, in a few words: `2 running, 1 ready` / the reason it waits or failed. */
export function workflowActivity(summary: Pick<WorkflowSummary, 'state' | 'reason' | 'counts'>): string {
  const { counts } = summary;
  const parts: string[] = [];
  if (summary.state === 'RUNNING' || summary.state === 'WAITING') {
    if (counts.RUNNING) parts.push(`${counts.RUNNING} running`);
    if (counts.READY) parts.push(`${counts.READY} ready`);
  }
  if (counts.FAILED && summary.state !== 'DEFINED') parts.push(`${counts.FAILED} failed`);
  if (counts.SKIPPED && summary.state !== 'DEFINED') parts.push(`${counts.SKIPPED} skipped`);
  const reason = summary.reason ? cut(summary.reason, 120) : summary.state === 'DEFINED' ? 'not started' : '';
  return [parts.join(', '), reason].filter(Boolean).join(' · ');
}

/** A workflow's row: its id, then state · `n/m done` · what runs or why it waits or failed. */
export function workflowRow(summary: WorkflowSummary): WorkflowRow {
  const needsYou = summary.state === 'WAITING';
  const done = `${nodesDone(summary.counts)}/${summary.nodeCount} done`;
  const activity = workflowActivity(summary);
  const state = needsYou ? 'WAITING · needs you' : summary.state;
  const counts = (Object.entries(summary.counts) as Array<[NodeStatus, number]>)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${n} ${status}`);
  return {
    label: summary.workflowId,
    description: [state, done, activity].filter(Boolean).join(' · '),
    tooltip: [
      `workflow ${summary.workflowId}`,
      `state: ${summary.state}`,
      `nodes: ${summary.nodeCount}${counts.length ? ` (${counts.join(', ')})` : ''}`,
      ...(summary.reason ? [summary.reason] : []),
      ...(needsYou
        ? ['A person must act: Run Node on a node marked needs you, or decide on a failed node in the Approvals view.']
        : []),
      `created ${time(summary.createdAt)}`,
      ...(summary.startedAt !== null ? [`started ${time(summary.startedAt)}`] : []),
      ...(summary.completedAt !== null
        ? [
            `ended ${time(summary.completedAt)}${summary.startedAt !== null ? ` (after ${formatDuration(summary.completedAt - summary.startedAt)})` : ''}`,
          ]
        : []),
      `updated ${time(summary.updatedAt)}`,
    ].join('\n'),
    icon: WORKFLOW_ICONS[summary.state],
    tone:
      summary.state === 'COMPLETED' ? 'passed' : summary.state === 'FAILED' ? 'failed' : needsYou ? 'warning' : 'none',
    needsYou,
    contextValue: `workflow+${summary.state}`,
  };
}

const WORKFLOW_ICONS: Readonly<Record<WorkflowState, string>> = {
  DEFINED: 'circle-large-outline',
  RUNNING: 'sync~spin',
  WAITING: 'person',
  COMPLETED: 'pass',
  FAILED: 'error',
  CANCELLED: 'circle-slash',
};

/** The node status icons (codicons): the Workflows view and the README say the same. */
export const NODE_ICONS: Readonly<Record<NodeStatus, string>> = {
  PENDING: 'circle-large-outline',
  READY: 'debug-start',
  RUNNING: 'sync~spin',
  COMPLETED: 'pass',
  FAILED: 'error',
  SKIPPED: 'debug-step-over',
};

/** How long a node ran (or has been running, at `now`); '' when it never started. */
export function nodeDuration(
  state: Pick<WorkflowNodeView['state'], 'startedAt' | 'completedAt' | 'status'>,
  now: number,
): string {
  if (state.startedAt === null) return '';
  if (state.completedAt !== null && state.completedAt >= state.startedAt)
    return formatDuration(state.completedAt - state.startedAt);
  return state.status === 'RUNNING' ? `${formatDuration(now - state.startedAt)} so far` : '';
}

/**
 * Why a node failed or was skipped, or what it waits for (`waiting for dependencies: a, b`), in the core's words; ''
 * when nothing is to say. A RUNNING node's task is said only while the scheduler queues it (the row says RUNNING already).
 */
export function nodeReason(view: WorkflowNodeView): string {
  const { state } = view;
  if (state.status === 'FAILED' || state.status === 'SKIPPED') return state.error;
  if (state.status === 'COMPLETED' || !state.waiting) return '';
  if (state.status === 'RUNNING' && !/\bqueued\b/.test(state.waiting)) return '';
  return `waiting for ${state.waiting}`;
}

/** A MANUAL node that is READY waits for Run Node: the one node state a person must act on. */
export function nodeNeedsYou(view: WorkflowNodeView, workflowState: WorkflowState): boolean {
  return view.state.status === 'READY' && view.definition.trigger === 'MANUAL' && workflowIsActive(workflowState);
}

/**
 * The `contextValue` of a node row: `workflowNode+<STATUS>+<TRIGGER>+<WORKFLOW STATE>`, so that menus offer Run Node on
 * READY MANUAL nodes of a running (or waiting) workflow and Resume from Node on nodes of a started workflow, ended ones too.
 */
export function nodeContextValue(view: WorkflowNodeView, workflowState: WorkflowState): string {
  return `workflowNode+${view.state.status}+${view.definition.trigger}+${workflowState}`;
}

/** A node's row: its id, then status · agent · trigger (when not DEPENDENCY) · duration · why it waits or failed. */
export function nodeRow(view: WorkflowNodeView, workflowState: WorkflowState, now: number): WorkflowRow {
  const { definition, state } = view;
  const needsYou = nodeNeedsYou(view, workflowState);
  const duration = nodeDuration(state, now);
  const reason = needsYou ? 'needs you: Run Node' : nodeReason(view);
  const runs = state.runs > 1 ? `run ${state.runs}` : '';
  return {
    label: definition.nodeId,
    description: [
      state.status,
      definition.agentId,
      definition.trigger === 'DEPENDENCY' ? '' : definition.trigger,
      runs,
      duration,
      cut(reason, 160),
    ]
      .filter(Boolean)
      .join(' · '),
    tooltip: [
      `node ${definition.nodeId} (${definition.trigger})`,
      `status: ${state.status}${state.runs ? ` · run ${state.runs}` : ''}`,
      `agent: ${definition.agentId}`,
      `depends on: ${definition.dependencies.length ? definition.dependencies.join(', ') : '(nothing: a root)'}`,
      ...(definition.metadata.route ? [`route: ${definition.metadata.route}`] : []),
      ...(state.status === 'FAILED' || state.status === 'SKIPPED'
        ? state.error
          ? [`${state.status === 'FAILED' ? 'failed' : 'skipped'}: ${state.error}`]
          : []
        : state.waiting && state.status !== 'COMPLETED'
          ? [`waiting for ${state.waiting}`]
          : []),
      ...(state.loops
        ? [
            `loop backs into it: ${state.loops}${definition.metadata.max_iterations ? ` of ${definition.metadata.max_iterations}` : ''}`,
          ]
        : []),
      ...(needsYou ? ['A MANUAL node: run it from its context menu (Run Node).'] : []),
      ...(state.startedAt !== null ? [`started ${time(state.startedAt)}`] : []),
      ...(state.completedAt !== null ? [`ended ${time(state.completedAt)}`] : []),
      ...(duration ? [`duration ${duration}`] : []),
      ...(state.taskId ? [`task ${state.taskId}`] : []),
    ].join('\n'),
    icon: needsYou ? 'person' : NODE_ICONS[state.status],
    tone:
      state.status === 'COMPLETED' ? 'passed' : state.status === 'FAILED' ? 'failed' : needsYou ? 'warning' : 'none',
    needsYou,
    contextValue: nodeContextValue(view, workflowState),
  };
}

/**
 * The nodes a workflow row shows: the first NODES_SHOWN in the author's order (the view asks the coordinator for no
 * more), and how many of the workflow's nodes (summary.nodeCount) are left out.
 */
export function shownNodes(
  detail: Pick<WorkflowDetail, 'nodes' | 'summary'>,
  max = NODES_SHOWN,
): { readonly nodes: readonly WorkflowNodeView[]; readonly hidden: number } {
  const nodes = detail.nodes.length > max ? detail.nodes.slice(0, max) : detail.nodes;
  return { nodes, hidden: Math.max(0, detail.summary.nodeCount - nodes.length) };
}

/** The row after a large workflow's first nodes: `first 500 of 100,000 nodes`. */
export function moreNodesRow(shown: number, total: number): { readonly label: string; readonly tooltip: string } {
  return {
    label: `first ${shown.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} nodes`,
    tooltip:
      `Only the first ${shown.toLocaleString('en-US')} nodes (in the definition's order) are listed; the workflow's row counts all of them. ` +
      'Show Node Inputs and Outputs… from the Command Palette picks any node by id.',
  };
}

/** The Workflows section's count: `3`, `3 (1 needs you)`, `newest 100`. */
export function sectionDescription(
  section: WorkflowSection,
  workflows: readonly WorkflowSummary[],
  handoffs: readonly HandoffView[],
): string {
  if (section === 'workflows') {
    const listed = workflows.length >= WORKFLOWS_LISTED ? `newest ${workflows.length}` : String(workflows.length);
    const active = workflows.filter((w) => workflowIsActive(w.state)).length;
    const waiting = workflows.filter((w) => w.state === 'WAITING').length;
    const extra = [active ? `${active} active` : '', waiting ? `${waiting} need${waiting === 1 ? 's' : ''} you` : '']
      .filter(Boolean)
      .join(', ');
    return extra ? `${listed} (${extra})` : listed;
  }
  const listed = handoffs.length >= HANDOFFS_LISTED ? `newest ${handoffs.length}` : String(handoffs.length);
  const pending = handoffs.filter((h) => h.state === 'PENDING').length;
  const operator = handoffs.filter(handoffNeedsYou).length;
  const extra = [
    pending ? `${pending} pending` : '',
    operator ? `${operator} need${operator === 1 ? 's' : ''} you` : '',
  ]
    .filter(Boolean)
    .join(', ');
  return extra ? `${listed} (${extra})` : listed;
}

// ---------------------------------------------------------------- handoffs

/** PENDING and routed to a person: Accept Handoff / Reject Handoff… apply. */
export function handoffNeedsYou(handoff: Pick<HandoffView, 'state' | 'awaitingOperator'>): boolean {
  return handoff.state === 'PENDING' && handoff.awaitingOperator;
}

const HANDOFF_RANK: Readonly<Record<HandoffState, number>> = {
  PENDING: 0,
  ACCEPTED: 1,
  COMPLETED: 2,
  EXPIRED: 3,
  REJECTED: 3,
  CANCELLED: 3,
};

/**
 * The Handoffs section's order: pending (those waiting for you first), then accepted, completed, and expired / rejected /
 * cancelled; within each, the core's order (the most recently updated first).
 */
export function sortHandoffs<H extends Pick<HandoffView, 'state' | 'awaitingOperator'>>(handoffs: readonly H[]): H[] {
  const rank = (h: H) => HANDOFF_RANK[h.state] * 2 + (handoffNeedsYou(h) ? 0 : 1);
  return handoffs
    .map((h, i) => ({ h, i }))
    .sort((a, b) => rank(a.h) - rank(b.h) || a.i - b.i)
    .map(({ h }) => h);
}

/** Who a handoff goes to: who accepted it, else its current (or last) target, `you` when it was routed to the operator. */
export function handoffTarget(
  handoff: Pick<HandoffView, 'toAgent' | 'requestedTo' | 'awaitingOperator' | 'acceptedBy'>,
): string {
  if (handoff.acceptedBy) return handoff.acceptedBy;
  if (handoff.toAgent) return handoff.toAgent;
  if (handoff.awaitingOperator) return 'you';
  return handoff.requestedTo || '(no agent found)';
}

const HANDOFF_ICONS: Readonly<Record<HandoffState, string>> = {
  PENDING: 'watch',
  ACCEPTED: 'arrow-swap',
  COMPLETED: 'pass',
  EXPIRED: 'history',
  REJECTED: 'close',
  CANCELLED: 'circle-slash',
};

/** A handoff's row: its request id, then `from → to` · state · reason (or why it was rejected). */
export function handoffRow(handoff: HandoffView, now: number): WorkflowRow {
  const needsYou = handoffNeedsYou(handoff);
  const state = needsYou
    ? 'PENDING · needs you'
    : handoff.state === 'REJECTED' && handoff.rejectionCode
      ? `REJECTED ${handoff.rejectionCode}`
      : handoff.state;
  const shownReason =
    handoff.state === 'REJECTED' && handoff.rejectionReason ? handoff.rejectionReason : handoff.reason;
  const left =
    handoff.state === 'PENDING' && handoff.expiresAt !== null
      ? `expires in ${formatDuration(handoff.expiresAt - now)}`
      : '';
  const context = handoff.context.binary ? `${handoff.context.bytes} bytes (binary)` : `${handoff.context.bytes} bytes`;
  return {
    label: handoff.requestId,
    description: [`${handoff.fromAgent} → ${handoffTarget(handoff)}`, state, left, cut(shownReason, 120)]
      .filter(Boolean)
      .join(' · '),
    tooltip: [
      `handoff ${handoff.requestId}`,
      `from ${handoff.fromAgent} to ${handoff.requestedTo || '(by capability)'}${handoff.toAgent && handoff.toAgent !== handoff.requestedTo ? `, now ${handoff.toAgent}` : ''}`,
      `state: ${handoff.state}${handoff.acceptedBy ? ` · accepted by ${handoff.acceptedBy}` : ''}`,
      `reason: ${handoff.reason}`,
      ...(handoff.rejectionReason || handoff.rejectionCode
        ? [`rejected: ${[handoff.rejectionCode, handoff.rejectionReason].filter(Boolean).join(': ')}`]
        : []),
      ...(handoff.capabilitiesRequired.length
        ? [`capabilities required: ${handoff.capabilitiesRequired.join(', ')}`]
        : []),
      `priority ${handoff.priority}`,
      ...(handoff.attempts.length
        ? [
            `targets tried: ${handoff.attempts.map((a) => `${a.agentId}${a.outcome ? ` (${a.outcome}${a.reason ? `: ${a.reason}` : ''})` : ''}`).join(', ')}`,
          ]
        : []),
      `context: ${handoff.context.contentType || 'opaque bytes'}, ${context}`,
      ...(handoff.taskId ? [`task ${handoff.taskId}`] : []),
      ...(handoff.worktree ? [`worktree ${worktreeText(handoff.worktree)}`] : []),
      ...(handoff.endReason ? [`ended: ${handoff.endReason}`] : []),
      ...(handoff.completedBy ? [`completed by ${handoff.completedBy}`] : []),
      ...(needsYou
        ? ['No agent could take it: accept it yourself or reject it with a reason (its context menu).']
        : []),
      `requested ${time(handoff.requestedAt)}`,
      ...(handoff.expiresAt !== null && handoff.state === 'PENDING' ? [`expires ${time(handoff.expiresAt)}`] : []),
      ...(handoff.endedAt !== null ? [`ended ${time(handoff.endedAt)}`] : []),
    ].join('\n'),
    icon: needsYou ? 'person' : HANDOFF_ICONS[handoff.state],
    tone:
      handoff.state === 'COMPLETED'
        ? 'passed'
        : handoff.state === 'REJECTED' || handoff.state === 'EXPIRED'
          ? 'failed'
          : needsYou
            ? 'warning'
            : 'none',
    needsYou,
    contextValue: handoffContextValue(handoff),
  };
}

/** `handoff+<STATE>`, and `+operator` while it waits for a person (menus offer Accept / Reject only there). */
export function handoffContextValue(handoff: Pick<HandoffView, 'state' | 'awaitingOperator'>): string {
  return `handoff+${handoff.state}${handoffNeedsYou(handoff) ? '+operator' : ''}`;
}

/** Show Handoff: the record and its context snapshot as text (never rendered). */
export function handoffDetailText(handoff: HandoffView): string {
  const context = handoff.context;
  const contextText = context.binary
    ? `(${context.bytes} bytes, not UTF-8 text)`
    : prettyJson(context.text) +
      (context.truncated ? `\n… (the first ${context.text.length} characters of ${context.bytes} bytes)` : '');
  return (
    [
      `Handoff ${handoff.requestId}`,
      '',
      `state           ${handoff.state}${handoffNeedsYou(handoff) ? ' (waiting for you)' : ''}`,
      `from            ${handoff.fromAgent}`,
      `requested to    ${handoff.requestedTo || '(capability-based routing)'}`,
      `current target  ${handoff.toAgent || '—'}`,
      `accepted by     ${handoff.acceptedBy || '—'}`,
      `reason          ${handoff.reason}`,
      ...(handoff.rejectionReason || handoff.rejectionCode
        ? [`rejected        ${[handoff.rejectionCode, handoff.rejectionReason].filter(Boolean).join(': ')}`]
        : []),
      `capabilities    ${handoff.capabilitiesRequired.join(', ') || '—'}`,
      `priority        ${handoff.priority}`,
      `timeout         ${formatDuration(handoff.timeoutMs)} per target`,
      `task            ${handoff.taskId || '—'}`,
      `correlation id  ${handoff.correlationId || '—'}`,
      ...(handoff.parentRequestId ? [`delegated under ${handoff.parentRequestId}`] : []),
      `worktree        ${handoff.worktree ? worktreeText(handoff.worktree) : 'not carried'}`,
      ...(handoff.completedBy ? [`completed by    ${handoff.completedBy}`] : []),
      ...(handoff.endReason ? [`ended because   ${handoff.endReason}`] : []),
      `requested       ${time(handoff.requestedAt)}`,
      `expires         ${handoff.state === 'PENDING' ? time(handoff.expiresAt) : '—'}`,
      `ended           ${time(handoff.endedAt)}`,
      '',
      `Targets tried: ${handoff.attempts.length}`,
      ...handoff.attempts.map(
        (a) =>
          `${time(a.at)} ${a.agentId}${a.via ? ` (${a.via})` : ''} ${a.outcome || '(current)'}${a.code ? ` ${a.code}` : ''}` +
          `${a.reason ? `: ${a.reason}` : ''}${a.redirectTo ? ` → redirect to ${a.redirectTo}` : ''}`,
      ),
      '',
      `Context (${context.contentType || 'opaque bytes'}, ${context.bytes} bytes):`,
      contextText,
    ].join('\n') + '\n'
  );
}

/** The worktree a handoff carries, and what became of it: `repo/worktree (bound)`. */
function worktreeText(worktree: NonNullable<HandoffView['worktree']>): string {
  const outcome = [worktree.outcome, worktree.detail].filter(Boolean).join(': ');
  return `${worktree.repoId}/${worktree.worktreeId}${outcome ? ` (${outcome})` : ''}`;
}

/** What Accept Handoff / Reject Handoff… did (request ids and agent ids are the agents' choice). */
export function handoffActionText(
  action: 'accept' | 'reject',
  handoff: Pick<HandoffView, 'requestId' | 'fromAgent' | 'state'>,
): string {
  return notificationText(
    action === 'accept'
      ? `Handoff ${handoff.requestId} from ${handoff.fromAgent}: ${handoff.state}, you took it.`
      : `Handoff ${handoff.requestId} from ${handoff.fromAgent}: ${handoff.state}.`,
  );
}

// ---------------------------------------------------------------- a node's inputs and outputs

/** JSON text pretty-printed (two spaces); other text as it is; '' as `(none)`. */
export function prettyJson(text: string): string {
  if (!text.trim()) return '(none)';
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** A node's definition in the definition file's (proto) field names, as the author wrote it. */
export function nodeDefinitionJson(definition: WorkflowNodeDefinition): Record<string, unknown> {
  return {
    node_id: definition.nodeId,
    agent_id: definition.agentId,
    dependencies: [...definition.dependencies],
    trigger_type: definition.trigger,
    input_mapping: { ...definition.inputMapping },
    output_mapping: { ...definition.outputMapping },
    metadata: { ...definition.metadata },
  };
}

/** Show Node Inputs and Outputs: the node's state, runs and times, its inputs and output, its definition, the workflow data (plain text). */
export function nodeDetailText(detail: WorkflowNodeDetail, now: number): string {
  const view = detail.node;
  const workflowId = detail.summary.workflowId;
  const nodeId = view.definition.nodeId;
  const { state } = view;
  const duration = nodeDuration(state, now);
  return (
    [
      `Workflow ${workflowId} · node ${nodeId}`,
      '',
      `status          ${state.status}${nodeNeedsYou(view, detail.summary.state) ? ' (waiting for you: Run Node)' : ''}`,
      `workflow        ${detail.summary.state}${detail.summary.reason ? ` (${detail.summary.reason})` : ''}`,
      `agent           ${view.definition.agentId}`,
      `trigger         ${view.definition.trigger}`,
      `depends on      ${view.definition.dependencies.join(', ') || '(nothing: a root)'}`,
      `runs            ${state.runs}${state.loops ? ` (${state.loops} loop back${state.loops === 1 ? '' : 's'} since the last resume)` : ''}`,
      `started         ${time(state.startedAt)}`,
      `ended           ${time(state.completedAt)}`,
      `duration        ${duration || '—'}`,
      ...(state.waiting && state.status !== 'COMPLETED' && state.status !== 'FAILED' && state.status !== 'SKIPPED'
        ? [`waiting for     ${state.waiting}`]
        : []),
      ...(state.fireAt !== null && state.status === 'READY' ? [`runs at         ${time(state.fireAt)}`] : []),
      ...(state.invocationId ? [`asking          HITL ${state.invocationId} (Approvals view)`] : []),
      ...(state.error ? [`error           ${state.error}`] : []),
      `task            ${state.taskId || '—'}`,
      '',
      state.status === 'SKIPPED'
        ? 'Inputs: none (SKIPPED: it was not run)'
        : `Inputs (from workflow_data by input_mapping${state.status === 'PENDING' || state.status === 'READY' ? ', as it would be given them now' : ''}):`,
      ...(state.status === 'SKIPPED' ? [] : [prettyJson(view.inputs)]),
      '',
      'Output (written to workflow_data by output_mapping):',
      prettyJson(state.output),
      '',
      'Definition:',
      JSON.stringify(nodeDefinitionJson(view.definition), null, 2),
      '',
      'Workflow data now:',
      prettyJson(detail.data),
    ].join('\n') + '\n'
  );
}

/** The document's tab title: `<workflow> · <node>.txt`, bounded. */
export function nodeDocumentTitle(workflowId: string, nodeId: string): string {
  const name = `${workflowId} · ${nodeId}`;
  return `${name.length > 60 ? `${name.slice(0, 59)}…` : name}.txt`;
}

/** The document key of a node: both ids URI-encoded (no `/` or `+` left in them), joined by `+`. */
export function nodeDocumentKey(workflowId: string, nodeId: string): string {
  return `${encodeURIComponent(workflowId)}+${encodeURIComponent(nodeId)}`;
}

export function parseNodeDocumentKey(
  key: string,
): { readonly workflowId: string; readonly nodeId: string } | undefined {
  const parts = key.split('+');
  if (parts.length !== 2 || !parts[0] || !parts[1]) return undefined;
  try {
    return { workflowId: decodeURIComponent(parts[0]), nodeId: decodeURIComponent(parts[1]) };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- definition files and commands

/** A refusal placed in the file, in the editor's terms: 0-based lines and columns, the range never empty of meaning. */
export interface IssueRange {
  readonly startLine: number;
  readonly startColumn: number;
  readonly endLine: number;
  readonly endColumn: number;
}

/**
 * Where a WorkflowFileIssue goes in the file (the core's lines and columns are 1-based, 0 when unknown): an unknown place
 * is the first line; an end before the start (or unknown) ends the range at the end of the start's line.
 */
export function issueRange(
  issue: Pick<WorkflowFileIssue, 'line' | 'column' | 'endLine' | 'endColumn'>,
  lineLength: (line: number) => number,
): IssueRange {
  const startLine = Math.max(0, issue.line - 1);
  const startColumn = issue.line > 0 ? Math.max(0, issue.column - 1) : 0;
  const endLine = issue.endLine > 0 ? issue.endLine - 1 : startLine;
  const endColumn = issue.endLine > 0 && issue.endColumn > 0 ? issue.endColumn - 1 : -1;
  const endsBefore = endLine < startLine || (endLine === startLine && endColumn <= startColumn);
  if (endColumn < 0 || endsBefore)
    return { startLine, startColumn, endLine: startLine, endColumn: Math.max(startColumn + 1, lineLength(startLine)) };
  return { startLine, startColumn, endLine, endColumn };
}

/**
 * The text of one problem: the core's message, the cycle's nodes when it names one the message does not, and (in the
 * Problems view, `withPath`) the field it is about.
 */
export function issueMessage(issue: Pick<WorkflowFileIssue, 'message' | 'cycle' | 'path'>, withPath = true): string {
  const cycle = issue.cycle?.length ? `cycle: ${[...issue.cycle, issue.cycle[0]].join(' → ')}` : '';
  const parts = [issue.message];
  if (cycle && !issue.cycle!.every((node) => issue.message.includes(node))) parts.push(`(${cycle})`);
  if (withPath && issue.path && !issue.message.includes(issue.path)) parts.push(`(at ${issue.path})`);
  return parts.join(' ');
}

/** What Create Workflow from File says when the file is refused: the first error, where it is, and how many more. */
export function refusalText(fileName: string, issues: readonly WorkflowFileIssue[]): string {
  const errors = issues.filter((i) => i.severity === 'error');
  const first = errors[0] ?? issues[0];
  if (!first) return notificationText(`Workflow not created from ${fileName}.`);
  const where = first.line > 0 ? `${fileName}:${first.line}${first.column > 0 ? `:${first.column}` : ''}` : fileName;
  const more =
    errors.length > 1 ? ` (and ${errors.length - 1} more error${errors.length === 2 ? '' : 's'}: see Problems)` : '';
  return notificationText(`Workflow not created: ${where}: ${first.code}: ${issueMessage(first, false)}${more}`);
}

/** What Create Workflow from File says when the workflow was created. */
export function createdText(workflowId: string, warnings: number): string {
  return notificationText(
    `Workflow ${workflowId} created${warnings ? ` with ${warnings} warning${warnings === 1 ? '' : 's'} (see Problems)` : ''}. Start it now?`,
  );
}

/** The file name the core is given: YAML or JSON is told by its extension; an untitled document by its language. */
export function definitionFileName(fileName: string, languageId: string): string {
  if (/\.(json|ya?ml)$/i.test(fileName)) return fileName;
  return languageId === 'json' || languageId === 'jsonc' ? `${fileName}.json` : `${fileName}.yaml`;
}

/** Whether a document may be a workflow definition (Create Workflow from File takes the active editor's then). */
export function isDefinitionDocument(fileName: string, languageId: string): boolean {
  return /\.(json|ya?ml)$/i.test(fileName) || ['json', 'jsonc', 'yaml'].includes(languageId);
}

/** Start Workflow's and Resume from Node's data field: empty, or a JSON object. Answers the problem, or undefined. */
export function dataProblem(text: string): string | undefined {
  if (!text.trim()) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return `Not valid JSON: ${err instanceof Error ? err.message : String(err)}`;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? undefined
    : 'workflow_data is a JSON object: {"key": value, …}.';
}

/** Reject Handoff…'s reason field: required. */
export function reasonProblem(text: string): string | undefined {
  return text.trim() ? undefined : 'Say why: the requesting agent receives this reason.';
}

/** Cancel Workflow…'s reason field: required (the workflow keeps it as the reason it was cancelled). */
export function cancelReasonProblem(text: string): string | undefined {
  return text.trim() ? undefined : 'Say why: the workflow keeps this reason.';
}

/** What Start / Run Node / Resume / Cancel did (workflow and node ids are the authors' choice). */
export function workflowActionText(
  action: 'start' | 'run' | 'resume' | 'cancel',
  detail: WorkflowDetail,
  nodeId?: string,
): string {
  const id = detail.summary.workflowId;
  const state = detail.summary.state;
  const done = `${nodesDone(detail.summary.counts)}/${detail.summary.nodeCount} nodes done`;
  switch (action) {
    case 'start':
      return notificationText(`Workflow ${id} started: ${state}, ${done}.`);
    case 'run':
      return notificationText(`Node ${nodeId} of workflow ${id} runs: the workflow is ${state}, ${done}.`);
    case 'resume':
      return notificationText(`Workflow ${id} resumed from node ${nodeId}: ${state}, ${done}.`);
    case 'cancel':
      return notificationText(
        `Workflow ${id} cancelled: ${state}${detail.summary.reason ? ` (${detail.summary.reason})` : ''}.`,
      );
  }
}
