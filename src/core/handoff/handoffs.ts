import type { CallContext } from '../context';
import type { Disposable } from '../events';
import { Guard } from '../kernel/guard';
import type { AfterCommit } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { schedulePruning } from '../retention';
import { Acceptance } from './accept';
import { cancelDelegation, type CancelDeps } from './cancel';
import { WorktreeCarry } from './carry';
import { ACTOR, HandoffChanges } from './changes';
import { complete, type CompleteDeps } from './complete';
import type { HandoffDeps } from './deps';
import { AgentsLeaving } from './leaving';
import type { HandoffChange, HandoffQueries, HandoffRecord, TransferredWork } from './model';
import { HandoffNotices } from './notices';
import { MoveOn } from './moveOn';
import { OperatorAnswers } from './operator';
import {
  DEFAULT_HANDOFF_OPTIONS,
  HANDOFF_RETENTION_INTERVAL_MS,
  PENDING_ANSWER_BYTES,
  type HandoffOptions,
} from './options';
import { HandoffReads } from './queries';
import { reject, type HandoffRejection, type RejectDeps } from './reject';
import { HandoffRequests, type HandoffRequestInput } from './request';
import { HandoffRestore } from './restore';
import { answerBy, HandoffMemory } from './state';
import { Targets } from './targets';
import { HandoffTimeouts } from './timeouts';

export { delegationTree } from './cancel';
export { SWITCH_HANDOFF_FACT, type HandoffDeps, type HandoffTasks, type HandoffWorktrees } from './deps';
export { HANDOFF_REQUEST_NOTICE, HANDOFF_STATUS_NOTICE, requestNotice } from './notices';
export {
  DEFAULT_HANDOFF_OPTIONS,
  EXPIRY_RETRY_MS,
  HANDOFF_OPTION_BOUNDS,
  HANDOFF_RETENTION_BATCH,
  HANDOFF_RETENTION_INTERVAL_MS,
  MAX_ATTEMPTS,
  MAX_GRACE_PERIOD_MS,
  PENDING_ANSWER_BYTES,
  type HandoffOptions,
} from './options';
export type { HandoffRejection } from './reject';
export type { HandoffRequestInput } from './request';

/**
 * Handoffs (RFC §17.6; README, "Handoffs"; this folder's README.md): RequestHandoff validated (ids, budget envelope, the
 * context snapshot against the HandoffContext schema when its content type says so, the task handed off), routed to the
 * named agent or by capability (routing.ts), announced to the target by a NOTIFICATION envelope in the transaction of
 * the change; the target accepts or rejects, a rejection or the end of its answer window (Clock) moves it to the next
 * candidate when rerouting is allowed, or to a person when no agent can take it and the options say so; `timeout`
 * bounds the requester's whole wait (then EXPIRED); CompleteHandoff transfers the work (the origin's task closed, its
 * further sends about it refused by the router: TransferredWork); CancelDelegation cancels a delegation and its
 * children. Every transition is one `handoff.*` event in its transaction (kernel Transitions: changes.ts); the
 * requester learns each outcome by a `handoff_status` NOTIFICATION. Everything persists; timers come back after a restart.
 *
 * This class only wires the parts (one file each, named for what it decides) and delegates to them.
 */
export class Handoffs implements HandoffQueries, TransferredWork, Disposable {
  readonly onDidChange: AfterCommit<HandoffChange>;
  private readonly guard: Guard;
  private readonly memory: HandoffMemory;
  private readonly changes: HandoffChanges;
  private readonly reads: HandoffReads;
  private readonly requests: HandoffRequests;
  private readonly acceptance: Acceptance;
  private readonly timeouts: HandoffTimeouts;
  private readonly rejects: RejectDeps;
  private readonly completes: CompleteDeps;
  private readonly cancels: CancelDeps;
  private readonly operator: OperatorAnswers;
  private readonly restorer: HandoffRestore;
  private readonly subscriptions: Disposable[] = [];
  private readonly pruning: Disposable;

  constructor(
    deps: HandoffDeps,
    private readonly options: HandoffOptions = DEFAULT_HANDOFF_OPTIONS,
  ) {
    const { store, log, clock } = deps;
    const handoffs = store.handoffs;
    const guard = (this.guard = new Guard((during, err) => log.internalError(ACTOR, 'handoffs', err, { during })));
    const memory = (this.memory = new HandoffMemory(options.maxTransfersInMemory));
    const due = (record: HandoffRecord) => answerBy(record, options.answerWindowMs);
    const changes = (this.changes = new HandoffChanges(
      { store, log, clock },
      memory,
      options.answerWindowMs,
      guard,
      (id) => this.timeouts.timeUp(id),
    ));
    this.onDidChange = changes.changed.event;
    const catchUp = (id: string) => this.timeouts.catchUp(id);
    const notices = new HandoffNotices({ outbox: deps.outbox, handoffs, clock, answerBy: due });
    const targets = new Targets({
      agents: deps.agents,
      tasks: deps.tasks,
      memory,
      maxPendingPerTarget: options.maxPendingPerTarget,
    });
    const moveOn = new MoveOn({
      clock,
      handoffs,
      notices,
      changes,
      targets,
      answerBy: due,
      reroute: options.reroute,
      routeToOperator: options.routeToOperator,
    });
    this.timeouts = new HandoffTimeouts({
      clock,
      log,
      guard,
      handoffs,
      memory,
      changes,
      moveOn,
      answerBy: due,
      answerWindowMs: options.answerWindowMs,
    });
    const carry = new WorktreeCarry({
      worktrees: deps.worktrees,
      invocation: deps.invocation,
      cancelInvocation: deps.cancelInvocation,
      clock,
      log,
      guard,
      handoffs,
      memory,
      changes,
      notices,
    });
    const withdrawSwitch = carry.withdrawSwitch.bind(carry);
    const leaving = new AgentsLeaving({ clock, agents: deps.agents, guard, memory, changes, moveOn, withdrawSwitch });
    this.reads = new HandoffReads({ handoffs, memory, catchUp });
    this.requests = new HandoffRequests({
      clock,
      handoffs,
      agents: deps.agents,
      tasks: deps.tasks,
      worktrees: deps.worktrees,
      options,
      memory,
      changes,
      notices,
      targets,
      refusalFor: (producerId, correlationId) => this.reads.refusalFor(producerId, correlationId),
      answerBy: due,
    });
    const acceptance = (this.acceptance = new Acceptance({
      clock,
      handoffs,
      worktrees: deps.worktrees,
      memory,
      changes,
      notices,
      catchUp,
      followSwitch: (agentId) => carry.followSwitch(agentId),
      withdrawSwitch,
    }));
    this.rejects = { clock, handoffs, memory, changes, moveOn, catchUp };
    this.completes = {
      clock,
      guard,
      handoffs,
      tasks: deps.tasks,
      memory,
      changes,
      notices,
      acceptorGone: (r) => leaving.acceptorGone(r),
      acceptorLeft: (r, why) => leaving.acceptorLeft(r, why),
    };
    this.cancels = { clock, handoffs, memory, changes, moveOn, withdrawSwitch };
    this.operator = new OperatorAnswers({ handoffs, memory, changes, acceptance, moveOn, catchUp });
    this.restorer = new HandoffRestore({
      clock,
      log,
      ids: deps.ids,
      guard,
      handoffs,
      memory,
      changes,
      maxTransfersInMemory: options.maxTransfersInMemory,
      retentionDays: options.retentionDays,
      answerBy: due,
      acceptorGone: (r) => leaving.acceptorGone(r),
      acceptorLeft: (r, why) => leaving.acceptorLeft(r, why),
      reconcileSwitches: () => carry.reconcileSwitches(),
      timeUp: (id) => this.timeouts.timeUp(id),
    });
    this.pruning = schedulePruning(clock, HANDOFF_RETENTION_INTERVAL_MS, () => this.pruneEnded());
    this.subscriptions.push(
      deps.agents.onDidChange((change) => guard.run('agent_change', () => leaving.onAgentChange(change))),
    );
    this.subscriptions.push(
      deps.worktrees.onDidChange((binding) => guard.run('worktree_change', () => carry.followSwitch(binding.agentId))),
    );
  }

  // ---------------------------------------------------------------- queries (queries.ts)

  recent(limit: number): HandoffRecord[] {
    return this.reads.recent(limit);
  }

  get(requestId: string): HandoffRecord | undefined {
    return this.reads.get(requestId);
  }

  /** TransferredWork: the router asks this of every message an agent sends (a map lookup). */
  refusalFor(producerId: string, correlationId: string): string | undefined {
    return this.reads.refusalFor(producerId, correlationId);
  }

  /** Open handoffs (tests and the editor's counts). */
  openCount(): number {
    return this.memory.size;
  }

  /** Completed transfers held in memory (at most maxTransfersInMemory). */
  transfersInMemory(): number {
    return this.memory.transfersHeld;
  }

  /** GetPendingHandoffs: the PENDING handoffs offered to `agentId`, as many as fit `maxBytes`; `more`: how many were left out. */
  pending(
    agentId: string,
    speaker: Speaker,
    maxBytes = PENDING_ANSWER_BYTES,
  ): { readonly records: HandoffRecord[]; readonly more: number } {
    return this.reads.pending(agentId, speaker, maxBytes);
  }

  /** When the current target (or the operator) must have answered; null when not PENDING (state.ts answerBy). */
  answerBy(record: HandoffRecord): number | null {
    return answerBy(record, this.options.answerWindowMs);
  }

  // ---------------------------------------------------------------- the calls

  /** RequestHandoff (request.ts). */
  request(input: HandoffRequestInput, speaker: Speaker, ctx: CallContext): HandoffRecord {
    return this.requests.request(input, speaker, ctx);
  }

  /** AcceptHandoff (accept.ts): with a worktree carry, the binding moves in the acceptance's transaction. */
  accept(requestId: string, agentId: string, speaker: Speaker, ctx: CallContext): Promise<HandoffRecord> {
    return this.acceptance.accept(requestId, agentId, speaker, ctx);
  }

  /** RejectHandoff (reject.ts; what comes next: moveOn.ts). */
  reject(input: HandoffRejection, speaker: Speaker, ctx: CallContext): HandoffRecord {
    return reject(this.rejects, input, speaker, ctx);
  }

  /** CompleteHandoff(COMPLETED) (complete.ts): the work is transferred. */
  complete(
    requestId: string,
    status: string,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly success: boolean; readonly message: string } {
    return complete(this.completes, requestId, status, speaker, ctx);
  }

  /** CancelDelegation (cancel.ts): a delegation and the ones made under it end CANCELLED. */
  cancelDelegation(
    correlationId: string,
    reason: string,
    gracePeriodMs: number,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly acknowledged: boolean; readonly message: string } {
    return cancelDelegation(this.cancels, correlationId, reason, gracePeriodMs, speaker, ctx);
  }

  // ---------------------------------------------------------------- the operator (CoordinatorApi; operator.ts)

  /** The operator takes a handoff that waits for a person: ACCEPTED by `operator:<by>`. */
  acceptAsOperator(requestId: string, by: string, ctx: CallContext): HandoffRecord {
    return this.operator.accept(requestId, by, ctx);
  }

  /** The operator declines a handoff that waits for a person: REJECTED with the reason (required). */
  rejectAsOperator(requestId: string, reason: string, by: string, ctx: CallContext): HandoffRecord {
    return this.operator.reject(requestId, reason, by, ctx);
  }

  // ---------------------------------------------------------------- restart and retention (restore.ts)

  /** At start: open handoffs back in memory with their timers (a passed expiry decided now), the transferred work rebuilt. */
  restore(ctx: CallContext): void {
    this.restorer.restore(ctx);
  }

  /** One bounded retention run (logged `handoff.pruned`); answers whether it left more. */
  pruneEnded(): boolean {
    return this.restorer.pruneEnded();
  }

  dispose(): void {
    this.guard.stop();
    this.pruning.dispose();
    for (const s of this.subscriptions.splice(0)) s.dispose();
    this.changes.dispose();
  }
}
