import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { DisposableStore, Emitter, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { HitlInvocation } from '../hitl/model';
import { parseInvocationRequest } from '../hitl/request';
import { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import { GitCommandError, type Git } from './git';
import type {
  BindFailureReason,
  Binding,
  BindingOperation,
  BindingState,
  BindingStatus,
  SwitchGrant,
  WorktreeStorage,
} from './model';
import type { Repository } from './repositories';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { KeyedQueue } from '../keyedQueue';
import { checkWorktreeId, InvalidWorktreeIdError, Snapshots } from './snapshots';
import { WorktreeRefusedError, Worktrees, type AgentWorktree } from './worktrees';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

export interface BindingOptions {
  /** The TTL of a granted switch when ApproveSwitch names none (RFC Appendix D C.7 uses 900,000 ms). */
  readonly defaultSwitchTtlMs: number;
  /** The longest TTL a switch is granted (a longer ttl_ms is refused). */
  readonly maxSwitchTtlMs: number;
  /** First automatic BIND retry after a failure; each further one waits twice as long (RFC §16.3). */
  readonly retryBaseMs: number;
  /** Automatic BIND retries after a failure (RFC §16.3: at most 3). */
  readonly maxRetries: number;
  /** The bind recovery timeout: still BIND_FAILED after this long, the operator is notified (RFC §16.3: 60 s). */
  readonly recoveryTimeoutMs: number;
}

export const DEFAULT_BINDING_OPTIONS: BindingOptions = {
  defaultSwitchTtlMs: 900_000,
  maxSwitchTtlMs: 86_400_000,
  retryBaseMs: 1_000,
  maxRetries: 3,
  recoveryTimeoutMs: 60_000,
};

/** The component name of the bindings' HITL WORKTREE_OVERRIDE invocations (their origin). */
export const BINDINGS_COMPONENT = 'worktree';

/** RFC §16.2, exactly: the transitions each operation may make. Anything else is refused. */
export const TRANSITIONS: Readonly<Record<BindingOperation, ReadonlyArray<readonly [BindingState, BindingState]>>> = {
  BIND: [
    ['UNBOUND', 'BOUND_HOME'],
    ['UNBOUND', 'BIND_FAILED'],
    ['BIND_FAILED', 'BOUND_HOME'],
  ],
  BIND_RETRY: [['BIND_FAILED', 'BOUND_HOME']],
  UNBIND: [
    ['BIND_FAILED', 'UNBOUND'],
    ['BOUND_HOME', 'UNBOUND'],
    ['BOUND_NON_HOME', 'UNBOUND'],
  ],
  SWITCH_REQUEST: [['BOUND_HOME', 'SWITCH_PENDING']],
  SWITCH_APPROVE: [['SWITCH_PENDING', 'BOUND_NON_HOME']],
  SWITCH_REJECT: [['SWITCH_PENDING', 'BOUND_HOME']],
  SWITCH_REVOKE: [['BOUND_NON_HOME', 'BOUND_HOME']],
  TTL_EXPIRED: [['BOUND_NON_HOME', 'BOUND_HOME']],
};

/** An operation the binding's state does not allow (RFC §16.2). */
export class BindingStateError extends SwarmError {
  constructor(
    readonly state: BindingState,
    readonly operation: BindingOperation,
    readonly agentId: string,
  ) {
    const from = [...new Set(TRANSITIONS[operation].map(([f]) => f))];
    super(
      `${operation} is not allowed in state ${state} (agent '${agentId}'); it is allowed from ${from.join(' or ')}`,
    );
    this.name = 'BindingStateError';
  }

  override get errorKind(): ErrorKind {
    return 'precondition';
  }

  override get errorCode(): Sw4rmCode {
    return 'VALIDATION_ERROR';
  }
}

const REQUEST_KINDS: Readonly<Record<BindingRequestError['kind'], ErrorKind>> = {
  invalid_argument: 'invalid',
  not_found: 'not_found',
  permission_denied: 'permission',
  failed_precondition: 'precondition',
};

/** A request the bindings refuse before any transition: bad arguments, an unknown worktree, a caller without the right. */
export class BindingRequestError extends SwarmError {
  constructor(
    readonly kind: 'invalid_argument' | 'not_found' | 'permission_denied' | 'failed_precondition',
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'BindingRequestError';
  }

  override get errorKind(): ErrorKind {
    return REQUEST_KINDS[this.kind];
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}

export type { BindingStatus } from './model';

/** The agent worktrees of every repository of the workspace, by repo_id. */
export class WorkspaceWorktrees {
  private readonly byId = new Map<string, Worktrees>();

  constructor(
    git: Git,
    snapshots: Snapshots,
    readonly repositories: readonly Repository[],
    options: {
      root?: (repo: Repository) => string | undefined;
      /** A worktree was made (by a Bind, whatever asked for it): the worktree operations run its setup. */
      onCreated?: (repoId: string, worktree: AgentWorktree, details: { readonly reusedBranch: boolean }) => void;
    } = {},
  ) {
    for (const repository of repositories) {
      this.byId.set(
        repository.id,
        new Worktrees(git, snapshots, repository, {
          root: options.root?.(repository),
          onCreated: options.onCreated && ((worktree, details) => options.onCreated!(repository.id, worktree, details)),
        }),
      );
    }
  }

  worktrees(repoId: string): Worktrees | undefined {
    return this.byId.get(repoId);
  }
}

/**
 * The home worktree id of an agent: its id when that is a valid worktree id, else the id with every other
 * character replaced by `-` (trimmed to 55) and 8 hex digits of its SHA-256, so that two agents never share one.
 */
export function homeWorktreeIdOf(agentId: string): string {
  try {
    return checkWorktreeId(agentId);
  } catch {
    const base = agentId
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/\.{2,}/g, '-')
      .replace(/^[.-]+/, '')
      .slice(0, 55)
      .replace(/[.]+$/, '');
    const hash = createHash('sha256').update(agentId).digest('hex').slice(0, 8);
    return checkWorktreeId(`${base || 'agent'}-${hash}`);
  }
}

function unbound(agentId: string, now: number): Binding {
  return {
    agentId,
    state: 'UNBOUND',
    repoId: '',
    homeWorktreeId: '',
    homePath: '',
    worktreeId: '',
    worktreePath: '',
    switch: null,
    nonHomeUntil: null,
    failure: null,
    updatedAt: now,
  };
}

function copy(binding: Binding): Binding {
  return JSON.parse(JSON.stringify(binding)) as Binding;
}

type Attempt =
  | { readonly ok: true; readonly worktree: AgentWorktree }
  | { readonly ok: false; readonly reason: BindFailureReason; readonly detail: string; readonly final?: boolean };

function failureOf(err: unknown): { reason: BindFailureReason; detail: string; final?: boolean } {
  const detail = err instanceof Error ? err.message : String(err);
  if (err instanceof WorktreeRefusedError) {
    if (err.reason === 'locked') return { reason: 'worktree_locked', detail };
    // A base that does not exist does not come into being by retrying: no retry (the BIND names another base).
    if (err.reason === 'bad_base') return { reason: 'worktree_not_found', detail, final: true };
    if (err.reason === 'not_found' || err.reason === 'missing_folder') return { reason: 'worktree_not_found', detail };
    return { reason: 'filesystem_error', detail };
  }
  if (err instanceof GitCommandError && /permission denied|operation not permitted/i.test(err.stderr))
    return { reason: 'permission_denied', detail };
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return { reason: 'permission_denied', detail };
  return { reason: 'filesystem_error', detail };
}

/**
 * The worktree binding state machine of every agent (RFC §16, §16.1–§16.3). Each transition is checked against
 * the RFC table and written with its structured event in one store transaction; bindings persist and come back
 * after a restart with their timers (switch TTLs, BIND retries, the 60 s notice) re-armed. A switch asks a human
 * through a HITL WORKTREE_OVERRIDE invocation; its decision (an operator, a rule, a fallback) settles the switch.
 */
export class WorktreeBindings {
  private readonly bindings = new Map<string, Binding>();
  private readonly timers = new Map<string, DisposableStore>();
  /** One operation at a time per agent (a BIND runs git; a second operation waits for it). */
  private readonly queue = new KeyedQueue();
  private readonly changed = new Emitter<BindingStatus>();
  /** Fires after every committed change of a binding. */
  readonly onDidChange: Event<BindingStatus> = this.changed.event;
  private readonly attention = new Emitter<BindingStatus>();
  /** Fires when an agent has stayed BIND_FAILED past the bind recovery timeout (RFC §16.3: notify the operator). */
  readonly onDidNeedOperator: Event<BindingStatus> = this.attention.event;
  private readonly subscriptions = new DisposableStore();
  private disposed = false;
  /** Timer and listener work never throws into the event loop: a fault is logged; stopped on dispose. */
  private readonly guard = new Guard((_during, err) =>
    this.log.internalError(BINDINGS_COMPONENT, 'worktree-bindings', err),
  );

  constructor(
    private readonly store: WorktreeStorage,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly hitl: HitlService,
    private readonly workspace: WorkspaceWorktrees,
    private readonly options: BindingOptions = DEFAULT_BINDING_OPTIONS,
  ) {
    this.subscriptions.add(
      hitl.onDidChange((change) => {
        if (
          change.kind === 'settled' &&
          change.invocation.origin.kind === 'internal' &&
          change.invocation.origin.component === BINDINGS_COMPONENT
        ) {
          this.guard.run('switch-settled', () =>
            this.switchSettled(change.invocation, { correlationId: change.invocation.correlationId }),
          );
        }
      }),
    );
    this.restore();
  }

  // ---------------------------------------------------------------- queries

  status(agentId: string): BindingStatus {
    const binding = this.bindings.get(agentId);
    return binding ? copy(binding) : unbound(agentId, this.clock.now());
  }

  list(): BindingStatus[] {
    return [...this.bindings.values()].map(copy);
  }

  /** Whether an agent is bound to (or about to switch into) worktree `worktreeId` of `repoId`: such a worktree is never removed. */
  isBound(repoId: string, worktreeId: string): boolean {
    for (const b of this.bindings.values()) {
      if (b.repoId !== repoId || b.state === 'UNBOUND' || b.state === 'BIND_FAILED') continue;
      if (b.homeWorktreeId === worktreeId || b.worktreeId === worktreeId || b.switch?.targetWorktreeId === worktreeId)
        return true;
    }
    return false;
  }

  /** The folder the agent works in now, when it is bound (BOUND_HOME, SWITCH_PENDING: its home; BOUND_NON_HOME: the target). */
  worktreePathOf(agentId: string): string | undefined {
    const b = this.bindings.get(agentId);
    return b && (b.state === 'BOUND_HOME' || b.state === 'SWITCH_PENDING' || b.state === 'BOUND_NON_HOME')
      ? b.worktreePath
      : undefined;
  }

  /** The repository, worktree and branch the agent works in now, when it is bound (the activity buffer's entry). */
  placeOf(
    agentId: string,
  ): { readonly repoId: string; readonly worktreeId: string; readonly branch: string } | undefined {
    const b = this.bindings.get(agentId);
    if (!b || !(b.state === 'BOUND_HOME' || b.state === 'SWITCH_PENDING' || b.state === 'BOUND_NON_HOME'))
      return undefined;
    return { repoId: b.repoId, worktreeId: b.worktreeId, branch: `sw4rm/${b.worktreeId}` };
  }

  // ---------------------------------------------------------------- operations (RFC §16 WORKTREE_CONTROL)

  /**
   * BIND: binds the agent to its home worktree `worktreeId` (default: derived from the agent id) of `repoId`,
   * creating it on first use (an existing one is reused). A failure is not thrown: the binding enters
   * BIND_FAILED with its reason and is retried. Binding again to the same home is answered with the binding.
   * `within` runs inside the transition's transaction (an envelope's reply commits with it).
   */
  bind(
    agentId: string,
    repoId: string,
    worktreeId: string,
    ctx: CallContext,
    within?: (b: BindingStatus) => void,
    options: { readonly base?: string } = {},
  ): Promise<BindingStatus> {
    this.checkAgent(agentId);
    if (typeof repoId !== 'string' || repoId.trim() === '')
      throw new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', 'repo_id is required');
    const repoRefusal = identifierRefusal('repo_id', repoId, FIELD_LIMITS.worktree.repo_id);
    if (repoRefusal !== undefined) throw new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', repoRefusal);
    let home: string;
    try {
      home = worktreeId === '' ? homeWorktreeIdOf(agentId) : checkWorktreeId(worktreeId);
    } catch (err) {
      if (err instanceof InvalidWorktreeIdError)
        throw new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', err.message);
      throw err;
    }
    return this.queue.run(agentId, async () => {
      const current = this.status(agentId);
      if (current.state === 'BOUND_HOME' || current.state === 'SWITCH_PENDING' || current.state === 'BOUND_NON_HOME') {
        if (current.repoId === repoId && current.homeWorktreeId === home) {
          this.store.transaction(() => within?.(current));
          return current;
        }
        throw new BindingStateError(current.state, 'BIND', agentId);
      }
      this.refuseOthersHome(agentId, repoId, home);
      const attempt = await this.attempt(repoId, home, options.base);
      // Checked again once git has run: another agent may have bound this home meanwhile (its own BIND, or a retry).
      this.refuseOthersHome(agentId, repoId, home);
      return this.settleAttempt(agentId, 'BIND', repoId, home, attempt, ctx, within, options.base);
    });
  }

  /** UNBIND: back to UNBOUND (from BOUND_HOME, BOUND_NON_HOME, BIND_FAILED). The worktree is never removed. */
  unbind(agentId: string, ctx: CallContext, within?: (b: BindingStatus) => void): Promise<BindingStatus> {
    this.checkAgent(agentId);
    return this.queue.run(agentId, async () => {
      const binding = this.bindings.get(agentId) ?? unbound(agentId, this.clock.now());
      return this.transition(
        binding,
        'UNBIND',
        'UNBOUND',
        ctx,
        (b) => {
          const kept = {
            repo_id: b.repoId,
            worktree_id: b.worktreeId,
            home_worktree_id: b.homeWorktreeId,
            worktree_path: b.worktreePath,
          };
          Object.assign(b, unbound(agentId, this.clock.now()));
          return { ...kept, worktree_kept: true };
        },
        within,
      );
    });
  }

  /**
   * SWITCH_REQUEST: asks for the agent to work in worktree `targetWorktreeId` of its repository for a while. The
   * binding becomes SWITCH_PENDING and a HITL WORKTREE_OVERRIDE invocation is opened; its decision approves (for
   * the TTL) or rejects. Approval is never skipped: `requiresHitl` false is recorded, a policy rule may approve.
   * `facts` go into the invocation's facts too (who asked on the agent's behalf: the handoff area's handoff_request_id).
   */
  requestSwitch(
    agentId: string,
    targetWorktreeId: string,
    ctx: CallContext,
    options: { requiresHitl?: boolean; reason?: string; facts?: Readonly<Record<string, string>> } = {},
    within?: (b: BindingStatus) => void,
  ): Promise<BindingStatus> {
    this.checkAgent(agentId);
    try {
      checkWorktreeId(targetWorktreeId);
    } catch (err) {
      throw new BindingRequestError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `target_worktree_id: ${(err as Error).message}`,
      );
    }
    return this.queue.run(agentId, async () => {
      const binding = this.bindings.get(agentId) ?? unbound(agentId, this.clock.now());
      this.checkAllowed(binding, 'SWITCH_REQUEST');
      if (targetWorktreeId === binding.homeWorktreeId) {
        throw new BindingRequestError(
          'invalid_argument',
          'VALIDATION_ERROR',
          `'${targetWorktreeId}' is the agent's home worktree`,
        );
      }
      const worktrees = this.workspace.worktrees(binding.repoId);
      const target = worktrees ? await worktrees.get(targetWorktreeId) : undefined;
      if (!target || !fs.existsSync(target.path)) {
        throw new BindingRequestError(
          'not_found',
          'worktree_not_found',
          `no worktree '${targetWorktreeId}' in repository '${binding.repoId}'`,
        );
      }
      if (target.locked)
        throw new BindingRequestError(
          'failed_precondition',
          'worktree_locked',
          `worktree '${targetWorktreeId}' is locked`,
        );
      const after = this.bindings.get(agentId) ?? binding;
      this.checkAllowed(after, 'SWITCH_REQUEST');
      const now = this.clock.now();
      const request = parseInvocationRequest(
        {
          reason_type: 'WORKTREE_OVERRIDE',
          subject: { repo_id: after.repoId, worktree_id: targetWorktreeId, task_id: '' },
          summary: `Agent ${agentId} asks to work in worktree ${targetWorktreeId} instead of its home ${after.homeWorktreeId}`,
          facts: {
            // The caller's own facts (the handoff area: handoff_request_id), under the binding's.
            ...options.facts,
            agent_id: agentId,
            repo_id: after.repoId,
            home_worktree_id: after.homeWorktreeId,
            target_worktree_id: targetWorktreeId,
            target_path: target.path,
            target_branch: target.branch,
            requires_hitl: options.requiresHitl ?? true,
            ...(options.reason ? { reason: options.reason } : {}),
          },
          proposed_actions: ['approve', 'deny'],
        },
        { requester: agentId, correlationId: ctx.correlationId, now },
      );
      let invocation: HitlInvocation | undefined;
      this.transition(
        after,
        'SWITCH_REQUEST',
        'SWITCH_PENDING',
        ctx,
        (b) => {
          invocation = this.hitl.open(request, { kind: 'internal', component: BINDINGS_COMPONENT }, ctx).invocation;
          const grant: SwitchGrant = {
            targetWorktreeId,
            targetPath: target.path,
            invocationId: invocation.id,
            requestedAt: now,
            ttlMs: null,
          };
          b.switch = grant;
          return {
            target_worktree_id: targetWorktreeId,
            invocation_id: invocation.id,
            requires_hitl: options.requiresHitl ?? true,
          };
        },
        within,
      );
      // A policy rule may have decided the invocation as it opened, before the binding knew its id.
      if (invocation && invocation.state !== 'pending') this.switchSettled(invocation, ctx);
      return this.status(agentId);
    });
  }

  /**
   * SWITCH_APPROVE by an operator: decides the pending WORKTREE_OVERRIDE invocation `approve`; the binding
   * becomes BOUND_NON_HOME for `ttlMs` (0: the default), then returns home by itself.
   */
  approveSwitch(
    agentId: string,
    targetWorktreeId: string,
    ttlMs: number,
    operator: string,
    ctx: CallContext,
  ): Promise<BindingStatus> {
    this.checkAgent(agentId);
    if (!Number.isFinite(ttlMs) || ttlMs < 0 || ttlMs > this.options.maxSwitchTtlMs) {
      throw new BindingRequestError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `ttl_ms must be between 0 (the default, ${this.options.defaultSwitchTtlMs}) and ${this.options.maxSwitchTtlMs}`,
      );
    }
    return this.queue.run(agentId, async () => {
      const binding = this.pendingSwitch(agentId, 'SWITCH_APPROVE', targetWorktreeId);
      const grant = binding.switch!;
      this.store.transaction(() => {
        binding.switch = { ...grant, ttlMs: ttlMs === 0 ? null : ttlMs };
        this.store.worktree.put(binding);
        this.hitl.decide(
          grant.invocationId,
          { action: 'approve', rationale: `Approved through WorktreeService.ApproveSwitch by ${operator}` },
          operator,
          ctx,
        );
      });
      return this.status(agentId);
    });
  }

  /** SWITCH_REJECT by an operator: decides the pending invocation `deny`; the binding returns to BOUND_HOME. */
  rejectSwitch(agentId: string, reason: string, operator: string, ctx: CallContext): Promise<BindingStatus> {
    this.checkAgent(agentId);
    return this.queue.run(agentId, async () => {
      const binding = this.pendingSwitch(agentId, 'SWITCH_REJECT', '');
      const rationale = reason.trim()
        ? `Rejected by ${operator}: ${reason.trim().slice(0, 1000)}`
        : `Rejected through WorktreeService.RejectSwitch by ${operator}`;
      this.hitl.decide(binding.switch!.invocationId, { action: 'deny', rationale }, operator, ctx);
      return this.status(agentId);
    });
  }

  /** SWITCH_REVOKE: ends a granted switch at once; the agent is back in its home worktree. */
  revokeSwitch(
    agentId: string,
    by: string,
    ctx: CallContext,
    within?: (b: BindingStatus) => void,
  ): Promise<BindingStatus> {
    this.checkAgent(agentId);
    return this.queue.run(agentId, async () => {
      const binding = this.bindings.get(agentId) ?? unbound(agentId, this.clock.now());
      return this.transition(
        binding,
        'SWITCH_REVOKE',
        'BOUND_HOME',
        ctx,
        (b) => this.goHome(b, { revoked_by: by }),
        within,
      );
    });
  }

  dispose(): void {
    this.disposed = true;
    this.guard.stop();
    this.subscriptions.dispose();
    for (const timers of this.timers.values()) timers.dispose();
    this.timers.clear();
    this.changed.dispose();
    this.attention.dispose();
  }

  // ---------------------------------------------------------------- the machine

  /** The agent bound (home, switch pending or switched away) with `home` of `repoId` as its home, other than `agentId`. */
  private homeOwner(agentId: string, repoId: string, home: string): string | undefined {
    for (const other of this.bindings.values()) {
      if (
        other.agentId !== agentId &&
        other.repoId === repoId &&
        other.homeWorktreeId === home &&
        (other.state === 'BOUND_HOME' || other.state === 'SWITCH_PENDING' || other.state === 'BOUND_NON_HOME')
      )
        return other.agentId;
    }
    return undefined;
  }

  /** One worktree is the home of one bound agent at a time. */
  private refuseOthersHome(agentId: string, repoId: string, home: string): void {
    const owner = this.homeOwner(agentId, repoId, home);
    if (owner !== undefined)
      throw new BindingRequestError(
        'failed_precondition',
        'PERMISSION_DENIED',
        `worktree '${home}' of '${repoId}' is the home worktree of agent '${owner}'`,
      );
  }

  private checkAgent(agentId: string): void {
    const max = FIELD_LIMITS.worktree.agent_id;
    if (typeof agentId !== 'string' || agentId.trim() === '') {
      throw new BindingRequestError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `agent_id is required (at most ${max} characters)`,
      );
    }
    const refusal = identifierRefusal('agent_id', agentId, max);
    if (refusal !== undefined) throw new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', refusal);
  }

  private checkAllowed(binding: Binding, operation: BindingOperation): void {
    if (!TRANSITIONS[operation].some(([from]) => from === binding.state))
      throw new BindingStateError(binding.state, operation, binding.agentId);
  }

  private pendingSwitch(agentId: string, operation: 'SWITCH_APPROVE' | 'SWITCH_REJECT', target: string): Binding {
    const binding = this.bindings.get(agentId) ?? unbound(agentId, this.clock.now());
    this.checkAllowed(binding, operation);
    if (target !== '' && binding.switch?.targetWorktreeId !== target) {
      throw new BindingRequestError(
        'failed_precondition',
        'VALIDATION_ERROR',
        `the pending switch of '${agentId}' is to '${binding.switch?.targetWorktreeId}', not '${target}'`,
      );
    }
    if (!binding.switch || this.hitl.get(binding.switch.invocationId)?.state !== 'pending') {
      throw new BindingRequestError(
        'failed_precondition',
        'VALIDATION_ERROR',
        `the switch of '${agentId}' is being settled`,
      );
    }
    return binding;
  }

  /**
   * Moves `binding` by `operation` to `to` (refused unless the RFC table has that transition): `change` edits the
   * record and returns the event's details; the record, its event and `within` commit in one transaction.
   */
  private transition(
    binding: Binding,
    operation: BindingOperation,
    to: BindingState,
    ctx: CallContext,
    change: (b: Binding) => Record<string, unknown>,
    within?: (b: BindingStatus) => void,
    level: 'INFO' | 'WARN' = 'INFO',
  ): BindingStatus {
    const from = binding.state;
    if (!TRANSITIONS[operation].some(([f, t]) => f === from && t === to))
      throw new BindingStateError(from, operation, binding.agentId);
    const next = copy(binding);
    this.store.transaction(() => {
      const details = change(next);
      next.state = to;
      next.updatedAt = this.clock.now();
      this.store.worktree.put(next);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: BINDINGS_COMPONENT,
        eventType: 'worktree.binding_transition',
        level,
        details: {
          agent_id: next.agentId,
          operation,
          from,
          to,
          repo_id: next.repoId || details.repo_id,
          worktree_id: next.worktreeId || details.worktree_id,
          ...details,
        },
      });
      within?.(copy(next));
    });
    this.bindings.set(next.agentId, next);
    this.rearm(next);
    this.changed.fire(copy(next));
    return copy(next);
  }

  private goHome(b: Binding, details: Record<string, unknown>): Record<string, unknown> {
    const left = b.worktreeId;
    b.worktreeId = b.homeWorktreeId;
    b.worktreePath = b.homePath;
    b.switch = null;
    b.nonHomeUntil = null;
    return { left_worktree_id: left, ...details };
  }

  private async attempt(repoId: string, worktreeId: string, base?: string): Promise<Attempt> {
    const worktrees = this.workspace.worktrees(repoId);
    if (!worktrees) {
      const known = this.workspace.repositories.map((r) => r.id);
      return {
        ok: false,
        reason: 'worktree_not_found',
        detail: `no repository '${repoId}' in the workspace (${known.length ? `known: ${known.join(', ')}` : 'the coordinator was given no workspace folder with a git repository'})`,
      };
    }
    try {
      const existing = await worktrees.get(worktreeId);
      if (existing) {
        if (existing.locked)
          return {
            ok: false,
            reason: 'worktree_locked',
            detail: `worktree '${worktreeId}' is locked (git worktree unlock)`,
          };
        if (!fs.existsSync(existing.path))
          return {
            ok: false,
            reason: 'worktree_not_found',
            detail: `the folder of worktree '${worktreeId}' is gone (${existing.path})`,
          };
        return { ok: true, worktree: existing };
      }
      return { ok: true, worktree: await worktrees.create(worktreeId, { base }) };
    } catch (err) {
      return { ok: false, ...failureOf(err) };
    }
  }

  private settleAttempt(
    agentId: string,
    operation: 'BIND' | 'BIND_RETRY',
    repoId: string,
    home: string,
    attempt: Attempt,
    ctx: CallContext,
    within?: (b: BindingStatus) => void,
    base?: string,
  ): BindingStatus {
    const binding = this.bindings.get(agentId) ?? unbound(agentId, this.clock.now());
    const now = this.clock.now();
    const setHome = (b: Binding) => {
      b.repoId = repoId;
      b.homeWorktreeId = home;
      b.worktreeId = home;
    };
    if (attempt.ok) {
      return this.transition(
        binding,
        operation,
        'BOUND_HOME',
        ctx,
        (b) => {
          setHome(b);
          b.homePath = attempt.worktree.path;
          b.worktreePath = attempt.worktree.path;
          b.failure = null;
          return {
            worktree_path: attempt.worktree.path,
            branch: attempt.worktree.branch,
            retries: binding.failure?.retries ?? 0,
          };
        },
        within,
      );
    }
    const previous = binding.state === 'BIND_FAILED' ? binding.failure : null;
    const retries = operation === 'BIND_RETRY' ? (previous?.retries ?? 0) + 1 : 0;
    const nextRetryAt =
      retries < this.options.maxRetries && !attempt.final ? now + this.options.retryBaseMs * 2 ** retries : null;
    const edit = (b: Binding) => {
      setHome(b);
      b.homePath = '';
      b.worktreePath = '';
      b.failure = {
        reason: attempt.reason,
        detail: attempt.detail,
        since: previous?.since ?? now,
        retries,
        nextRetryAt,
        notified: previous?.notified ?? false,
        ...(base !== undefined ? { base } : {}),
      };
      return {
        reason: attempt.reason,
        error: attempt.detail,
        retries,
        next_retry_at: nextRetryAt === null ? null : isoUtc(nextRetryAt),
      };
    };
    if (binding.state === 'UNBOUND')
      return this.transition(binding, operation, 'BIND_FAILED', ctx, edit, within, 'WARN');
    // Still BIND_FAILED: not a transition, but the attempt and its reason are recorded all the same.
    if (binding.state !== 'BIND_FAILED') throw new BindingStateError(binding.state, operation, agentId);
    const next = copy(binding);
    this.store.transaction(() => {
      const details = edit(next);
      next.updatedAt = now;
      this.store.worktree.put(next);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: BINDINGS_COMPONENT,
        eventType: 'worktree.bind_failed_again',
        level: 'WARN',
        details: { agent_id: agentId, operation, state: 'BIND_FAILED', repo_id: repoId, worktree_id: home, ...details },
      });
      within?.(copy(next));
    });
    this.bindings.set(agentId, next);
    this.rearm(next);
    this.changed.fire(copy(next));
    return copy(next);
  }

  /** The WORKTREE_OVERRIDE invocation of a pending switch was settled: approve → BOUND_NON_HOME for the TTL, else home. */
  private switchSettled(invocation: HitlInvocation, ctx: CallContext): void {
    const binding = [...this.bindings.values()].find(
      (b) => b.state === 'SWITCH_PENDING' && b.switch?.invocationId === invocation.id,
    );
    if (!binding) return;
    const action = invocation.decision?.action;
    if (action === 'approve' || action === 'modify') {
      const asked = (invocation.decision?.payload as { ttl_ms?: unknown } | null)?.ttl_ms;
      const fromModify = typeof asked === 'number' && asked > 0 ? Math.min(asked, this.options.maxSwitchTtlMs) : null;
      const ttl = binding.switch!.ttlMs ?? fromModify ?? this.options.defaultSwitchTtlMs;
      this.transition(binding, 'SWITCH_APPROVE', 'BOUND_NON_HOME', ctx, (b) => {
        b.worktreeId = b.switch!.targetWorktreeId;
        b.worktreePath = b.switch!.targetPath;
        b.nonHomeUntil = this.clock.now() + ttl;
        return {
          invocation_id: invocation.id,
          decided_by: invocation.decision?.origin.by,
          ttl_ms: ttl,
          until: isoUtc(b.nonHomeUntil),
        };
      });
    } else {
      this.transition(binding, 'SWITCH_REJECT', 'BOUND_HOME', ctx, (b) =>
        this.goHome(b, {
          invocation_id: invocation.id,
          decided_by: invocation.decision?.origin.by ?? 'coordinator',
          action: action ?? 'deny',
          rationale: invocation.decision?.rationale ?? '',
        }),
      );
    }
  }

  /** The timers a binding's state needs: the TTL of a granted switch; a BIND_FAILED's retry and its 60 s notice. */
  private rearm(binding: Binding): void {
    this.timers.get(binding.agentId)?.dispose();
    this.timers.delete(binding.agentId);
    if (this.disposed) return;
    const timers = new DisposableStore();
    const now = this.clock.now();
    const agentId = binding.agentId;
    if (binding.state === 'BOUND_NON_HOME' && binding.nonHomeUntil !== null) {
      timers.add(
        this.clock.setTimer(Math.max(0, binding.nonHomeUntil - now), () =>
          this.guard.run(`ttl:${agentId}`, () => this.ttlExpired(agentId)),
        ),
      );
    }
    if (binding.state === 'BIND_FAILED' && binding.failure) {
      const failure = binding.failure;
      if (failure.nextRetryAt !== null) {
        timers.add(
          this.clock.setTimer(Math.max(0, failure.nextRetryAt - now), () => {
            void this.queue
              .run(agentId, async () => {
                const current = this.bindings.get(agentId);
                if (current?.state !== 'BIND_FAILED' || this.disposed) return;
                const base = current.failure?.base;
                let attempt: Attempt = await this.attempt(current.repoId, current.homeWorktreeId, base);
                if (this.disposed || this.bindings.get(agentId)?.state !== 'BIND_FAILED') return;
                // Another agent may have bound this home since the BIND failed: then the retry fails too.
                const owner = this.homeOwner(agentId, current.repoId, current.homeWorktreeId);
                if (attempt.ok && owner !== undefined) {
                  attempt = {
                    ok: false,
                    reason: 'permission_denied',
                    detail: `worktree '${current.homeWorktreeId}' of '${current.repoId}' is now the home worktree of agent '${owner}'`,
                  };
                }
                this.settleAttempt(
                  agentId,
                  'BIND_RETRY',
                  current.repoId,
                  current.homeWorktreeId,
                  attempt,
                  { correlationId: `bind-retry:${agentId}` },
                  undefined,
                  base,
                );
              })
              .catch((err) =>
                this.log.internalError(BINDINGS_COMPONENT, `bind-retry:${agentId}`, err, { agent_id: agentId }),
              );
          }),
        );
      }
      if (!failure.notified) {
        timers.add(
          this.clock.setTimer(Math.max(0, failure.since + this.options.recoveryTimeoutMs - now), () =>
            this.guard.run(`notify-operator:${agentId}`, () => this.notifyOperator(agentId)),
          ),
        );
      }
    }
    this.timers.set(agentId, timers);
  }

  private ttlExpired(agentId: string, whileStopped = false): void {
    const binding = this.bindings.get(agentId);
    if (binding?.state !== 'BOUND_NON_HOME') return;
    this.transition(binding, 'TTL_EXPIRED', 'BOUND_HOME', { correlationId: `switch-ttl:${agentId}` }, (b) =>
      this.goHome(b, {
        ttl_ended_at: b.nonHomeUntil === null ? null : isoUtc(b.nonHomeUntil),
        ...(whileStopped ? { while_stopped: true } : {}),
      }),
    );
  }

  /** RFC §16.3: still BIND_FAILED after the bind recovery timeout → the operator is notified (a WARN event, onDidNeedOperator). */
  private notifyOperator(agentId: string): void {
    const binding = this.bindings.get(agentId);
    if (binding?.state !== 'BIND_FAILED' || !binding.failure || binding.failure.notified) return;
    const next = copy(binding);
    next.failure = { ...binding.failure, notified: true };
    this.store.transaction(() => {
      this.store.worktree.put(next);
      this.log.record({
        correlationId: `bind-failed:${agentId}`,
        actor: BINDINGS_COMPONENT,
        eventType: 'worktree.bind_failed_operator_notice',
        level: 'WARN',
        details: {
          agent_id: agentId,
          repo_id: next.repoId,
          worktree_id: next.homeWorktreeId,
          reason: next.failure!.reason,
          error: next.failure!.detail,
          since: isoUtc(next.failure!.since),
          retries: next.failure!.retries,
          remedy: 'fix the cause and BIND again, or UNBIND to clear the failure',
        },
      });
    });
    this.bindings.set(agentId, next);
    this.rearm(next);
    this.attention.fire(copy(next));
    this.changed.fire(copy(next));
  }

  /** After a restart: every binding as it was, with its timers; a TTL that ran out while stopped returns home now. */
  private restore(): void {
    for (const binding of this.store.worktree.list()) this.bindings.set(binding.agentId, binding);
    for (const binding of [...this.bindings.values()]) {
      if (binding.state === 'SWITCH_PENDING' && binding.switch) {
        const invocation = this.hitl.get(binding.switch.invocationId);
        if (invocation && invocation.state !== 'pending') {
          this.switchSettled(invocation, { correlationId: invocation.correlationId });
          continue;
        }
        if (!invocation) {
          this.transition(
            binding,
            'SWITCH_REJECT',
            'BOUND_HOME',
            { correlationId: `restore:${binding.agentId}` },
            (b) => this.goHome(b, { reason: 'its WORKTREE_OVERRIDE invocation is gone' }),
          );
          continue;
        }
      }
      if (
        binding.state === 'BOUND_NON_HOME' &&
        binding.nonHomeUntil !== null &&
        binding.nonHomeUntil <= this.clock.now()
      ) {
        this.ttlExpired(binding.agentId, true);
        continue;
      }
      this.rearm(binding);
    }
  }
}
