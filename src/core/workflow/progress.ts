import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import type { Core, Parts, ProgressPart } from './core';
import { nextFireAfter } from './cron';
import type { NodeRecord, NodeStatus, WorkflowState } from './model';
import { endedWaiting, readyWaiting, scheduleWaiting, waitingFor } from './notices';
import {
  ACTIVE,
  clearRun,
  ENDED,
  moveNode,
  moveWorkflow,
  nextForPending,
  nodeKey,
  nodeOf,
  reindex,
  settledState,
  type LiveWorkflow,
} from './state';

/**
 * How a workflow moves on, inside the caller's transition: each node transition (one node row, one `workflow.node`
 * event), the workflow's own (settle: its state from its nodes, one `workflow.state` event), PENDING nodes becoming
 * READY or SKIPPED as their dependencies end, READY nodes queued or their timers armed (tx.arm), nodes reset (resume,
 * loop backs), and the end of a workflow (its timers, questions and memory let go).
 */
export class Progress implements ProgressPart {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'live' | 'indexes' | 'timers' | 'notify'>,
    private readonly p: Pick<Parts, 'failure' | 'dispatch'>,
  ) {}

  /** One node transition: the row, the event, the indexes, the listeners. */
  setStatus(
    tx: Transition,
    live: LiveWorkflow,
    node: NodeRecord,
    to: NodeStatus,
    reason: string,
    by: string,
    details: Record<string, unknown> = {},
  ): void {
    const { store, log, clock } = this.c.deps;
    const from = moveNode(live, node, to, clock.now(), (id) => this.unblock(live, id));
    store.workflows.putNode(live.record.workflowId, node);
    log.record({
      correlationId: live.record.workflowId,
      actor: by,
      eventType: 'workflow.node',
      level: to === 'FAILED' ? 'WARN' : 'INFO',
      details: {
        workflow_id: live.record.workflowId,
        node_id: node.nodeId,
        from,
        to,
        reason: reason.slice(0, 1024),
        run: node.runs,
        ...details,
      },
    });
    this.notifyNode(tx, live, node);
  }

  /** Listeners hear that a node changed (its workflow's state with it). */
  notifyNode(tx: Transition, live: LiveWorkflow, node: NodeRecord): void {
    this.c.notify(tx, { workflowId: live.record.workflowId, nodeId: node.nodeId, state: live.record.state });
  }

  /** A node's fields changed but not its status: its row and its indexes. */
  putNode(live: LiveWorkflow, node: NodeRecord): void {
    this.c.deps.store.workflows.putNode(live.record.workflowId, node);
    reindex(live, node, (id) => this.unblock(live, id));
  }

  setWorkflow(
    tx: Transition,
    live: LiveWorkflow,
    to: WorkflowState,
    reason: string,
    by: string,
    details: Record<string, unknown>,
  ): void {
    const record = live.record;
    const from = moveWorkflow(live, to, reason, this.c.deps.clock.now());
    if (ACTIVE.has(to)) tx.install(() => this.c.live.set(record.workflowId, live));
    this.c.deps.log.record({
      correlationId: record.workflowId,
      actor: by,
      eventType: 'workflow.state',
      level: to === 'FAILED' ? 'WARN' : 'INFO',
      details: { workflow_id: record.workflowId, from, to, reason: reason.slice(0, 1024), ...details },
    });
    this.c.notify(tx, { workflowId: record.workflowId, state: to });
  }

  /** Writes the workflow's small row (state, reason, times, node counts; never its definition or data) when something of it changed. */
  persist(live: LiveWorkflow): void {
    if (!live.dirty) return;
    live.dirty = false;
    live.record.updatedAt = this.c.deps.clock.now();
    this.c.deps.store.workflows.putWorkflow(live.record, live.counts);
  }

  /** The workflow's state from its nodes (state.ts settledState); writes the workflow row when it changed; an ended one ends. */
  settle(tx: Transition, live: LiveWorkflow, by: string): void {
    const record = live.record;
    if (!ACTIVE.has(record.state)) return;
    const { to, reason } = settledState(live, waitingFor);
    if (to !== record.state) {
      if (ENDED.has(to)) record.completedAt = this.c.deps.clock.now();
      this.setWorkflow(tx, live, to, reason, by, {});
    } else if (reason !== record.reason) {
      record.reason = reason;
      live.dirty = true;
    }
    this.persist(live);
    if (ENDED.has(record.state)) {
      this.end(tx, live, by);
      return;
    }
    if (live.failed.size === 0 && live.held.size > 0) {
      // The failure that held them was cleared (a resume): they go now.
      for (const id of live.held) this.queueStart(live, id);
      live.held.clear();
      this.p.dispatch.scheduleDrain();
    }
  }

  /** The workflow ended: its timers stop, its open questions are withdrawn, it leaves memory. */
  private end(tx: Transition, live: LiveWorkflow, by: string): void {
    const workflowId = live.record.workflowId;
    for (const node of live.record.nodes.values()) {
      this.letGo(tx, live, node.nodeId);
      if (node.invocationId) {
        this.p.failure.withdraw(node, `workflow ${live.record.state}`, by, { correlationId: workflowId });
        this.c.deps.store.workflows.putNode(workflowId, node);
      } else if (node.status === 'READY') {
        // It stays READY (a resume picks it up) but waits for nothing any more.
        node.waiting = endedWaiting(live.record.state);
        node.fireAt = null;
        this.c.deps.store.workflows.putNode(workflowId, node);
      }
    }
    tx.install(() => this.c.live.delete(workflowId));
  }

  /** A node's timer disarmed, its queued start dropped, its block lifted. */
  letGo(tx: Transition, live: LiveWorkflow, nodeId: string): void {
    const k = nodeKey(live.record.workflowId, nodeId);
    tx.disarm(this.c.timers, k);
    this.c.indexes.toStart.delete(k);
    this.unblock(live, nodeId);
  }

  /** The dependents of a FAILED or SKIPPED node that are still PENDING are SKIPPED, and theirs (iteratively: no recursion). */
  skipDependents(tx: Transition, live: LiveWorkflow, nodeId: string, status: 'FAILED' | 'SKIPPED', by: string): void {
    for (const d of live.dependents.get(nodeId) ?? []) this.skip(tx, live, d, `dependency '${nodeId}' ${status}`, by);
  }

  skip(tx: Transition, live: LiveWorkflow, start: string, reason: string, by: string): void {
    const stack: Array<[string, string]> = [[start, reason]];
    while (stack.length > 0) {
      const [id, why] = stack.pop()!;
      const node = nodeOf(live, id);
      if (node.status !== 'PENDING' && node.status !== 'READY') continue;
      this.letGo(tx, live, id);
      node.error = why;
      node.waiting = '';
      node.fireAt = null;
      this.setStatus(tx, live, node, 'SKIPPED', why, by);
      for (const d of live.dependents.get(id) ?? []) stack.push([d, `dependency '${id}' SKIPPED`]);
    }
  }

  /** A PENDING node whose dependencies all COMPLETED becomes READY; one with a SKIPPED or finally FAILED dependency is SKIPPED. */
  consider(tx: Transition, live: LiveWorkflow, nodeId: string, by: string): void {
    if (nodeOf(live, nodeId).status !== 'PENDING') return;
    // A PENDING node's `waiting` (the dependencies not COMPLETED yet) is worked out when it is read, never written.
    const next = nextForPending(live, nodeId);
    if (next === undefined) return;
    if ('skip' in next) this.skip(tx, live, nodeId, next.skip, by);
    else this.ready(tx, live, nodeId, next.ready, by);
  }

  /** PENDING → READY; what it then waits for depends on its trigger. */
  ready(tx: Transition, live: LiveWorkflow, nodeId: string, reason: string, by: string): void {
    const def = live.defs.get(nodeId)!;
    const node = nodeOf(live, nodeId);
    const now = this.c.deps.clock.now();
    node.readyAt = now;
    node.fireAt = def.trigger === 'SCHEDULE' ? nextFireAfter(def.metadata.schedule ?? '', now) : null;
    node.error = '';
    node.waiting = readyWaiting(def, live.record.workflowId, node.fireAt);
    this.setStatus(tx, live, node, 'READY', reason, by, node.fireAt !== null ? { fire_at: isoUtc(node.fireAt) } : {});
    this.armOrQueue(tx, live, node);
  }

  /** A READY node: a DEPENDENCY node is queued to start, a due one (fireAt) gets its timer (tx.arm); others wait. */
  armOrQueue(tx: Transition, live: LiveWorkflow, node: NodeRecord): void {
    const def = live.defs.get(node.nodeId)!;
    if (node.fireAt !== null) {
      const k = nodeKey(live.record.workflowId, node.nodeId);
      const delay = node.fireAt - this.c.deps.clock.now();
      if (delay <= 0) {
        this.queueStart(live, node.nodeId);
        return;
      }
      tx.arm(this.c.timers, k, delay, () => {
        if (this.c.live.get(live.record.workflowId) !== live) return;
        this.queueStart(live, node.nodeId);
        this.p.dispatch.drain();
      });
      return;
    }
    if (def.trigger === 'DEPENDENCY') this.queueStart(live, node.nodeId);
  }

  /** A node (and so everything downstream, by the caller) back to PENDING: its task, timer and question let go. */
  reset(
    tx: Transition,
    live: LiveWorkflow,
    nodeId: string,
    reason: string,
    by: string,
    resetLoops: boolean,
    ctx?: CallContext,
  ): void {
    const node = nodeOf(live, nodeId);
    this.letGo(tx, live, nodeId);
    if (node.invocationId) this.p.failure.withdraw(node, reason, by, ctx ?? { correlationId: live.record.workflowId });
    clearRun(node, resetLoops);
    if (node.status === 'PENDING') this.c.deps.store.workflows.putNode(live.record.workflowId, node);
    else this.setStatus(tx, live, node, 'PENDING', reason, by);
  }

  /**
   * Every node that can move does: PENDING nodes whose dependencies are done become READY (or SKIPPED), READY nodes are
   * queued or their timers armed. O(V + E); after a restart and a resume.
   */
  kick(tx: Transition, live: LiveWorkflow, by: string): void {
    for (const def of live.record.definition.nodes) {
      const node = nodeOf(live, def.nodeId);
      if (node.status === 'PENDING') this.consider(tx, live, def.nodeId, by);
      else if (node.status === 'READY') {
        if (def.trigger === 'SCHEDULE' && node.fireAt === null) {
          // Its time was dropped when the workflow ended: the next cron time from now (a resume), not from when it
          // became READY, or every time missed while it was ended would fire at once.
          const now = this.c.deps.clock.now();
          node.readyAt = now;
          node.fireAt = nextFireAfter(def.metadata.schedule ?? '', now);
          node.waiting = scheduleWaiting(def, node.fireAt);
          this.putNode(live, node);
        }
        this.armOrQueue(tx, live, node);
      }
    }
  }

  queueStart(live: LiveWorkflow, nodeId: string): void {
    this.c.indexes.toStart.add(nodeKey(live.record.workflowId, nodeId));
  }

  unblock(live: LiveWorkflow, nodeId: string): void {
    this.c.indexes.unblock(live, nodeId);
  }
}
