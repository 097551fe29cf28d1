import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Event } from '../events';
import type { IdSource } from '../ids';
import type { EventRecorder } from '../log/model';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import type { TaskRecord } from '../scheduler/model';
import type { BindingStatus } from '../worktree/model';
import type { HandoffStorage } from './model';

/** What the handoff area needs of the other areas (the composition root, coordinator.ts, gives it). */

/** What the handoff area needs of the scheduler. */
export interface HandoffTasks {
  task(taskId: string): TaskRecord | undefined;
  loadOf(agentId: string): number;
  handOff(taskId: string, note: string, ctx: CallContext): TaskRecord | undefined;
}

/** What the handoff area needs of the worktree bindings (WorktreeBindings). */
export interface HandoffWorktrees {
  placeOf(
    agentId: string,
  ): { readonly repoId: string; readonly worktreeId: string; readonly branch: string } | undefined;
  status(agentId: string): BindingStatus;
  list(): BindingStatus[];
  bind(
    agentId: string,
    repoId: string,
    worktreeId: string,
    ctx: CallContext,
    within?: (b: BindingStatus) => void,
  ): Promise<BindingStatus>;
  requestSwitch(
    agentId: string,
    targetWorktreeId: string,
    ctx: CallContext,
    options: { requiresHitl?: boolean; reason?: string; facts?: Readonly<Record<string, string>> },
    within?: (b: BindingStatus) => void,
  ): Promise<BindingStatus>;
  /** Fires after every committed change of a binding (a carried worktree's switch decided). */
  readonly onDidChange: Event<BindingStatus>;
}

/** The fact a carried worktree's switch request names its handoff by (README, "Handoffs"). */
export const SWITCH_HANDOFF_FACT = 'handoff_request_id';

export interface HandoffDeps {
  readonly store: HandoffStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly tasks: HandoffTasks;
  readonly worktrees: HandoffWorktrees;
  /** HitlService.cancel: a carried worktree's switch the handoff no longer waits for is withdrawn. */
  readonly cancelInvocation: (invocationId: string, by: string, reason: string, ctx: CallContext) => void;
  /** HitlService.get: an invocation's state and facts (a switch's SWITCH_HANDOFF_FACT), undefined when unknown. */
  readonly invocation: (
    invocationId: string,
  ) => { readonly state: string; readonly facts: Readonly<Record<string, unknown>> } | undefined;
}
