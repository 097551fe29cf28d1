import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import { TERMINAL_TASK_STATES } from '../scheduler/model';
import type { CompiledRoute } from './cel';
import { ACTOR, type Core, type Parts, type RestorePart } from './core';
import { WorkflowError } from './errors';
import { countsOf, type WorkflowRecord } from './model';
import { buildLive, ENDED, nodeKey, type LiveWorkflow } from './state';
import { validateDefinition } from './validate';

/**
 * Workflows from the store: made live (load, for start / resume / cancel of one that does not run), every RUNNING /
 * WAITING one read back after a restart (restore: tasks reconciled by id, timers re-armed, questions watched), read
 * again after an error undid a change (reload), and given up when it cannot go on (abandon: tasks cancelled, FAILED).
 */
export class Restore implements RestorePart {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'guard' | 'live' | 'indexes' | 'timers' | 'notify'>,
    private readonly p: Pick<Parts, 'progress' | 'failure' | 'completion' | 'dispatch'>,
    /** progress.kick, through the facade (Workflows.kick: the seam a test injects a restore fault at). */
    private readonly kick: (tx: Transition, live: LiveWorkflow, by: string) => void = (tx, live, by) =>
      p.progress.kick(tx, live, by),
  ) {}

  /**
   * After a restart: every RUNNING / WAITING workflow read back. RUNNING nodes are reconciled with their task (COMPLETED
   * while we were down → its output applied; still open → waited for; gone → FAILED), HITL answers given meanwhile
   * applied, READY nodes started or their timers re-armed. A COMPLETED node is never run again by this.
   */
  restore(ctx: CallContext): void {
    let workflows = 0;
    for (const record of this.c.deps.store.workflows.listActive()) {
      try {
        this.restoreOne(record);
        workflows++;
      } catch (err) {
        // It cannot go on: it must not stay RUNNING with nobody running it (what restoreOne wrote was rolled back).
        this.c.deps.log.internalError(ACTOR, record.workflowId, err, { during: 'restore' });
        this.abandon(
          record.workflowId,
          `it could not be restored after the restart: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    this.c.deps.log.record({
      correlationId: ctx.correlationId,
      actor: ACTOR,
      eventType: 'workflow.restored',
      details: { workflows, running_nodes: this.c.indexes.byTask.size },
    });
    this.p.dispatch.drain();
  }

  private restoreOne(record: WorkflowRecord): void {
    const validated = validateDefinition(record.definition);
    if (!validated.ok) {
      // Stored by an older build whose rules differed: it cannot be run safely by these.
      const first = validated.issues.find((i) => i.severity === 'error');
      this.abandon(record.workflowId, `its definition no longer validates: ${first?.code}: ${first?.message}`);
      return;
    }
    const live = this.build(record, validated.dependents, validated.routes);
    const by = 'coordinator';
    const { progress, failure, completion } = this.p;
    this.c.transitions.run((tx) => {
      tx.install(() => this.c.live.set(record.workflowId, live));
      for (const node of record.nodes.values()) {
        if (node.status === 'RUNNING') {
          const task = node.taskId ? this.c.deps.tasks.task(node.taskId) : undefined;
          if (!task) {
            failure.fail(
              tx,
              live,
              node.nodeId,
              `its task ${node.taskId || '(none)'} is gone (pruned or lost while the coordinator was stopped): its outcome is unknown`,
              by,
            );
          } else if (TERMINAL_TASK_STATES.has(task.state)) {
            completion.applyOutcome(tx, live, node, task, by);
          } else {
            this.c.indexes.byTask.set(task.taskId, nodeKey(record.workflowId, node.nodeId));
          }
        } else if (node.status === 'FAILED' && node.invocationId) {
          const invocation = this.c.deps.hitl.get(node.invocationId);
          if (!invocation) {
            node.invocationId = '';
            failure.finalFailure(tx, live, node, `${node.error} (its HITL invocation is gone)`, by);
          } else if (invocation.state !== 'pending') {
            failure.applyHitl(tx, live, node, invocation, by);
          } else {
            failure.watch(live.record.workflowId, node.nodeId, invocation.id);
          }
        }
      }
      this.kick(tx, live, by);
      progress.settle(tx, live, by);
    }, record.workflowId);
  }

  /**
   * A running workflow read again from the store, inside `tx` (after an error undid a change of it, so that memory is
   * as the store is): whatever memory held of it dropped, its indexes, open tasks, timers and queued starts worked out
   * again from the records; `except`, the node whose change was undone, is left to the caller.
   */
  reload(tx: Transition, workflowId: string, except: string): LiveWorkflow {
    this.forget(workflowId);
    const record = this.c.deps.store.workflows.get(workflowId);
    if (!record) throw new Error(`workflow ${workflowId} is not in the store`);
    const live = this.load(record);
    tx.install(() => this.c.live.set(workflowId, live));
    for (const node of record.nodes.values()) {
      if (node.nodeId === except) continue;
      if (node.status === 'RUNNING' && node.taskId)
        this.c.indexes.byTask.set(node.taskId, nodeKey(workflowId, node.nodeId));
      else if (node.status === 'READY') this.p.progress.armOrQueue(tx, live, node);
      else if (node.status === 'FAILED' && node.invocationId)
        this.p.failure.watch(workflowId, node.nodeId, node.invocationId);
    }
    return live;
  }

  /**
   * A workflow that cannot go on (restore failed, its definition no longer validates, an internal error could not be
   * contained): read again from the store, whatever memory holds of it dropped; its RUNNING nodes FAILED with `reason`
   * and their tasks cancelled, pending questions withdrawn, the workflow FAILED with `reason`. A resume may go on from it.
   * `fromScheduler`: called inside the scheduler's end-of-task callback, which must not call the scheduler: the tasks
   * are cancelled right after it.
   */
  abandon(workflowId: string, reason: string, fromScheduler = false): void {
    const by = 'coordinator';
    const ctx: CallContext = { correlationId: workflowId };
    const { store, log, clock, tasks } = this.c.deps;
    this.forget(workflowId);
    const record = store.workflows.get(workflowId);
    if (!record || ENDED.has(record.state)) return;
    try {
      this.c.transitions.run((tx) => {
        const now = clock.now();
        const nodeReason = `workflow FAILED: ${reason}`.slice(0, 4096);
        const cancel: string[] = [];
        for (const node of record.nodes.values()) {
          let changed = false;
          if (node.invocationId) {
            this.p.failure.withdraw(node, nodeReason, by, ctx);
            changed = true;
          }
          if (node.status === 'RUNNING') {
            if (node.taskId) cancel.push(node.taskId);
            node.status = 'FAILED';
            node.error = nodeReason;
            node.waiting = '';
            node.completedAt = now;
            log.record({
              correlationId: workflowId,
              actor: by,
              eventType: 'workflow.node',
              level: 'WARN',
              details: {
                workflow_id: workflowId,
                node_id: node.nodeId,
                from: 'RUNNING',
                to: 'FAILED',
                reason: nodeReason.slice(0, 1024),
                run: node.runs,
              },
            });
            changed = true;
          } else if (node.status === 'READY') {
            node.waiting = `a resume: the workflow ended FAILED before this node started (ResumeWorkflow runs it)`;
            node.fireAt = null;
            changed = true;
          }
          if (changed) {
            store.workflows.putNode(workflowId, node);
            this.c.notify(tx, { workflowId, nodeId: node.nodeId, state: 'FAILED' });
          }
        }
        const from = record.state;
        record.state = 'FAILED';
        record.reason = reason.slice(0, 4096);
        record.completedAt = now;
        record.updatedAt = now;
        store.workflows.putWorkflow(record, countsOf(record.nodes.values()));
        log.record({
          correlationId: workflowId,
          actor: by,
          eventType: 'workflow.state',
          level: 'WARN',
          details: { workflow_id: workflowId, from, to: 'FAILED', reason: record.reason.slice(0, 1024) },
        });
        this.c.notify(tx, { workflowId, state: 'FAILED' });
        const cancelAll = () => {
          for (const taskId of cancel) {
            try {
              if (!TERMINAL_TASK_STATES.has(tasks.task(taskId)?.state ?? 'COMPLETED'))
                tasks.cancel(taskId, `workflow ${workflowId} FAILED: ${reason}`.slice(0, 1024), ctx);
            } catch {
              // Ended meanwhile: nothing to cancel.
            }
          }
        };
        if (fromScheduler)
          queueMicrotask(() => this.c.guard.run(workflowId, () => this.c.transitions.run(cancelAll, workflowId)));
        else cancelAll();
      }, workflowId);
    } catch (err) {
      log.internalError(ACTOR, workflowId, err, { during: 'abandon' });
    }
  }

  /** Drops everything memory holds of a workflow (indexes, timers, tasks watched), not the store. */
  forget(workflowId: string): void {
    const live = this.c.live.get(workflowId);
    this.c.live.delete(workflowId);
    const record = live?.record ?? this.c.deps.store.workflows.get(workflowId);
    if (!record) return;
    for (const node of record.nodes.values()) this.c.timers.disarm(nodeKey(workflowId, node.nodeId));
    this.c.indexes.forget(record);
  }

  /** A stored workflow made live (not yet registered as running: setWorkflow does that when it becomes RUNNING); `data` replaces its stored data (StartWorkflow). */
  load(record: WorkflowRecord, data?: Record<string, unknown>): LiveWorkflow {
    const validated = validateDefinition(record.definition);
    if (!validated.ok) {
      const first = validated.issues.find((i) => i.severity === 'error');
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${record.workflowId}' no longer validates: ${first?.code}: ${first?.message}`,
      );
    }
    return this.build(record, validated.dependents, validated.routes, data);
  }

  private build(
    record: WorkflowRecord,
    dependents: ReadonlyMap<string, readonly string[]>,
    routes: ReadonlyMap<string, CompiledRoute>,
    data?: Record<string, unknown>,
  ): LiveWorkflow {
    return buildLive(record, dependents, routes, this.c.deps.store.workflows.dataLog(record.workflowId), data);
  }
}
