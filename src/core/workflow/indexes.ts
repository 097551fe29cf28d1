import { nodeKey, unkey, type LiveWorkflow } from './state';
import type { WorkflowRecord } from './model';

/**
 * The engine's indexes across workflows, as plain data (no store, no timers): which READY nodes to submit, which the
 * scheduler refused for now (by cause), which tasks are open for RUNNING nodes. Changed inside a transition only
 * through `tx.install` (the parts do), so a rolled-back transaction leaves them as they were.
 */
export class StartIndexes {
  /** Open tasks of RUNNING nodes: task id → node key. */
  readonly byTask = new Map<string, string>();
  /** READY nodes to submit (DEPENDENCY nodes, fired timers, events, retries), by node key, in order. */
  readonly toStart = new Set<string>();
  /** READY nodes the scheduler refused BUFFER_FULL, by node key, first refused first: tried again as slots free. */
  readonly queueBlocked = new Set<string>();
  /** READY nodes the scheduler refused NO_ROUTE / AGENT_SHUTDOWN, by the agent they wait for: tried again when it registers. */
  readonly agentBlocked = new Map<string, Set<string>>();
  /** Tasks that ended since the last drain while nodes waited for room: how many queue-blocked nodes to try. */
  freed = 0;

  /** A READY node the scheduler refused for now: `why` is the agent it waits for, '' for room in the queue. */
  block(live: LiveWorkflow, nodeId: string, why: string): void {
    const before = live.blocked.get(nodeId);
    if (before === why) return;
    if (before !== undefined) this.unblock(live, nodeId);
    live.blocked.set(nodeId, why);
    const k = nodeKey(live.record.workflowId, nodeId);
    if (why === '') {
      this.queueBlocked.add(k);
    } else {
      let keys = this.agentBlocked.get(why);
      if (!keys) this.agentBlocked.set(why, (keys = new Set()));
      keys.add(k);
    }
  }

  unblock(live: LiveWorkflow, nodeId: string): void {
    const why = live.blocked.get(nodeId);
    if (why === undefined) return;
    live.blocked.delete(nodeId);
    const k = nodeKey(live.record.workflowId, nodeId);
    if (why === '') {
      this.queueBlocked.delete(k);
      if (this.queueBlocked.size === 0) this.freed = 0;
    } else {
      const keys = this.agentBlocked.get(why);
      keys?.delete(k);
      if (keys?.size === 0) this.agentBlocked.delete(why);
    }
  }

  /** Any task ended (a workflow's or not): it frees a slot in the scheduler's queue, so one node held back may go. Whether one waits. */
  taskEnded(): boolean {
    if (this.queueBlocked.size === 0) return false;
    this.freed = Math.min(this.freed + 1, this.queueBlocked.size);
    return true;
  }

  /** An agent registered: the nodes that waited for it are queued to start again. Whether any did. */
  agentJoined(agentId: string): boolean {
    const keys = this.agentBlocked.get(agentId);
    if (!keys) return false;
    for (const k of keys) this.toStart.add(k);
    return true;
  }

  /**
   * The next node to try to start: first a node the full queue held back while tasks ended since (`fromQueue`), then
   * the queued ones; undefined when none is left.
   */
  next(): { readonly key: string; readonly fromQueue: boolean } | undefined {
    if (this.freed > 0 && this.queueBlocked.size > 0) {
      const k = this.queueBlocked.values().next().value as string;
      this.freed--;
      return { key: k, fromQueue: true };
    }
    if (this.toStart.size > 0) {
      const k = this.toStart.values().next().value as string;
      this.toStart.delete(k);
      return { key: k, fromQueue: false };
    }
    return undefined;
  }

  /** Drops every entry of a workflow (its nodes' keys, its open tasks), for `record`'s nodes. */
  forget(record: WorkflowRecord): void {
    const workflowId = record.workflowId;
    for (const node of record.nodes.values()) {
      const k = nodeKey(workflowId, node.nodeId);
      this.toStart.delete(k);
      this.queueBlocked.delete(k);
      if (node.taskId && this.byTask.get(node.taskId) === k) this.byTask.delete(node.taskId);
    }
    for (const [agentId, keys] of this.agentBlocked) {
      for (const k of keys) if (unkey(k)[0] === workflowId) keys.delete(k);
      if (keys.size === 0) this.agentBlocked.delete(agentId);
    }
    if (this.queueBlocked.size === 0) this.freed = 0;
  }
}
