import type { CallContext } from '../context';
import type { RegistryChange } from '../registry/model';
import { TERMINAL_TASK_STATES } from '../scheduler/model';
import { ACTOR, type Core, type DispatchPart, type Parts } from './core';
import type { NodeRecord } from './model';
import { blockedWaiting, heldWaiting } from './notices';
import { inputsOf, nodeKey, nodeOf, priorityOf, taskIdOf, unkey, type LiveWorkflow } from './state';

/** A node's inputs are kept with it (Show Node Inputs and Outputs) up to this many characters of JSON; beyond, a note. */
export const MAX_KEPT_INPUTS = 64 * 1024;
/** Submit refusals that are not the node's fault and pass: the node waits READY and is submitted again. */
const TEMPORARY_REFUSALS: ReadonlySet<string> = new Set(['NO_ROUTE', 'AGENT_SHUTDOWN', 'BUFFER_FULL']);

/**
 * Submitting READY nodes as scheduler tasks: each in a transition of its own with its task (READY → RUNNING, or the
 * refusal recorded), never inside the scheduler's callbacks. Nodes the scheduler refuses for now wait: a FIFO for
 * BUFFER_FULL retried one per ended task, an index by agent for NO_ROUTE / AGENT_SHUTDOWN retried when it registers;
 * a READY node of a workflow with a node FAILED for good is held until a resume.
 */
export class Dispatch implements DispatchPart {
  private drainQueued = false;
  private draining = false;

  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'guard' | 'live' | 'indexes' | 'notify'>,
    private readonly p: Pick<Parts, 'progress' | 'failure' | 'completion'>,
  ) {}

  /** An agent registered: the nodes that waited for it go. */
  agentChanged(change: RegistryChange): void {
    if (this.c.guard.isStopped || change.kind !== 'joined') return;
    if (this.c.indexes.agentJoined(change.agent.descriptor.agentId)) this.scheduleDrain();
  }

  scheduleDrain(): void {
    if (this.drainQueued || this.c.guard.isStopped) return;
    this.drainQueued = true;
    queueMicrotask(() => {
      this.drainQueued = false;
      this.drain();
    });
  }

  /**
   * Submits READY nodes, each in its own transaction with its task: first as many of the nodes the full queue held back
   * as tasks ended since (first held back first; the first refused again stops that), then the queued ones. A READY
   * node of a workflow with a node FAILED for good is held (never dropped). Never inside the scheduler's callbacks.
   */
  drain(): void {
    if (this.draining || this.c.guard.isStopped) return;
    const indexes = this.c.indexes;
    this.draining = true;
    try {
      for (let next = indexes.next(); next !== undefined; next = indexes.next()) {
        const { key: k, fromQueue } = next;
        const [workflowId, nodeId] = unkey(k);
        const live = this.c.live.get(workflowId);
        const node = live?.record.nodes.get(nodeId);
        if (!live || !node || node.status !== 'READY') {
          // Gone meanwhile (indexes are kept in step; this is a guard): it took no slot.
          if (fromQueue) {
            indexes.queueBlocked.delete(k);
            indexes.freed++;
          }
          continue;
        }
        if (live.failed.size > 0) {
          if (fromQueue) indexes.freed++;
          this.c.guard.run(workflowId, () => this.hold(live, node));
          continue;
        }
        this.c.guard.run(workflowId, () => this.startNode(live, nodeId, '', ACTOR, { correlationId: workflowId }));
        // Refused BUFFER_FULL again: the queue is full after all; the others wait for the next task to end.
        if (fromQueue && live.blocked.get(nodeId) === '') indexes.freed = 0;
      }
    } finally {
      this.draining = false;
    }
  }

  /** A READY node not started while a node of its workflow is FAILED for good: it waits, saying why, until a resume. */
  private hold(live: LiveWorkflow, node: NodeRecord): void {
    this.p.progress.unblock(live, node.nodeId);
    live.held.add(node.nodeId);
    const waiting = heldWaiting(live);
    if (node.waiting === waiting) return;
    node.waiting = waiting;
    this.c.transitions.run((tx) => {
      this.c.deps.store.workflows.putNode(live.record.workflowId, node);
      this.p.progress.notifyNode(tx, live, node);
    }, live.record.workflowId);
  }

  /** READY → RUNNING: the node's task submitted and the node marked in one transaction (or the refusal recorded). */
  startNode(live: LiveWorkflow, nodeId: string, reason: string, by: string, ctx: CallContext): void {
    const { store, log, clock, tasks } = this.c.deps;
    const { progress, failure, completion } = this.p;
    const def = live.defs.get(nodeId)!;
    const node = nodeOf(live, nodeId);
    if (node.status !== 'READY') return;
    const workflowId = live.record.workflowId;
    const run = node.runs + 1;
    const taskId = taskIdOf(workflowId, nodeId, run);
    const inputs = inputsOf(def, live.data);
    const inputsText = JSON.stringify(inputs);
    const params = Buffer.from(
      `{"workflow_id":${JSON.stringify(workflowId)},"node_id":${JSON.stringify(nodeId)},"run":${run},"inputs":${inputsText}}`,
      'utf8',
    );
    // Kept with the node (the scheduler forgets finished tasks): what this run was given.
    const kept =
      inputsText.length <= MAX_KEPT_INPUTS
        ? inputsText
        : `(not kept: the inputs were ${inputsText.length} characters of JSON; at most ${MAX_KEPT_INPUTS} are kept)`;
    const scope = def.metadata.scope?.trim() || JSON.stringify({ resources: [`workflow:${workflowId}/${nodeId}`] });
    this.c.transitions.run((tx) => {
      const result = tasks.submit(
        {
          taskId,
          target: def.agentId,
          priority: priorityOf(def),
          params,
          contentType: 'application/json',
          scope,
          submittedBy: `workflow:${workflowId}`,
        },
        ctx,
      );
      if (!result.accepted) {
        if (TEMPORARY_REFUSALS.has(result.code)) {
          // Not the node's fault: it waits (visibly) and is submitted again when the agent registers or a task ends.
          this.c.indexes.block(live, nodeId, result.code === 'BUFFER_FULL' ? '' : def.agentId);
          const waiting = blockedWaiting(result.code, def.agentId, result.reason);
          if (node.waiting !== waiting) {
            node.waiting = waiting.slice(0, 1024);
            store.workflows.putNode(workflowId, node);
            log.record({
              correlationId: workflowId,
              actor: ACTOR,
              eventType: 'workflow.node_blocked',
              level: 'WARN',
              details: {
                workflow_id: workflowId,
                node_id: nodeId,
                code: result.code,
                reason: result.reason.slice(0, 512),
              },
            });
            this.c.notify(tx, { workflowId, nodeId, state: live.record.state });
          }
          progress.settle(tx, live, by);
          return;
        }
        // Refused for a reason a retry would meet again (OVERSIZE_PAYLOAD, VALIDATION_ERROR…): failed for good, nobody asked.
        node.runs = run;
        node.taskId = '';
        node.inputs = kept;
        failure.fail(tx, live, nodeId, `its task could not be submitted: ${result.reason}`, by, true);
        progress.settle(tx, live, by);
        return;
      }
      progress.unblock(live, nodeId);
      node.runs = run;
      node.taskId = taskId;
      node.inputs = kept;
      node.startedAt = clock.now();
      node.completedAt = null;
      node.fireAt = null;
      node.error = '';
      node.waiting = '';
      progress.setStatus(tx, live, node, 'RUNNING', reason || `task ${taskId} submitted to ${def.agentId}`, by, {
        task_id: taskId,
        agent_id: def.agentId,
      });
      if (TERMINAL_TASK_STATES.has(result.task.state)) completion.applyOutcome(tx, live, node, result.task, by);
      else this.c.indexes.byTask.set(taskId, nodeKey(workflowId, nodeId));
      progress.settle(tx, live, by);
    }, workflowId);
  }
}
