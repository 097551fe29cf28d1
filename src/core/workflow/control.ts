import type { CallContext } from '../context';
import { parseBoundedJson } from '../json';
import type { Core, Parts, Speaker } from './core';
import { WorkflowError } from './errors';
import type { WorkflowDetail } from './model';
import { isPlainObject } from './paths';
import { applyWrites, downstream, ENDED, firstOf, MAX_WORKFLOW_DATA_BYTES, nodeOf } from './state';

/**
 * What a person or an agent asks of a workflow that exists: StartWorkflow (its roots READY), Run Node (a READY MANUAL
 * node now), ResumeWorkflow (a node and its downstream back to PENDING, data merged, the workflow running again) and
 * Cancel. Every check comes before the transition, so a refusal changes nothing.
 */
export class Control {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'live' | 'indexes'>,
    private readonly p: Pick<Parts, 'progress' | 'failure' | 'dispatch' | 'data' | 'restore' | 'access' | 'queries'>,
  ) {}

  /**
   * Starts a DEFINED workflow with initial workflow_data (a JSON object; '' = {}): its roots become READY. Only its
   * creator (or a credential that may act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  start(workflowId: string, dataText: string, by: string, speaker: Speaker): WorkflowDetail {
    const { progress, data, queries } = this.p;
    const running = this.c.live.get(workflowId);
    const record = running?.record ?? queries.stored(workflowId);
    this.p.access.checkCreator('start', record, by, speaker);
    if (running) {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${workflowId}' was already started (${running.record.state}): use ResumeWorkflow to run a node again`,
      );
    }
    if (record.state !== 'DEFINED') {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${workflowId}' was already started (${record.state}): use ResumeWorkflow to run a node again`,
      );
    }
    const initial = readData(dataText, 'workflow_data') ?? {};
    const live = this.p.restore.load(record, initial);
    const now = this.c.deps.clock.now();
    record.startedAt = now;
    record.startedBy = by;
    this.c.transitions.run((tx) => {
      data.snapshotData(live);
      progress.setWorkflow(tx, live, 'RUNNING', '', by, { data_bytes: live.dataBytes });
      for (const def of record.definition.nodes)
        if (def.dependencies.length === 0) progress.ready(tx, live, def.nodeId, 'a root: no dependencies', by);
      progress.settle(tx, live, by);
    }, workflowId);
    this.p.dispatch.drain();
    return queries.answer(workflowId);
  }

  /** Runs a READY MANUAL node now (the editor's Run Node). */
  runNode(workflowId: string, nodeId: string, by: string, ctx: CallContext): WorkflowDetail {
    const live = this.p.queries.liveOrRefuse(workflowId, 'run a node');
    const def = live.defs.get(nodeId);
    if (!def) throw new WorkflowError('not_found', 'NOT_FOUND', `workflow '${workflowId}' has no node '${nodeId}'`);
    const node = nodeOf(live, nodeId);
    if (def.trigger !== 'MANUAL')
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `node '${nodeId}' is a ${def.trigger} node: it runs by itself, not by Run Node`,
      );
    if (node.status !== 'READY') {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `node '${nodeId}' is ${node.status}, not READY${node.waiting ? ` (${node.waiting})` : ''}`,
      );
    }
    if (live.failed.size > 0)
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${workflowId}' is failing (${live.record.reason}): resume it first`,
      );
    this.p.dispatch.startNode(live, nodeId, `Run Node by ${by}`, by, { ...ctx, correlationId: workflowId });
    this.p.dispatch.drain();
    return this.p.queries.answer(workflowId);
  }

  /**
   * ResumeWorkflow: `nodeId` and every node downstream of it (by dependencies) go back to PENDING (their earlier outputs
   * stay in workflow_data until a new run overwrites them), `dataText` (a JSON object, '' = none) is merged over
   * workflow_data by top-level key, and the workflow runs again; `nodeId` itself runs at once when its dependencies are
   * COMPLETED, whatever its trigger. Refused while it or a node downstream of it is RUNNING, when one of its
   * dependencies is SKIPPED or FAILED (resume from that one), and when a node FAILED for good is not downstream of it
   * (the workflow would end FAILED again at once: the message names it). Only its creator (or a credential that may
   * act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  resume(
    workflowId: string,
    nodeId: string,
    dataText: string,
    by: string,
    ctx: CallContext,
    speaker: Speaker,
  ): WorkflowDetail {
    const { progress, queries } = this.p;
    const active = this.c.live.get(workflowId);
    const record = active?.record ?? queries.stored(workflowId);
    this.p.access.checkCreator('resume', record, by, speaker);
    if (record.state === 'DEFINED')
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${workflowId}' has not started: use StartWorkflow`,
      );
    const def = record.definition.nodes.find((n) => n.nodeId === nodeId);
    if (!def) throw new WorkflowError('not_found', 'NOT_FOUND', `workflow '${workflowId}' has no node '${nodeId}'`);
    const merge = readData(dataText, 'workflow_data');
    const live = active ?? this.p.restore.load(record);
    const reset = downstream(live, [nodeId]);
    const running = reset.find((id) => nodeOf(live, id).status === 'RUNNING');
    if (running !== undefined) {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        running === nodeId
          ? `node '${nodeId}' is RUNNING: wait for it to end (or cancel its task) before resuming from it`
          : `node '${running}', downstream of '${nodeId}', is RUNNING: wait for it to end before resuming from '${nodeId}'`,
      );
    }
    const blocking = def.dependencies.find(
      (d) => nodeOf(live, d).status === 'SKIPPED' || nodeOf(live, d).status === 'FAILED',
    );
    if (blocking !== undefined) {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `node '${nodeId}' depends on '${blocking}', which is ${nodeOf(live, blocking).status}: resume from '${blocking}' (or a node before it)`,
      );
    }
    // A node FAILED for good that this resume would not reset keeps the workflow failing: it would end FAILED again at once.
    const resetting = new Set(reset);
    const stranded = firstOf(
      [...live.failed].filter((id) => !resetting.has(id)),
      10,
    );
    if (stranded.length > 0) {
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `resuming from '${nodeId}' would leave FAILED node(s) ${stranded.join(', ')} failed (not downstream of '${nodeId}'), ` +
          `and the workflow would end FAILED again: resume from ${stranded[0]} (or from a node upstream of every FAILED node)`,
      );
    }
    // Merged by top-level key, in place (the last check: nothing is refused after this).
    const merged = merge
      ? applyWrites(
          live,
          Object.entries(merge).map(([k, v]): [readonly string[], unknown] => [[k], v]),
        )
      : undefined;
    if (merged && 'error' in merged) {
      throw new WorkflowError(
        'invalid',
        merged.kind === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR',
        `${merged.error} with this data`,
      );
    }
    const wasActive = active !== undefined;
    const ctxWf: CallContext = { ...ctx, correlationId: workflowId };
    this.c.transitions.run((tx) => {
      const reason = `resumed from ${nodeId} by ${by}`;
      for (const id of reset) progress.reset(tx, live, id, reason, by, true, ctxWf);
      if (merged) this.p.data.commitWrites(live, merged);
      if (!wasActive) {
        record.completedAt = null;
        progress.setWorkflow(tx, live, 'RUNNING', '', by, {
          resumed_from: nodeId,
          merged_keys: merge ? Object.keys(merge).slice(0, 50) : [],
        });
      } else {
        this.c.deps.log.record({
          correlationId: workflowId,
          actor: by,
          eventType: 'workflow.resumed',
          details: {
            workflow_id: workflowId,
            node_id: nodeId,
            reset: reset.length,
            merged_keys: merge ? Object.keys(merge).slice(0, 50) : [],
          },
        });
      }
      progress.kick(tx, live, by);
      // The node resumed from runs now whatever its trigger (a person asked for it), once its dependencies are COMPLETED.
      const node = nodeOf(live, nodeId);
      if (node.status === 'READY' && live.failed.size === 0) progress.queueStart(live, nodeId);
      progress.settle(tx, live, by);
    }, workflowId);
    this.p.dispatch.drain();
    return queries.answer(workflowId);
  }

  /** Cancels a workflow: running tasks cancelled, nodes not finished SKIPPED, pending questions withdrawn, CANCELLED. */
  cancel(workflowId: string, reason: string, by: string, ctx: CallContext): WorkflowDetail {
    const { progress, failure, queries } = this.p;
    const { store, clock, tasks } = this.c.deps;
    const active = this.c.live.get(workflowId);
    const record = active?.record ?? queries.stored(workflowId);
    if (ENDED.has(record.state))
      throw new WorkflowError(
        'refused',
        'FAILED_PRECONDITION',
        `workflow '${workflowId}' already ended ${record.state}`,
      );
    const live = active ?? this.p.restore.load(record);
    const why = `workflow cancelled by ${by}${reason ? `: ${reason}` : ''}`;
    const ctxWf: CallContext = { ...ctx, correlationId: workflowId };
    this.c.transitions.run((tx) => {
      const cancelTasks: string[] = [];
      for (const node of record.nodes.values()) {
        progress.letGo(tx, live, node.nodeId);
        if (node.invocationId) {
          failure.withdraw(node, why, by, ctxWf);
          store.workflows.putNode(workflowId, node);
        }
        if (node.status === 'RUNNING') {
          this.c.indexes.byTask.delete(node.taskId);
          cancelTasks.push(node.taskId);
        }
        if (node.status === 'PENDING' || node.status === 'READY' || node.status === 'RUNNING') {
          node.error = why;
          node.waiting = '';
          node.fireAt = null;
          node.completedAt = node.status === 'RUNNING' ? clock.now() : node.completedAt;
          progress.setStatus(tx, live, node, 'SKIPPED', why, by);
        }
      }
      record.completedAt = clock.now();
      progress.setWorkflow(tx, live, 'CANCELLED', why, by, {});
      for (const taskId of cancelTasks) {
        try {
          tasks.cancel(taskId, why, ctxWf);
        } catch {
          // It ended meanwhile: nothing to cancel.
        }
      }
      progress.persist(live);
      tx.install(() => this.c.live.delete(workflowId));
    }, workflowId);
    return queries.answer(workflowId);
  }
}

/** A JSON object from an agent or a person (StartWorkflow, ResumeWorkflow): '' is none. */
function readData(text: string, what: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return undefined;
  const parsed = parseBoundedJson(text, { what, maxBytes: MAX_WORKFLOW_DATA_BYTES });
  if (!parsed.ok)
    throw new WorkflowError(
      'invalid',
      parsed.limit === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR',
      parsed.reason,
    );
  if (!isPlainObject(parsed.value))
    throw new WorkflowError(
      'invalid',
      'VALIDATION_ERROR',
      `${what} must be a JSON object (its top-level keys are the workflow's data), not ${Array.isArray(parsed.value) ? 'a list' : typeof parsed.value}`,
    );
  return parsed.value;
}
