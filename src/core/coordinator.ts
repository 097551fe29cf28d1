import * as path from 'node:path';
import { systemClock, type Clock } from './clock';
import type { CoordinatorStorage } from './coordinatorStore';
import { Credentials } from './credentials/credentials';
import type { Disposable } from './events';
import { bindHitlToRouter } from './hitl/envelopeBridge';
import { HitlService } from './hitl/hitlService';
import { DEFAULT_HITL_POLICY, type HitlPolicy } from './hitl/policy';
import { randomIds, type IdSource } from './ids';
import { EventLog } from './log/eventLog';
import { DEFAULT_MAX_EVENTS, scheduleEventRetention } from './log/eventRetention';
import type { StoredEvent } from './log/model';
import { DEFAULT_REGISTRY_OPTIONS, Registry, type RegistryOptions } from './registry/registry';
import { DEFAULT_ROUTER_OPTIONS, Router, type RouterOptions } from './router/router';
import { ActivityBuffer } from './activity/activityBuffer';
import { DEFAULT_ACTIVITY_OPTIONS, type ActivityOptions } from './activity/model';
import { ConcurrencyControl } from './scheduler/concurrency';
import { InferenceEngine, ReasoningProvider } from './reasoning/inferenceEngine';
import { DEFAULT_SCHEDULER_OPTIONS, type SchedulerOptions } from './scheduler/model';
import { Scheduler } from './scheduler/scheduler';
import { NegotiationPolicies, type PolicySettings } from './policy/policies';
import { Negotiations } from './negotiation/negotiations';
import { NegotiationRoom } from './room/room';
import { DEFAULT_HANDOFF_OPTIONS, Handoffs, type HandoffOptions } from './handoff/handoffs';
import { bindToolCallsToRouter } from './tools/envelopeBridge';
import { ToolTransport } from './tools/externalProvider';
import {
  DEFAULT_PROCESS_PROVIDER_OPTIONS,
  ProcessProvider,
  type ProcessProviderOptions,
} from './tools/processProvider';
import { ProviderCatalog } from './tools/providers';
import { DEFAULT_TOOLS_OPTIONS, Tools, type ToolsOptions } from './tools/tools';
import { WorkspaceProvider } from './tools/workspaceProvider';
import {
  DEFAULT_BINDING_OPTIONS,
  WorkspaceWorktrees,
  WorktreeBindings,
  type BindingOptions,
} from './worktree/bindings';
import { bindWorktreeControlToRouter } from './worktree/envelopeBridge';
import { createGit, type Git } from './worktree/git';
import {
  DEFAULT_WORKTREE_OPERATIONS_OPTIONS,
  WorktreeOperations,
  type WorktreeOperationsOptions,
} from './worktree/operations';
import type { Repository } from './worktree/repositories';
import { Snapshots } from './worktree/snapshots';
import type { ToolRule } from './toolApproval/model';
import { ToolApprovals, type ToolApprovalOptions } from './toolApproval/toolApprovals';
import { bindWorkflowEventsToRouter } from './workflow/eventTrigger';
import { Workflows } from './workflow/workflows';
import type { ProgramLookup } from './launch/availability';
import { DEFAULT_LAUNCHES_OPTIONS, Launches, type LaunchesOptions } from './launch/launches';
import { Sessions } from './sessions/sessions';
import { Confinement } from './worktree/confinement';

export interface CoordinatorOptions {
  readonly store: CoordinatorStorage;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  readonly registry?: Partial<RegistryOptions>;
  readonly router?: Partial<RouterOptions>;
  /** Human-in-the-loop policy: deadlines, fallbacks per reason type, auto rules, pause. */
  readonly hitl?: HitlPolicy;
  /** Structured events kept in the store; older ones are pruned every minute. */
  readonly maxEvents?: number;
  /** The workspace's git repositories (repo_ids agents bind in; discoverRepositories), default none. */
  readonly repositories?: readonly Repository[];
  /** The git the worktree area runs (tests may wrap it); default the real one. */
  readonly git?: Git;
  /** Worktree bindings: switch TTLs, BIND retries, the bind recovery timeout. */
  readonly bindings?: Partial<BindingOptions>;
  /**
   * Where agent worktrees are made: `<worktreesFolder>/<repo_id>/<worktree_id>`; default (undefined or '') the sibling
   * folder `<repo>.sw4rm-worktrees/<worktree_id>` of each repository (sw4rm.worktreesFolder, --worktrees-folder).
   */
  readonly worktreesFolder?: string;
  /** Worktree setup, snapshot retention, merge-back approvals (README, "Worktrees"). */
  readonly worktreeOperations?: Partial<WorktreeOperationsOptions>;
  /** The scheduler: queue limit, max_parallel_instances per agent type, conflict threshold, preemption grace (README, "Tasks"). */
  readonly scheduler?: Partial<SchedulerOptions>;
  /** The activity buffer's limits and history (RFC §10.1). */
  readonly activity?: Partial<ActivityOptions>;
  /**
   * The tool call engine: calls kept, queue bounds, retry backoff, the escalation deadline (README, "Execution policy");
   * `process`: the built-in process provider's switches (README, "The process provider").
   */
  readonly tools?: Partial<ToolsOptions> & { readonly process?: Partial<ProcessProviderOptions> };
  /** Negotiation policy from the editor's settings / the CLI (README, "Negotiation policy"); the store's newest version wins where unset. */
  readonly negotiation?: PolicySettings;
  /** Handoffs: the default timeout, rerouting, routing to the operator, retention (README, "Handoffs"). */
  readonly handoffs?: Partial<HandoffOptions>;
  /**
   * Launched agents (README, "Launch profiles"): the liveness interval (default a third of the heartbeat debounce), the
   * ACK timeout of bridged agents (bridgedAckTimeoutMs, default 30 min), and
   * for tests the program lookup (PATH) and the environment `${env:NAME}` reads.
   */
  readonly launches?: Partial<LaunchesOptions> & {
    readonly lookup?: ProgramLookup;
    readonly env?: Readonly<Record<string, string | undefined>>;
  };
  /** Subscribed before anything is recorded, so that start-up and restore events are seen too. */
  readonly onEvent?: (event: StoredEvent) => void;
  /** Tool approvals of CLI agents: the user's rules (`sw4rm.approvals.toolRules`, checked by parseToolRules) and limits. */
  readonly toolApprovals?: { readonly rules?: readonly ToolRule[] } & Partial<ToolApprovalOptions>;
}

/**
 * The coordinator's core: every service of the SW4RM model over one store, one log, one clock.
 * It knows nothing of gRPC or the editor; src/server and src/extension wrap it.
 */
export class Coordinator {
  readonly store: CoordinatorStorage;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly log: EventLog;
  readonly registry: Registry;
  readonly router: Router;
  readonly hitl: HitlService;
  /** Agent and enrolment credentials, and who owns each agent id (README, "Security model"). */
  readonly credentials: Credentials;
  /** Agent worktree bindings (RFC §16): the state machine, persisted; the workspace's repositories and their worktrees. */
  readonly worktrees: WorktreeBindings;
  readonly workspace: WorkspaceWorktrees;
  /** Tools (RFC §18): the one call engine for every provider and every caller (README, "Write a tool provider"). */
  readonly tools: Tools;
  /** The tool providers (RFC §18.1): built-ins and agents registered through ConnectorService.RegisterProvider (persisted). */
  readonly toolCatalog: ProviderCatalog;
  /** TOOL_CALL envelopes to provider agents and their TOOL_RESULT / TOOL_ERROR answers. */
  readonly toolTransport: ToolTransport;
  /** Setup, removal, prune, snapshots and their retention, merge-back with its approval and undo (what the editor and the CLI do). */
  readonly worktreeOperations: WorktreeOperations;
  /** The activity buffer (RFC §10) and negotiation artifacts (activity.proto). */
  readonly activity: ActivityBuffer;
  /** RFC §9 concurrency: max_parallel_instances, job uniqueness, scope conflicts through the parallelism scorer and HITL. */
  readonly concurrency: ConcurrencyControl;
  /** RFC §9.3: the inference engine agent's answers (reasoning tools), else the built-in scorers; the gate's scorer. */
  readonly inference: InferenceEngine;
  /** Tasks by priority with preemption (RFC §7), dispatched as CONTROL envelopes; agent lifecycle moves (RFC §8). */
  readonly scheduler: Scheduler;
  /** Negotiation policy (RFC §17.2): versioned policy set, profiles, effective policies, room thresholds. */
  readonly policies: NegotiationPolicies;
  /** Debates (RFC §17–§17.4). */
  readonly negotiations: Negotiations;
  /** Negotiation rooms (RFC §17.5). */
  readonly room: NegotiationRoom;
  /** Handoffs (RFC §17.6): delegation between agents, capability routing, transferred work (the router's TransferredWork). */
  readonly handoffs: Handoffs;
  private readonly transferGuard: Disposable;
  /** DAG workflows (RFC §17.7): nodes run as scheduler tasks; EVENT triggers are NOTIFICATIONs to `coordinator`. */
  readonly workflows: Workflows;
  /** Tool approvals of CLI agents (their hooks, through the bridge's hook endpoint). */
  readonly toolApprovals: ToolApprovals;
  private readonly workflowEvents: Disposable;
  /** Managed agents launched from the editor: profiles, the launch (registration, credential, worktree, wiring), their process's life. */
  readonly launches: Launches;
  /** Agents in session mode: ACP sessions the coordinator drives (sessions/). */
  readonly sessions: Sessions;
  private readonly hitlBinding: Disposable;
  private readonly worktreeBinding: Disposable;
  private readonly toolBinding: Disposable;
  private readonly retentionTimer: Disposable;

  constructor(options: CoordinatorOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.log = new EventLog(this.store, this.clock);
    if (options.onEvent) this.log.onDidRecord(options.onEvent);
    this.log.record({
      correlationId: this.ids.uuid(),
      actor: 'coordinator',
      eventType: 'coordinator.started',
      details: { store: this.store.location, schema_version: this.store.schemaVersion },
    });
    this.registry = new Registry(this.store, this.log, this.clock, {
      ...DEFAULT_REGISTRY_OPTIONS,
      ...options.registry,
    });
    try {
      this.router = new Router(this.store, this.registry, this.log, this.clock, this.ids, {
        ...DEFAULT_ROUTER_OPTIONS,
        ...options.router,
      });
    } catch (err) {
      // The router refuses to start on a store whose payload files are missing (a StoreOpenError): stop what started.
      this.registry.dispose();
      this.log.dispose();
      throw err;
    }
    this.hitl = new HitlService(this.store, this.log, this.clock, this.ids, options.hitl ?? DEFAULT_HITL_POLICY);
    this.credentials = new Credentials(this.store, this.registry, this.log, this.clock, this.ids);
    this.hitlBinding = bindHitlToRouter(this.hitl, this.router, this.clock);
    const git = options.git ?? createGit();
    const snapshots = new Snapshots(git, this.clock);
    const folder = options.worktreesFolder?.trim();
    this.workspace = new WorkspaceWorktrees(git, snapshots, options.repositories ?? [], {
      root: folder ? (repo) => path.join(path.resolve(folder), repo.id) : undefined,
      // Set just below; a worktree is only ever made by a Bind, after the constructor.
      onCreated: (repoId, worktree, details) => this.worktreeOperations.worktreeCreated(repoId, worktree, details),
    });
    this.worktrees = new WorktreeBindings(this.store, this.log, this.clock, this.hitl, this.workspace, {
      ...DEFAULT_BINDING_OPTIONS,
      ...options.bindings,
    });
    this.worktreeOperations = new WorktreeOperations(
      {
        store: this.store,
        log: this.log,
        clock: this.clock,
        ids: this.ids,
        hitl: this.hitl,
        git,
        snapshots,
        workspace: this.workspace,
        bindings: this.worktrees,
      },
      { ...DEFAULT_WORKTREE_OPERATIONS_OPTIONS, ...options.worktreeOperations },
    );
    this.worktreeBinding = bindWorktreeControlToRouter(this.worktrees, this.router, this.log);
    // Right after the router and the areas it needs: it gives its bridged agents their ACK timeout (restored from its
    // records) before any restore below sends them a message.
    const debounceMs = options.registry?.heartbeatDebounceMs ?? DEFAULT_REGISTRY_OPTIONS.heartbeatDebounceMs;
    this.launches = new Launches(
      {
        store: this.store,
        log: this.log,
        clock: this.clock,
        ids: this.ids,
        git,
        registry: this.registry,
        credentials: this.credentials,
        ackTimeouts: this.router,
        bindings: this.worktrees,
        workspace: this.workspace,
        setupOf: (repoId, worktreeId) => this.worktreeOperations.setupOf(repoId, worktreeId),
        lookup: options.launches?.lookup,
        env: options.launches?.env,
      },
      {
        ...DEFAULT_LAUNCHES_OPTIONS,
        livenessIntervalMs: Math.max(
          1_000,
          Math.min(DEFAULT_LAUNCHES_OPTIONS.livenessIntervalMs, Math.floor(debounceMs / 3)),
        ),
        ...(options.launches?.livenessIntervalMs !== undefined
          ? { livenessIntervalMs: options.launches.livenessIntervalMs }
          : {}),
        ...(options.launches?.bridgedAckTimeoutMs !== undefined
          ? { bridgedAckTimeoutMs: options.launches.bridgedAckTimeoutMs }
          : {}),
      },
    );
    this.toolTransport = new ToolTransport({
      outbox: this.router,
      mailbox: this.router,
      agents: this.registry,
      log: this.log,
      clock: this.clock,
    });
    this.toolCatalog = new ProviderCatalog({
      store: this.store,
      log: this.log,
      clock: this.clock,
      agents: this.registry,
      builtins: [
        new WorkspaceProvider(git),
        new ProcessProvider({ ...DEFAULT_PROCESS_PROVIDER_OPTIONS, ...options.tools?.process }, this.clock),
        new ReasoningProvider(this.registry, () => this.toolTransport),
      ],
      external: (id, tools) => this.toolTransport.providerFor(id, tools),
    });
    this.tools = new Tools(
      {
        store: this.store,
        log: this.log,
        clock: this.clock,
        ids: this.ids,
        locator: this.worktrees,
        hitl: this.hitl,
        catalog: this.toolCatalog,
      },
      { ...DEFAULT_TOOLS_OPTIONS, ...options.tools },
    );
    this.toolBinding = bindToolCallsToRouter(this.tools, this.router, this.log);
    // After the binding: the envelope callers of calls a crash interrupted are answered.
    this.tools.restore({ correlationId: this.ids.uuid() });
    this.activity = new ActivityBuffer(
      this.store,
      this.log,
      this.clock,
      { ...DEFAULT_ACTIVITY_OPTIONS, ...options.activity },
      (negotiationId) => this.store.negotiation.get(negotiationId)?.participants,
    );
    const schedulerOptions: SchedulerOptions = { ...DEFAULT_SCHEDULER_OPTIONS, ...options.scheduler };
    this.inference = new InferenceEngine({
      agents: this.registry,
      call: (input, ctx) => this.tools.call('coordinator', input, ctx),
      abandon: (callId) => this.tools.abandon(callId),
      ids: this.ids,
      clock: this.clock,
      log: this.log,
    });
    this.concurrency = new ConcurrencyControl(
      {
        log: this.log,
        clock: this.clock,
        hitl: this.hitl,
        scorer: this.inference,
        agentTypeOf: (agentId) => this.registry.get(agentId)?.descriptor.name,
      },
      schedulerOptions,
    );
    this.scheduler = new Scheduler(
      {
        store: this.store,
        log: this.log,
        clock: this.clock,
        ids: this.ids,
        agents: this.registry,
        outbox: this.router,
        activity: this.activity,
        places: this.worktrees,
        gate: this.concurrency,
      },
      schedulerOptions,
    );
    this.policies = new NegotiationPolicies(
      { store: this.store, log: this.log, clock: this.clock },
      options.negotiation,
    );
    this.negotiations = new Negotiations({
      store: this.store,
      log: this.log,
      clock: this.clock,
      ids: this.ids,
      agents: this.registry,
      outbox: this.router,
      hitl: this.hitl,
      artifacts: this.activity,
      inference: this.inference,
      policies: this.policies,
    });
    this.room = new NegotiationRoom({
      store: this.store,
      log: this.log,
      clock: this.clock,
      ids: this.ids,
      agents: this.registry,
      outbox: this.router,
      hitl: this.hitl,
      policies: this.policies,
    });
    this.handoffs = new Handoffs(
      {
        store: this.store,
        log: this.log,
        clock: this.clock,
        ids: this.ids,
        agents: this.registry,
        outbox: this.router,
        tasks: this.scheduler,
        worktrees: this.worktrees,
        cancelInvocation: (id, by, reason, ctx) => {
          this.hitl.cancel(id, by, reason, ctx);
        },
        invocation: (id) => {
          const invocation = this.hitl.get(id);
          return invocation && { state: invocation.state, facts: invocation.context.facts };
        },
      },
      { ...DEFAULT_HANDOFF_OPTIONS, ...options.handoffs },
    );
    this.transferGuard = this.router.guardTransferredWork(this.handoffs);
    this.negotiations.restore({ correlationId: this.ids.uuid() });
    this.room.restore({ correlationId: this.ids.uuid() });
    this.handoffs.restore({ correlationId: this.ids.uuid() });
    this.workflows = new Workflows({
      store: this.store,
      log: this.log,
      clock: this.clock,
      ids: this.ids,
      tasks: this.scheduler,
      agents: this.registry,
      hitl: this.hitl,
    });
    this.workflowEvents = bindWorkflowEventsToRouter(this.workflows, this.router);
    // After the scheduler restored its tasks and HITL its invocations: RUNNING nodes are reconciled with them.
    this.workflows.restore({ correlationId: this.ids.uuid() });
    const { rules: toolRules, ...toolApprovalOptions } = options.toolApprovals ?? {};
    this.toolApprovals = new ToolApprovals(
      { hitl: this.hitl, log: this.log, clock: this.clock, locator: this.worktrees, ids: this.ids },
      toolApprovalOptions,
      toolRules ?? [],
    );
    // After HITL restored its invocations: questions whose hook died with the previous process are withdrawn.
    this.toolApprovals.restore({ correlationId: this.ids.uuid() });
    this.sessions = new Sessions({
      store: this.store,
      log: this.log,
      clock: this.clock,
      ids: this.ids,
      router: this.router,
      scheduler: this.scheduler,
      launches: this.launches,
      approvals: this.toolApprovals,
      confine: (root) => Confinement.forWorktree(root),
    });
    // After the scheduler and the launches restored: sessions of the previous process are exited, their tasks requeued.
    const restoring = { correlationId: this.ids.uuid() };
    this.sessions
      .restore(restoring)
      .catch((err) => this.log.internalError('sessions', restoring.correlationId, err, { during: 'restore' }));
    this.retentionTimer = scheduleEventRetention(
      this.store,
      this.log,
      this.clock,
      this.ids,
      options.maxEvents ?? DEFAULT_MAX_EVENTS,
    );
  }

  /** Stops timers and closes the store. The coordinator cannot be used afterwards. */
  dispose(): void {
    this.retentionTimer.dispose();
    this.sessions.dispose();
    this.launches.dispose();
    this.workflowEvents.dispose();
    this.workflows.dispose();
    this.transferGuard.dispose();
    this.handoffs.dispose();
    this.room.dispose();
    this.negotiations.dispose();
    this.policies.dispose();
    this.toolBinding.dispose();
    this.tools.dispose();
    this.toolTransport.dispose();
    this.toolCatalog.dispose();
    this.scheduler.dispose();
    this.concurrency.dispose();
    this.inference.dispose();
    this.activity.dispose();
    this.credentials.dispose();
    this.worktreeBinding.dispose();
    this.worktreeOperations.dispose();
    this.worktrees.dispose();
    this.hitlBinding.dispose();
    this.hitl.dispose();
    this.router.dispose();
    this.registry.dispose();
    this.log.record({
      correlationId: this.ids.uuid(),
      actor: 'coordinator',
      eventType: 'coordinator.stopped',
      details: {},
    });
    this.log.dispose();
    this.store.close();
  }
}
