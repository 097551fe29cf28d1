import type { CallContext } from '../context';
import type { AgentRecord } from '../registry/model';
import type { SchedulerContext } from './context';
import type { RunningTasks, TaskRecord, WaitingReason } from './model';
import { describeWaiting, runCommandOf } from './notices';
import {
  dispatched,
  sameWaiting,
  targetType,
  waitingFor,
  withdrawWay,
  withdrawnOnce,
  withdrawnTooOften,
  type EndState,
  TYPE_PREFIX,
} from './state';
import { mergedOrder } from './taskQueue';

/** How many queued candidates one dispatch attempt asks the gate about before it gives up for now (bounded work). */
const MAX_CANDIDATES = 32;

/** What dispatching needs of the other parts. */
export interface DispatchNeeds {
  end(
    task: TaskRecord,
    state: EndState,
    code: string,
    note: string,
    ctx: CallContext,
    cause: string,
    result?: string,
    base?: TaskRecord,
  ): TaskRecord | undefined;
}

/**
 * Dispatch: which idle agent takes which queued task, when (the gate's mayStart), as a CONTROL `run`; the rounds
 * (agents marked dirty, tried once per round, in a microtask); the tasks the gate holds out of the queue and put back
 * when it changes or a task ends; a dispatch withdrawn before the agent started (back to the queue, or FAILED after
 * MAX_WITHDRAWN_DISPATCHES).
 */
export class Dispatch {
  private pumping = false;
  private pumpQueued = false;

  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: DispatchNeeds,
  ) {}

  /** The running tasks (the open tasks in the slots), as the gate asks about them. */
  running(): RunningTasks {
    return this.core.memory.runningIndex;
  }

  /** Marks one idle agent that could take `task` for the next dispatch round (memory). */
  wakeFor(task: TaskRecord): void {
    const memory = this.core.memory;
    const type = targetType(task.target);
    if (type === undefined) {
      if (memory.idle.has(task.target)) memory.dirty.add(task.target);
      return;
    }
    const first = memory.idleByType.get(type)?.values().next();
    if (first && !first.done) memory.dirty.add(first.value);
  }

  /** Every task the gate held goes back into its queue (to be asked again), and an idle agent is woken for each (memory). */
  releaseHeld(): void {
    const memory = this.core.memory;
    for (const task of [...memory.gateHeld]) {
      memory.gateHeld.delete(task);
      if (task.state !== 'QUEUED' || memory.open.get(task.taskId) !== task) continue;
      memory.queueOf(task.target).insert(task);
      this.wakeFor(task);
    }
  }

  /**
   * A decision settled or a limit changed: the tasks the gate held are asked again at once, so that a denied duplicate
   * ends now (not when an agent is next free); idle agents try again.
   */
  onGateChange(): void {
    const { memory, deps } = this.core;
    for (const task of [...memory.gateHeld]) {
      if (task.state !== 'QUEUED' || !memory.open.has(task.taskId)) {
        memory.gateHeld.delete(task);
        continue;
      }
      const type = targetType(task.target) ?? deps.agents.get(task.target)?.descriptor.name;
      if (type === undefined) continue;
      const ctx: CallContext = { correlationId: task.taskId };
      const verdict = deps.gate.mayStart(task, type, this.running(), ctx);
      if (verdict.go) {
        memory.gateHeld.delete(task);
        memory.queueOf(task.target).insert(task);
        this.wakeFor(task);
      } else if ('refuse' in verdict)
        this.needs.end(task, 'FAILED', verdict.refuse.code, verdict.refuse.reason, ctx, 'gate');
      else this.setWaiting(task, verdict.waiting);
    }
    for (const agentId of memory.idle) memory.dirty.add(agentId);
    this.schedulePump();
  }

  schedulePump(): void {
    if (this.pumpQueued || this.core.disposed) return;
    this.pumpQueued = true;
    queueMicrotask(() => {
      this.pumpQueued = false;
      this.core.guard.run('dispatch', () => this.pump());
    });
  }

  /** Tries to give every agent marked dirty its next task. Re-entrant calls only mark: the running loop picks them up. */
  pump(): void {
    if (this.pumping || this.core.disposed) return;
    const dirty = this.core.memory.dirty;
    this.pumping = true;
    try {
      const tried = new Set<string>();
      while (dirty.size > 0) {
        const agentId = dirty.values().next().value as string;
        dirty.delete(agentId);
        if (tried.has(agentId)) continue;
        tried.add(agentId);
        this.tryDispatch(agentId);
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Gives `agentId` the first eligible queued task for it (by id or by its type), when it is idle. */
  private tryDispatch(agentId: string): void {
    const { memory, deps } = this.core;
    if (!memory.idle.has(agentId)) return;
    const agent = deps.agents.get(agentId);
    if (!agent) return;
    const type = agent.descriptor.name;
    // Tasks the gate holds leave the queue, so each round looks further; a round that held or ended none is the last.
    for (;;) {
      const candidates: TaskRecord[] = [];
      for (const task of mergedOrder(memory.queues.get(agentId), memory.queues.get(TYPE_PREFIX + type))) {
        candidates.push(task);
        if (candidates.length >= MAX_CANDIDATES) break;
      }
      if (candidates.length === 0) return;
      let progressed = false;
      for (const task of candidates) {
        if (task.state !== 'QUEUED' || !memory.open.has(task.taskId)) continue;
        const ctx: CallContext = { correlationId: task.taskId };
        const verdict = deps.gate.mayStart(task, type, this.running(), ctx);
        if (verdict.go) {
          this.dispatch(task, agent, ctx);
          if (!memory.idle.has(agentId)) return;
          progressed = true;
          continue;
        }
        progressed = true;
        if ('refuse' in verdict) {
          this.needs.end(task, 'FAILED', verdict.refuse.code, verdict.refuse.reason, ctx, 'gate');
          continue;
        }
        memory.hold(task);
        this.setWaiting(task, verdict.waiting);
      }
      if (!progressed || !memory.idle.has(agentId)) return;
    }
  }

  /** A queued task waits for another reason: stored with its `task.waiting` event, shown. */
  setWaiting(task: TaskRecord, waiting: WaitingReason | null): void {
    if (sameWaiting(task.waiting, waiting)) return;
    this.core.run('waiting', (tx) => {
      const next = waitingFor(task, waiting, this.core.now());
      this.core.deps.store.scheduler.put(next);
      this.core.event(next, 'task.waiting', {
        waiting: waiting?.kind ?? '',
        reason: waiting ? describeWaiting(waiting) : '',
      });
      this.core.install(tx, task, next);
      this.core.notifyChanged(tx, task);
    });
  }

  private dispatch(task: TaskRecord, agent: AgentRecord, ctx: CallContext): void {
    const { memory, deps } = this.core;
    const agentId = agent.descriptor.agentId;
    const now = this.core.now();
    const resumed = agent.state === 'SUSPENDED';
    let refusal: { code: string; reason: string } | undefined;
    this.core.run('dispatch', (tx) => {
      this.core.beginActivity(task, agentId, ctx);
      const sent = this.core.sendControl(agentId, runCommandOf(task), task.taskId, ctx);
      if (!sent.accepted) {
        refusal = { code: sent.code, reason: sent.reason };
        this.core.endActivity(agentId, task.taskId, '', ctx);
        return;
      }
      const from = task.state;
      const next = dispatched(task, agentId, agent.descriptor.name, sent.messageId, now);
      deps.store.scheduler.put(next);
      this.core.event(next, 'task.dispatched', {
        agent_id: agentId,
        run_message_id: sent.messageId,
        dispatches: next.dispatches,
        resumed,
      });
      this.core.stateEvent(next, from, { agent_id: agentId });
      tx.install(() => {
        memory.unqueue(task);
        memory.gateHeld.delete(task);
        Object.assign(task, next);
        memory.occupy(agentId, { taskId: task.taskId });
      });
      this.core.moveAgent(
        agentId,
        resumed ? ['RESUMED'] : ['SCHEDULED'],
        { by: 'task', reason: `task ${task.taskId} dispatched`, taskId: task.taskId },
        ctx,
      );
      tx.install(() => this.core.refreshIdle(agentId));
      this.core.notifyChanged(tx, task);
    });
    if (refusal)
      this.withdrawn(
        task,
        agentId,
        refusal.code,
        `the run could not be sent to ${agentId}: ${refusal.reason}`,
        ctx,
        false,
      );
  }

  /**
   * The dispatch to `agentId` was withdrawn before the agent started (run refused / not delivered / not sent, or the
   * agent re-registered or failed): the task goes back to the queue, or, after MAX_WITHDRAWN_DISPATCHES withdrawals
   * (yields do not count), ends FAILED with that code. A sent run's agent goes back to idle unless `moveAgent` is false.
   */
  withdrawn(
    task: TaskRecord,
    agentId: string,
    code: string,
    reason: string,
    ctx: CallContext,
    wasSent: boolean,
    moveAgent = true,
  ): void {
    const { memory, deps } = this.core;
    this.core.run('withdrawn', (tx) => {
      const counted = withdrawnOnce(task);
      const freeAgent = (): void => {
        this.core.endActivity(agentId, task.taskId, '', ctx);
        tx.install(() => memory.vacate(agentId, task.taskId));
        if (moveAgent)
          this.core.moveAgent(
            agentId,
            withdrawWay(deps.agents.get(agentId)?.state),
            { by: 'task', reason: `run of ${task.taskId} withdrawn: ${code}`, taskId: task.taskId },
            ctx,
          );
      };
      if (withdrawnTooOften(counted)) {
        this.needs.end(
          task,
          'FAILED',
          code,
          `${reason} (${counted.withdrawals} dispatches withdrawn)`,
          ctx,
          'withdrawn',
          '',
          counted,
        );
        if (wasSent) freeAgent();
        tx.install(() => this.core.refreshIdle(agentId));
        tx.after(() => this.schedulePump());
        return;
      }
      const from = task.state;
      tx.disarm(this.core.timers, task.taskId);
      if (wasSent) freeAgent();
      const next = this.core.requeue(tx, task, counted, {
        kind: 'agent_not_runnable',
        agentId,
        state: deps.agents.get(agentId)?.state ?? 'unknown',
      });
      this.core.event(
        next,
        'task.dispatch_withdrawn',
        { agent_id: agentId, code, reason, dispatches: next.dispatches, withdrawals: next.withdrawals },
        'WARN',
      );
      this.core.stateEvent(next, from, { agent_id: agentId, error_code: code });
      tx.install(() => this.core.refreshIdle(agentId));
      this.core.notifyChanged(tx, task);
      tx.install(() => this.wakeFor(task));
      tx.after(() => this.schedulePump());
    });
  }
}
