import type { Transition } from '../kernel/transitions';
import type { TaskRecord } from '../scheduler/model';
import { ACTOR, type CompletionPart, type Core, type Parts } from './core';
import type { NodeRecord } from './model';
import { PathError, getPath } from './paths';
import { applyWrites, downstream, maxIterations, nodeOf, outputOf, unkey, type LiveWorkflow } from './state';

/**
 * A node's end from its task's end (learnt inside the scheduler's transaction that ends the task, so the node's
 * COMPLETED and its task's COMPLETED commit together): its output (the FULFILLED ACK's `result`), output_mapping into
 * workflow_data, then its route (SKIPPED dependents, loop backs within max_iterations), then its dependents. An error
 * while this is applied undoes it alone (a nested transition, under a savepoint), and the node is FAILED with the
 * internal error from what the store holds (restore.ts reload); if even that fails, the workflow is abandoned.
 */
export class Completion implements CompletionPart {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'live' | 'indexes' | 'guard'>,
    private readonly p: Pick<Parts, 'progress' | 'failure' | 'dispatch' | 'data' | 'restore'>,
  ) {}

  /** Inside the scheduler's transaction that ended `task`: the node's outcome commits with it. */
  taskEnded(task: TaskRecord): void {
    if (this.c.guard.isStopped) return;
    // Any task that ends (a workflow's or not) frees a slot in the scheduler's queue: one node held back may go.
    if (this.c.indexes.taskEnded()) this.p.dispatch.scheduleDrain();
    const k = this.c.indexes.byTask.get(task.taskId);
    if (k === undefined) return;
    this.c.indexes.byTask.delete(task.taskId);
    const [workflowId, nodeId] = unkey(k);
    const live = this.c.live.get(workflowId);
    const node = live?.record.nodes.get(nodeId);
    if (!live || !node || node.status !== 'RUNNING' || node.taskId !== task.taskId) return;
    try {
      // Under a savepoint of the scheduler's transaction: a throw undoes this alone, the task's end still commits.
      this.c.deps.store.savepoint(() =>
        this.c.transitions.run((tx) => {
          this.applyOutcome(tx, live, node, task, task.assignedAgentId || ACTOR);
          this.p.progress.settle(tx, live, ACTOR);
        }, workflowId),
      );
    } catch (err) {
      this.c.deps.log.internalError(ACTOR, workflowId, err, {
        node_id: nodeId,
        task_id: task.taskId,
        during: 'task_ended',
      });
      this.internalFailure(
        live,
        nodeId,
        `internal error while applying the end of task ${task.taskId} (${task.state}): ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    // Submissions wait until the scheduler is done ending the task.
    this.p.dispatch.scheduleDrain();
  }

  /**
   * After an error undid a node's end: the workflow is read again from the store (memory as the store is, the
   * question the undone change asked withdrawn), the node FAILED with the error, its dependents SKIPPED, and the
   * workflow moves on (FAILED once nothing runs). If even that fails, the workflow is abandoned.
   */
  private internalFailure(stale: LiveWorkflow, nodeId: string, reason: string): void {
    const workflowId = stale.record.workflowId;
    const asked = nodeOf(stale, nodeId).invocationId;
    try {
      this.c.transitions.run((tx) => {
        const live = this.p.restore.reload(tx, workflowId, nodeId);
        const node = nodeOf(live, nodeId);
        if (asked && asked !== node.invocationId)
          this.p.failure.withdraw({ ...node, invocationId: asked }, reason, ACTOR, { correlationId: workflowId });
        if (node.invocationId) this.p.failure.withdraw(node, reason, ACTOR, { correlationId: workflowId });
        node.error = reason.slice(0, 4096);
        node.waiting = '';
        node.fireAt = null;
        node.completedAt = this.c.deps.clock.now();
        if (node.status !== 'FAILED')
          this.p.progress.setStatus(tx, live, node, 'FAILED', reason, ACTOR, { internal_error: true });
        else this.p.progress.putNode(live, node);
        this.p.progress.skipDependents(tx, live, nodeId, 'FAILED', ACTOR);
        this.p.progress.settle(tx, live, ACTOR);
      }, workflowId);
    } catch (err) {
      this.c.deps.log.internalError(ACTOR, workflowId, err, { node_id: nodeId, during: 'recover' });
      this.p.restore.abandon(workflowId, `an internal error left node ${nodeId} in an unknown state: ${reason}`, true);
    }
  }

  applyOutcome(tx: Transition, live: LiveWorkflow, node: NodeRecord, task: TaskRecord, by: string): void {
    const failure = this.p.failure;
    if (task.state === 'COMPLETED') {
      const out = outputOf(task);
      if ('error' in out) failure.fail(tx, live, node.nodeId, `task ${task.taskId}: ${out.error}`, by);
      else this.complete(tx, live, node.nodeId, out.output, `task ${task.taskId} COMPLETED`, by);
      return;
    }
    const code = task.errorCode ? `${task.errorCode}: ` : '';
    failure.fail(
      tx,
      live,
      node.nodeId,
      `task ${task.taskId} ${task.state}: ${code}${task.note || 'no reason given'}`,
      by,
    );
  }

  /** A node finished with `output`: output_mapping, then the route (SKIPPED dependents, loop backs), then its dependents. */
  complete(
    tx: Transition,
    live: LiveWorkflow,
    nodeId: string,
    output: Record<string, unknown>,
    reason: string,
    by: string,
  ): void {
    const { progress, failure } = this.p;
    const def = live.defs.get(nodeId)!;
    const node = nodeOf(live, nodeId);
    const outputText = JSON.stringify(output);
    const refuse = (why: string) => {
      node.output = outputText;
      failure.fail(tx, live, nodeId, why, by);
    };
    // Everything that may refuse is worked out first; the writes are undone on a refusal, so nothing is half done.
    const writes: Array<[string, unknown]> = [];
    try {
      for (const [outKey, dataPath] of Object.entries(def.outputMapping)) {
        const value = getPath(output, outKey);
        if (value === undefined)
          throw new PathError(
            `output_mapping: the output has no '${outKey}' (it has ${Object.keys(output).slice(0, 10).join(', ') || 'no key'})`,
          );
        writes.push([dataPath, value]);
      }
    } catch (err) {
      refuse(
        err instanceof PathError
          ? err.message.startsWith('output_mapping')
            ? err.message
            : `output_mapping: ${err.message}`
          : String(err),
      );
      return;
    }
    const written = applyWrites(live, writes);
    if ('error' in written) {
      refuse(`output_mapping: ${written.error}`);
      return;
    }
    const dependents = live.dependents.get(nodeId) ?? [];
    let chosen: ReadonlySet<string> | undefined;
    const loops: string[] = [];
    const route = live.routes.get(nodeId);
    if (route) {
      const choice = route.choose(live.data, output);
      if (!choice.ok) {
        written.undo();
        refuse(`route: ${choice.error}`);
        return;
      }
      chosen = new Set(choice.chosen);
      const deps = new Set(dependents);
      for (const target of choice.chosen) if (!deps.has(target)) loops.push(target);
      for (const target of loops) {
        const refusal = this.loopRefusal(live, nodeId, target);
        if (refusal !== undefined) {
          written.undo();
          refuse(refusal);
          return;
        }
      }
    }
    this.p.data.commitWrites(live, written);
    node.output = outputText;
    node.error = '';
    node.waiting = '';
    node.completedAt = this.c.deps.clock.now();
    progress.setStatus(tx, live, node, 'COMPLETED', reason, by, chosen ? { chosen: [...chosen] } : {});
    if (chosen) {
      for (const d of dependents)
        if (!chosen.has(d)) progress.skip(tx, live, d, `not chosen by the route of '${nodeId}'`, by);
    }
    for (const target of loops) {
      const t = nodeOf(live, target);
      const loopsBefore = t.loops;
      const why = `loop back from '${nodeId}' (iteration ${loopsBefore + 1})`;
      for (const id of downstream(live, [target])) progress.reset(tx, live, id, why, by, false);
      nodeOf(live, target).loops = loopsBefore + 1;
      this.c.deps.store.workflows.putNode(live.record.workflowId, nodeOf(live, target));
      progress.consider(tx, live, target, by);
    }
    for (const d of dependents) progress.consider(tx, live, d, by);
  }

  /** Why a route's loop back from `nodeId` to `target` is refused (max_iterations, a node FAILED for good or RUNNING downstream), if it is. */
  private loopRefusal(live: LiveWorkflow, nodeId: string, target: string): string | undefined {
    const t = nodeOf(live, target);
    const max = maxIterations(live.defs.get(target)!);
    if (t.loops + 1 > max)
      return `route: loop back to '${target}' refused: it has looped ${t.loops} time(s), its max_iterations is ${max}`;
    let busy: string | undefined;
    let failed: string | undefined;
    for (const id of downstream(live, [target])) {
      const other = nodeOf(live, id);
      if (busy === undefined && id !== nodeId && other.status === 'RUNNING') busy = id;
      if (failed === undefined && other.status === 'FAILED' && !other.invocationId) failed = id;
    }
    if (failed !== undefined) {
      // Resetting it would undo a final failure (the workflow ends FAILED once nothing runs): only a resume may.
      return (
        `route: loop back to '${target}' refused: '${failed}'${failed === target ? '' : ' (downstream of it)'} FAILED for good ` +
        `(${nodeOf(live, failed).error.slice(0, 300)}): resume the workflow from it instead`
      );
    }
    if (busy !== undefined) return `route: loop back to '${target}' refused: '${busy}' (downstream of it) is RUNNING`;
    return undefined;
  }
}
