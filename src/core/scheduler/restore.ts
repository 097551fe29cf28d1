import type { CallContext } from '../context';
import type { Disposable } from '../events';
import { KeyedTimers } from '../kernel/timers';
import type { Transition } from '../kernel/transitions';
import { SCHEDULER, type SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { GATE_WAITING } from './state';

/** Reconciliation of the activity buffer and pruning of finished tasks. */
const HOUSEKEEPING_MS = 60_000;

/** What the restart needs of the other parts. */
export interface RestoreNeeds {
  /** Deadlines and graces re-armed from the stored records (`tx` undefined: at once). */
  armDeadline(task: TaskRecord, base: TaskRecord, tx: Transition | undefined): void;
  armCancelGrace(task: TaskRecord, base: TaskRecord, tx: Transition | undefined): void;
  settleTerminate(task: TaskRecord, tx: Transition): void;
  onAgentLeft(agentId: string, reason: string): void;
  onAgentUnavailable(agentId: string, code: string, reason: string): void;
}

/**
 * The scheduler at start, from the store: queued tasks back in their queues (those the gate held held again), dispatched
 * ones holding their agent, PREEMPTING deadlines re-armed, cancelled tasks whose agent had not answered `terminate`
 * holding it again with their grace running on; tasks on agents that are gone or unavailable cleaned up. Memory is
 * filled directly here: nothing else runs yet.
 */
export function restoreFromStore(core: SchedulerContext, needs: RestoreNeeds): void {
  const { memory, deps } = core;
  const store = deps.store;
  for (const task of store.scheduler.listOpen()) {
    // Held by the gate when it stopped: held again (onGateChange asks again, so a denied duplicate still ends at once).
    if (task.state === 'QUEUED' && task.waiting && GATE_WAITING.has(task.waiting.kind)) memory.gateHeld.add(task);
    memory.enqueue(task);
    if (task.state === 'PREEMPTING' && task.deadline !== null) needs.armDeadline(task, task, undefined);
  }
  // Cancelled tasks whose agent had not answered `terminate`: the agent stays occupied, the grace runs on.
  for (const task of store.scheduler.listTerminating()) {
    if (!memory.slots.has(task.assignedAgentId)) {
      memory.slots.set(task.assignedAgentId, { taskId: task.taskId, cancelled: task });
      needs.armCancelGrace(task, task, undefined);
    } else {
      core.run('restore', (tx) => needs.settleTerminate(task, tx));
    }
  }
  for (const agent of deps.agents.list()) {
    memory.agentStates.set(agent.descriptor.agentId, agent.state);
    core.refreshIdle(agent.descriptor.agentId);
  }
  // A task restored on an agent that is no longer registered cannot finish: cleaned up as if the agent left.
  for (const agentId of [...memory.slots.keys()]) {
    const state = deps.agents.get(agentId)?.state;
    if (state === undefined) needs.onAgentLeft(agentId, 'not registered when the coordinator started');
    else if (state === 'FAILED_STATE' || state === 'INITIALIZING')
      needs.onAgentUnavailable(
        agentId,
        'AGENT_UNAVAILABLE',
        `agent ${agentId} was ${state} when the coordinator started`,
      );
  }
}

/**
 * Retention and reconciliation, every minute on the Clock: the activity buffer reconciled with the open tasks (a
 * failure logged once per distinct reason), finished tasks beyond `keepFinishedTasks` pruned.
 */
export class Housekeeping implements Disposable {
  private readonly timer: KeyedTimers<'housekeeping'>;
  private reconcileFailure = '';

  constructor(
    private readonly core: SchedulerContext,
    private readonly isActive: (agentId: string, taskId: string) => boolean,
  ) {
    this.timer = new KeyedTimers(core.deps.clock, core.guard);
  }

  run(): void {
    const { deps, options } = this.core;
    if (this.core.disposed) return;
    const ctx: CallContext = { correlationId: 'scheduler-housekeeping' };
    try {
      deps.activity.reconcile(this.isActive, ctx);
      this.reconcileFailure = '';
    } catch (err) {
      // Logged once per distinct failure, not every minute.
      const reason = (err as Error).message.slice(0, 512);
      if (reason !== this.reconcileFailure) {
        this.reconcileFailure = reason;
        deps.log.record({
          correlationId: ctx.correlationId,
          actor: SCHEDULER,
          eventType: 'task.activity_failed',
          level: 'WARN',
          details: { reason, during: 'reconcile' },
        });
      }
    }
    try {
      const pruned = this.core.run('prune', () => deps.store.scheduler.pruneFinished(options.keepFinishedTasks));
      if (pruned > 0)
        deps.log.record({
          correlationId: ctx.correlationId,
          actor: SCHEDULER,
          eventType: 'task.pruned',
          details: { pruned, kept: options.keepFinishedTasks },
        });
    } catch (err) {
      deps.log.internalError(SCHEDULER, ctx.correlationId, err, { during: 'prune' });
    }
    this.timer.arm('housekeeping', HOUSEKEEPING_MS, () => this.run());
  }

  dispose(): void {
    this.timer.dispose();
  }
}
