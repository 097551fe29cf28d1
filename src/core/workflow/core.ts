import type { Clock } from '../clock';
import type { HitlService } from '../hitl/hitlService';
import type { IdSource } from '../ids';
import type { Guard } from '../kernel/guard';
import type { KeyedTimers } from '../kernel/timers';
import type { Transition, Transitions } from '../kernel/transitions';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory } from '../registry/model';
import type { TaskRunner } from '../scheduler/model';
import type { Access } from './access';
import type { Completion } from './completion';
import type { DataLog } from './data';
import type { Dispatch } from './dispatch';
import type { Failures } from './failure';
import type { StartIndexes } from './indexes';
import type { WorkflowsChange, WorkflowStorage } from './model';
import type { Progress } from './progress';
import type { Queries } from './queries';
import type { Restore } from './restore';
import type { LiveWorkflow } from './state';

export interface WorkflowDeps {
  readonly store: WorkflowStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  /** The scheduler: a node runs as one of its tasks. */
  readonly tasks: TaskRunner;
  /** Who is registered: a node whose agent is not yet registered starts when it registers. */
  readonly agents: AgentDirectory;
  /** A FAILED node with `on_failure: hitl` asks a person. */
  readonly hitl: HitlService;
}

/** The actor of the engine's own events and the component of its internal errors. */
export const ACTOR = 'workflow';

/**
 * What the workflow parts share: the engine's dependencies, its kernel (one Transitions, one Guard, one KeyedTimers),
 * and its memory. Built once by Workflows.
 */
export interface Core {
  readonly deps: WorkflowDeps;
  readonly transitions: Transitions;
  readonly guard: Guard;
  /** The workflows that run (RUNNING, WAITING), by id: changed only in `tx.install` effects. */
  readonly live: Map<string, LiveWorkflow>;
  readonly indexes: StartIndexes;
  /** Timers of READY nodes with a fireAt, by node key (state.ts nodeKey); armed and disarmed through `tx`. */
  readonly timers: KeyedTimers<string>;
  /** HITL invocations being watched. */
  readonly watched: Set<string>;
  /** Listeners hear of a change once it is durable (the store's afterCommit: `tx.whenDurable`); the read cache drops it at once. */
  notify(tx: Transition, change: WorkflowsChange): void;
}

/** The parts of the engine, for the parts that call one another (wired by Workflows). */
export interface Parts {
  readonly progress: Progress;
  readonly failure: Failures;
  readonly completion: Completion;
  readonly dispatch: Dispatch;
  readonly data: DataLog;
  readonly restore: Restore;
  readonly access: Access;
  readonly queries: Queries;
}
