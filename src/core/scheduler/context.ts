import { ActivityBufferFullError, type ActivitySink } from '../activity/model';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter } from '../events';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import { CommitEmitter, Transitions, type Transition } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import { type AgentLifecycle, type TransitionCause, pathTo, refusalReason } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import type { WorktreeLocator } from '../worktree/model';
import { SchedulerMemory } from './memory';
import type {
  ControlCommand,
  DispatchGate,
  SchedulerOptions,
  SchedulerStorage,
  TaskChange,
  TaskRecord,
  TaskState,
  WaitingReason,
} from './model';
import { requeued } from './state';
import { describeTask } from './notices';

export interface SchedulerDeps {
  readonly store: SchedulerStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentLifecycle;
  readonly outbox: CoordinatorOutbox;
  readonly activity: ActivitySink;
  readonly places: WorktreeLocator;
  readonly gate: DispatchGate;
}

export const SCHEDULER = 'scheduler';

/**
 * What every part of the scheduler shares: its dependencies and options, its memory, its one Guard, its transitions
 * (the kernel over its store), its timers by task id, its two events, and the few writes every operation makes (log
 * events, CONTROL commands, the activity buffer, moving an agent).
 *
 * `run` is the one way a part changes state: a run inside the scheduler's own open run joins it (one transaction, as
 * a store transaction inside another joins it); anything else is the kernel's `Transitions.run`.
 */
export class SchedulerContext {
  readonly guard: Guard;
  readonly transitions: Transitions;
  /** The deadline of each PREEMPTING task and the terminate grace of each cancelled one, by task id. */
  readonly timers: KeyedTimers<string>;
  readonly memory: SchedulerMemory;
  readonly changed = new CommitEmitter<TaskChange>();
  /** A task ended: fired inside the transaction that records its end (TaskRunner.onDidEndTask). */
  readonly ended = new Emitter<TaskRecord>();
  private current: Transition | undefined;
  /** A transition of the scheduler's committed inside another area's open one: its effects wait for that commit. */
  private awaiting = false;
  private readonly heard: Array<() => void> = [];

  constructor(
    readonly deps: SchedulerDeps,
    readonly options: SchedulerOptions,
  ) {
    this.guard = new Guard((during, err) => deps.log.internalError(SCHEDULER, 'scheduler', err, { during }));
    this.transitions = new Transitions(deps.store, this.guard);
    this.timers = new KeyedTimers<string>(deps.clock, this.guard);
    this.memory = new SchedulerMemory((task) => deps.gate.typeOf(task), deps.store.scheduler.maxSeq());
  }

  /** Runs `body` as one transition (joining the scheduler's own open one). */
  run<T>(context: string, body: (tx: Transition) => T): T {
    if (this.current) return body(this.current);
    // Inside another area's transition: this one's effects wait for that commit, and so does what is heard meanwhile.
    const nested = Transitions.inTransition;
    return this.transitions.run((tx) => {
      this.current = tx;
      try {
        const result = body(tx);
        if (nested) {
          this.awaiting = true;
          tx.after(() => this.settle());
        }
        return result;
      } finally {
        this.current = undefined;
      }
    }, context);
  }

  /**
   * What the scheduler hears (an agent's change, an ACK, the gate) while its memory waits for a commit (its own
   * transition is open, or one of its transitions sits inside another area's open one) is handled after that commit:
   * it then reads memory as the store is. Otherwise it is handled at once.
   */
  hear(during: string, fn: () => void): void {
    const tx = this.current;
    if (tx) {
      tx.after(() => this.guard.run(during, fn));
      return;
    }
    if (this.awaiting) {
      if (Transitions.inTransition) {
        this.heard.push(() => this.guard.run(during, fn));
        return;
      }
      // The enclosing transition ended without running this one's effects: it rolled back.
      this.settle();
    }
    this.guard.run(during, fn);
  }

  private settle(): void {
    this.awaiting = false;
    for (const fn of this.heard.splice(0)) fn();
  }

  /** The record `task` becomes `next` once the transition commits (the live record keeps its identity). */
  install(tx: Transition, task: TaskRecord, next: TaskRecord): void {
    tx.install(() => Object.assign(task, next));
  }

  /** A timer by task id: through the transition when there is one, at once otherwise (the restore at start). */
  arm(tx: Transition | undefined, taskId: string, ms: number | undefined, fn: () => void): void {
    if (ms === undefined) {
      if (tx) tx.disarm(this.timers, taskId);
      else this.timers.disarm(taskId);
    } else if (tx) tx.arm(this.timers, taskId, ms, fn);
    else this.timers.arm(taskId, ms, fn);
  }

  /** Back to QUEUED at its priority and original seq (from `base`, the record as it is in this transition). */
  requeue(tx: Transition, task: TaskRecord, base: TaskRecord, waiting: WaitingReason): TaskRecord {
    const next = requeued(base, waiting, this.now());
    this.deps.store.scheduler.put(next);
    tx.install(() => {
      Object.assign(task, next);
      this.memory.queueOf(task.target).insert(task);
    });
    return next;
  }

  /** The Tasks view and the API hear of `task` once the transition commits. */
  notifyChanged(tx: Transition, task: TaskRecord): void {
    tx.notify<TaskChange>(this.changed, { kind: 'changed', task });
  }

  get disposed(): boolean {
    return this.guard.isStopped;
  }

  now(): number {
    return this.deps.clock.now();
  }

  event(task: TaskRecord, eventType: string, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.deps.log.record({
      correlationId: task.taskId,
      actor: SCHEDULER,
      eventType,
      level,
      details: { task_id: task.taskId, ...details },
    });
  }

  /** `task.state_changed` from `from` to `task`'s state (`task`: the record as it becomes). */
  stateEvent(
    task: TaskRecord,
    from: TaskState,
    details: Record<string, unknown>,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    this.event(task, 'task.state_changed', { from, to: task.state, ...details }, level);
  }

  /**
   * A CONTROL command to the agent through the router, with no router ACK deadline: the scheduler keeps its own (the
   * yield wait, the terminate grace, the shutdown grace); the router's TTL and the agent leaving still end it.
   */
  sendControl(
    agentId: string,
    command: ControlCommand,
    correlationId: string,
    ctx: CallContext,
  ): ReturnType<CoordinatorOutbox['sendToAgent']> {
    return this.deps.outbox.sendToAgent(
      {
        to: agentId,
        messageType: 'CONTROL',
        contentType: 'application/json',
        payload: Buffer.from(JSON.stringify(command), 'utf8'),
        correlationId,
        ackTimeout: false,
      },
      ctx,
    );
  }

  beginActivity(task: TaskRecord, agentId: string, ctx: CallContext): void {
    const { activity, places, clock, log } = this.deps;
    try {
      const place = task.scope.repoId ? undefined : places.placeOf(agentId);
      activity.begin(
        {
          agentId,
          taskId: task.taskId,
          repoId: task.scope.repoId || place?.repoId || '',
          worktreeId: task.scope.worktreeId || place?.worktreeId || '',
          branch:
            place && (!task.scope.repoId || place.repoId === task.scope.repoId)
              ? place.branch
              : (places.placeOf(agentId)?.branch ?? ''),
          timestamp: clock.now(),
          description: describeTask(task),
        },
        ctx,
      );
    } catch (err) {
      const full = err instanceof ActivityBufferFullError;
      log.record({
        correlationId: task.taskId,
        actor: SCHEDULER,
        eventType: full ? 'task.activity_buffer_full' : 'task.activity_failed',
        level: 'WARN',
        details: {
          agent_id: agentId,
          code: full ? err.code : undefined,
          reason: (err as Error).message.slice(0, 512),
          note: 'the activity buffer is advisory: the task runs anyway',
        },
      });
    }
  }

  endActivity(
    agentId: string,
    taskId: string,
    outcome: '' | 'COMPLETED' | 'FAILED' | 'CANCELLED',
    ctx: CallContext,
  ): void {
    try {
      this.deps.activity.end(agentId, taskId, outcome, ctx);
    } catch (err) {
      this.deps.log.record({
        correlationId: taskId,
        actor: SCHEDULER,
        eventType: 'task.activity_failed',
        level: 'WARN',
        details: { agent_id: agentId, reason: (err as Error).message.slice(0, 512) },
      });
    }
  }

  /**
   * Walks the agent to each of `waypoints` in turn, by the shortest way the lifecycle table allows (`pathTo`: never
   * through INITIALIZING, FAILED, RECOVERING or SHUTTING_DOWN on the way); no way or a refused step is logged and stops the walk.
   */
  moveAgent(
    agentId: string,
    waypoints: readonly string[],
    cause: TransitionCause,
    ctx: CallContext,
    quiet = false,
  ): void {
    const agents = this.deps.agents;
    for (const waypoint of waypoints) {
      const agent = agents.get(agentId);
      if (!agent) return;
      const path = pathTo(agent.state, waypoint);
      const steps: readonly string[] = path ?? [waypoint];
      for (const to of steps) {
        const from = agents.get(agentId)?.state ?? '';
        const result = path
          ? agents.transition(agentId, to, cause, ctx)
          : { ok: false as const, reason: refusalReason(from, to) };
        if (!result.ok) {
          if (!quiet) {
            this.deps.log.record({
              correlationId: ctx.correlationId,
              actor: SCHEDULER,
              eventType: 'task.agent_transition_refused',
              level: 'WARN',
              details: { agent_id: agentId, from, to, reason: result.reason, task_id: cause.taskId },
            });
          }
          return;
        }
      }
    }
  }

  /** Idle = RUNNABLE or SUSPENDED, connected, nothing running, not shutting down. Memory: call it in an install effect. */
  refreshIdle(agentId: string): void {
    const agent = this.deps.agents.get(agentId);
    const memory = this.memory;
    const isIdle =
      agent !== undefined &&
      (agent.state === 'RUNNABLE' || agent.state === 'SUSPENDED') &&
      agent.presence !== 'disconnected' &&
      !memory.slots.has(agentId) &&
      !memory.shuttingDown.has(agentId);
    if (isIdle) memory.markIdle(agentId, agent.descriptor.name);
    else memory.dropIdle(agentId);
  }
}
