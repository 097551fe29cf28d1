import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import type { RegistryChange } from '../registry/model';
import type { OutboxUpdate } from '../router/model';
import { shutdownRefusal } from './access';
import { SCHEDULER, type SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { shutdownCommand, shutdownCorrelation } from './notices';
import { agentFailureCode, leftCode, type EndState } from './state';

/** What the agents' comings and goings need of the other parts. */
export interface AgentNeeds {
  end(
    task: TaskRecord,
    state: EndState,
    code: string,
    note: string,
    ctx: CallContext,
    cause: string,
  ): TaskRecord | undefined;
  withdrawn(
    task: TaskRecord,
    agentId: string,
    code: string,
    reason: string,
    ctx: CallContext,
    wasSent: boolean,
    moveAgent?: boolean,
  ): void;
  settleTerminate(task: TaskRecord, tx: Transition): void;
  schedulePump(): void;
}

/**
 * Agents as the scheduler follows them: which are idle (by id and by type), what their task becomes when they
 * re-register, fail or leave (FAILED with the cause's code; one still DISPATCHED, never started, back to the queue),
 * ShutdownAgent (RFC §8.4: SHUTTING_DOWN with a grace, CONTROL `shutdown`, no new tasks, deregistered once it answers).
 */
export class AgentChanges {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: AgentNeeds,
  ) {}

  onAgentChange(change: RegistryChange): void {
    if (change.kind === 'left') {
      this.onAgentLeft(change.agentId, change.reason);
      return;
    }
    const memory = this.core.memory;
    const agentId = change.agent.descriptor.agentId;
    const lastState = memory.agentStates.get(agentId);
    memory.agentStates.set(agentId, change.agent.state);
    // The type its task counts for (max_parallel_instances) is the registry's: kept in step.
    if (memory.slots.has(agentId)) memory.syncRunning(agentId);
    // One rule for an agent that can no longer run what it holds: re-registered (INITIALIZING: whatever it ran is gone
    // from its side) or FAILED (a heartbeat, resource_timeout, suspend_timeout…).
    if (memory.slots.has(agentId) && (change.agent.state === 'FAILED_STATE' || change.agent.state === 'INITIALIZING')) {
      const code =
        change.agent.state === 'FAILED_STATE'
          ? (agentFailureCode(lastState) ?? 'AGENT_UNAVAILABLE')
          : 'AGENT_UNAVAILABLE';
      this.onAgentUnavailable(
        agentId,
        code,
        change.agent.state === 'INITIALIZING' ? `agent ${agentId} re-registered` : `agent ${agentId} is FAILED`,
      );
    }
    this.core.refreshIdle(agentId);
    if (memory.idle.has(agentId)) {
      memory.dirty.add(agentId);
      this.needs.schedulePump();
    }
  }

  /**
   * The agent holding a slot re-registered or failed: its task ends FAILED with `code` (one still DISPATCHED, never
   * started, goes back to the queue), a cancelled task's pending `terminate` is given up; the slot is freed. The agent
   * is not moved (it is where its registration or failure put it).
   */
  onAgentUnavailable(agentId: string, code: string, reason: string): void {
    const memory = this.core.memory;
    const slot = memory.slots.get(agentId);
    if (!slot) return;
    this.core.run('agent_unavailable', (tx) => {
      tx.install(() => memory.vacate(agentId));
      tx.disarm(this.core.timers, slot.taskId);
      if (slot.cancelled) {
        this.needs.settleTerminate(slot.cancelled, tx);
        return;
      }
      const task = memory.open.get(slot.taskId);
      if (!task) return;
      const ctx: CallContext = { correlationId: task.taskId };
      if (task.state !== 'DISPATCHED') {
        this.needs.end(task, 'FAILED', code, reason, ctx, 'agent_unavailable');
        return;
      }
      // Never started: back to the queue (a withdrawal), the slot already freed, the agent left where it is.
      this.needs.withdrawn(task, agentId, code, reason, ctx, true, false);
    });
  }

  /** The agent left the registry (shut down, timed out, deregistered): its task and queue are cleaned up. */
  onAgentLeft(agentId: string, reason: string): void {
    const memory = this.core.memory;
    const code = leftCode(reason, Boolean(memory.shuttingDown.get(agentId)));
    const slot = memory.slots.get(agentId);
    this.core.run('agent_left', (tx) => {
      tx.install(() => {
        memory.agentStates.delete(agentId);
        memory.shuttingDown.delete(agentId);
        memory.vacate(agentId);
        memory.dropIdle(agentId);
      });
      if (slot && !slot.cancelled) {
        const task = memory.open.get(slot.taskId);
        if (task)
          this.needs.end(
            task,
            'FAILED',
            code,
            `agent ${agentId} left: ${reason}`,
            { correlationId: task.taskId },
            'agent_left',
          );
      } else if (slot?.cancelled) {
        tx.disarm(this.core.timers, slot.taskId);
        this.needs.settleTerminate(slot.cancelled, tx);
      }
      if (code !== 'AGENT_UNAVAILABLE') {
        for (const task of memory.queuedFor(agentId))
          this.needs.end(
            task,
            'FAILED',
            code,
            `agent ${agentId} shut down`,
            { correlationId: task.taskId },
            'agent_left',
          );
      }
    });
  }

  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with a grace period, CONTROL `shutdown`, no new tasks; cleanup on the way out. */
  shutdownAgent(
    agentId: string,
    graceMs: number,
    reason: string,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    const { memory, deps } = this.core;
    const refusal = shutdownRefusal(memory, deps.agents, agentId);
    if (refusal !== undefined) return { ok: false, reason: refusal };
    const grace = Math.max(0, Math.floor(graceMs));
    return this.core.run('shutdown', (tx) => {
      const moved = deps.agents.transition(agentId, 'SHUTTING_DOWN', { by: 'operator', reason, timeoutMs: grace }, ctx);
      if (!moved.ok) return { ok: false, reason: moved.reason };
      const sent = this.core.sendControl(agentId, shutdownCommand(reason, grace), shutdownCorrelation(agentId), ctx);
      deps.log.record({
        correlationId: ctx.correlationId,
        actor: SCHEDULER,
        eventType: 'agent.shutdown_requested',
        details: {
          agent_id: agentId,
          grace_ms: grace,
          reason,
          shutdown_message_id: sent.accepted ? sent.messageId : '',
          sent: sent.accepted,
          refusal: sent.accepted ? undefined : sent.reason,
        },
        level: sent.accepted ? 'INFO' : 'WARN',
      });
      tx.install(() => {
        memory.shuttingDown.set(agentId, reason);
        this.core.refreshIdle(agentId);
      });
      // Tasks queued for this agent id can never run now.
      for (const task of memory.queuedFor(agentId))
        this.needs.end(
          task,
          'FAILED',
          'agent_shutdown',
          `agent ${agentId} is shutting down`,
          { correlationId: task.taskId },
          'shutdown',
        );
      return { ok: true, reason: '' };
    });
  }

  onShutdownAck(update: OutboxUpdate): void {
    if (update.state !== 'FULFILLED') return;
    const agentId = update.recipientId;
    // Deregistration reaches into the router, which is in the middle of this ACK: after it.
    queueMicrotask(() =>
      this.core.guard.run('shutdown', () => {
        const agents = this.core.deps.agents;
        if (agents.get(agentId)) agents.deregister(agentId, 'shut down', { correlationId: update.correlationId });
      }),
    );
  }
}
