import type { DatabaseSync } from 'node:sqlite';
import type { CredentialRepository, CredentialsStorage } from './credentials/model';
import { CREDENTIALS_SCHEMA } from './credentials/schema';
import { SqliteCredentialRepository } from './credentials/sqliteCredentialRepository';
import type { Event } from './events';
import type { HitlRepository, HitlStorage } from './hitl/model';
import { HITL_SCHEMA } from './hitl/schema';
import { SqliteHitlRepository } from './hitl/sqliteHitlRepository';
import type { EventRepository, LogStorage } from './log/model';
import { LOG_SCHEMA } from './log/schema';
import { SqliteEventRepository } from './log/sqliteEventRepository';
import type { AgentRepository, RegistryStorage } from './registry/model';
import { REGISTRY_SCHEMA } from './registry/schema';
import { SqliteAgentRepository } from './registry/sqliteAgentRepository';
import type { RouterStorage } from './router/model';
import { ROUTER_SCHEMA } from './router/schema';
import { SqliteRouterRepository } from './router/sqliteRouterRepository';
import type { SchemaStep } from './store/schema';
import { SqliteStore } from './store/sqliteStore';
import type { Store, StoreFailedError } from './store/store';
import type { WorktreeRepository, WorktreeStorage } from './worktree/model';
import type { SchedulerRepository, SchedulerStorage } from './scheduler/model';
import { SCHEDULER_SCHEMA } from './scheduler/schema';
import { SqliteSchedulerRepository } from './scheduler/sqliteSchedulerRepository';
import type { ActivityRepository, ActivityStorage } from './activity/model';
import { ACTIVITY_SCHEMA } from './activity/schema';
import { SqliteActivityRepository } from './activity/sqliteActivityRepository';
import { WORKTREE_SCHEMA } from './worktree/schema';
import type { ToolsRepository, ToolsStorage } from './tools/model';
import { TOOLS_SCHEMA } from './tools/schema';
import { SqliteToolsRepository } from './tools/sqliteToolsRepository';
import { SqliteWorktreeRepository } from './worktree/sqliteWorktreeRepository';
import type { PolicyRepository, PolicyStorage } from './policy/model';
import { POLICY_SCHEMA } from './policy/schema';
import { SqlitePolicyRepository } from './policy/sqlitePolicyRepository';
import type { NegotiationRepository, NegotiationStorage } from './negotiation/model';
import { NEGOTIATION_SCHEMA } from './negotiation/schema';
import { SqliteNegotiationRepository } from './negotiation/sqliteNegotiationRepository';
import type { RoomRepository, RoomStorage } from './room/model';
import { ROOM_SCHEMA } from './room/schema';
import { SqliteRoomRepository } from './room/sqliteRoomRepository';
import type { HandoffRepository, HandoffStorage } from './handoff/model';
import { HANDOFF_SCHEMA } from './handoff/schema';
import { SqliteHandoffRepository } from './handoff/sqliteHandoffRepository';
import type { WorkflowRepository, WorkflowStorage } from './workflow/model';
import { WORKFLOW_SCHEMA } from './workflow/schema';
import { SqliteWorkflowRepository } from './workflow/sqliteWorkflowRepository';
import type { LaunchRepository, LaunchStorage } from './launch/model';
import { LAUNCH_SCHEMA } from './launch/schema';
import { SqliteLaunchRepository } from './launch/sqliteLaunchRepository';
import type { SessionRepository, SessionStorage } from './sessions/model';
import { SESSIONS_SCHEMA } from './sessions/schema';
import { SqliteSessionRepository } from './sessions/sqliteSessionRepository';

/**
 * Every area's schema steps in their fixed order: by version, and within version 1 the registry before the log.
 * A new area appends its steps with the next free version (see ARCHITECTURE.md, "to add an area").
 */
export const COORDINATOR_SCHEMA: readonly SchemaStep[] = [
  ...REGISTRY_SCHEMA, // 1
  ...LOG_SCHEMA, // 1
  ...ROUTER_SCHEMA, // 2, 4, 6
  ...HITL_SCHEMA, // 3
  ...CREDENTIALS_SCHEMA, // 5
  ...WORKTREE_SCHEMA, // 7, 8
  ...SCHEDULER_SCHEMA, // 9
  ...ACTIVITY_SCHEMA, // 10
  ...TOOLS_SCHEMA, // 11
  ...POLICY_SCHEMA, // 12
  ...NEGOTIATION_SCHEMA, // 13
  ...ROOM_SCHEMA, // 14, 15
  ...HANDOFF_SCHEMA, // 16
  ...WORKFLOW_SCHEMA, // 17
  ...LAUNCH_SCHEMA, // 18
  ...SESSIONS_SCHEMA, // 19
].sort((a, b) => a.version - b.version);

export const LATEST_SCHEMA_VERSION = COORDINATOR_SCHEMA[COORDINATOR_SCHEMA.length - 1].version;

export interface CoordinatorStoreOptions {
  /** The schema to open with (tests add a step past the latest); default COORDINATOR_SCHEMA. */
  readonly schema?: readonly SchemaStep[];
  /** How long to wait for the store's lock while a previous owner is closing (a window reload). */
  readonly lockWaitMs?: number;
  /** Share one transaction among the writes of one event-loop turn (the running coordinator). */
  readonly groupCommit?: boolean;
}

/** What the coordinator needs of a store: the engine and every area's slice. */
export type CoordinatorStorage = Store &
  RegistryStorage &
  LogStorage &
  RouterStorage &
  HitlStorage &
  CredentialsStorage &
  WorktreeStorage &
  SchedulerStorage &
  ActivityStorage &
  ToolsStorage &
  PolicyStorage &
  NegotiationStorage &
  RoomStorage &
  HandoffStorage &
  WorkflowStorage &
  LaunchStorage &
  SessionStorage;

/**
 * The store as the coordinator uses it: the engine and every area's repository over it. Each area is handed only
 * its slice (RegistryStorage, LogStorage, RouterStorage, HitlStorage, CredentialsStorage, WorktreeStorage,
 * SchedulerStorage, ActivityStorage, ToolsStorage, PolicyStorage, NegotiationStorage, RoomStorage, HandoffStorage,
 * WorkflowStorage, LaunchStorage, SessionStorage): its own repository and transactions.
 */
export class CoordinatorStore
  implements
    Store,
    RegistryStorage,
    LogStorage,
    RouterStorage,
    HitlStorage,
    CredentialsStorage,
    WorktreeStorage,
    SchedulerStorage,
    ActivityStorage,
    ToolsStorage,
    PolicyStorage,
    NegotiationStorage,
    RoomStorage,
    HandoffStorage,
    WorkflowStorage,
    LaunchStorage,
    SessionStorage
{
  readonly agents: AgentRepository;
  readonly events: EventRepository;
  readonly router: SqliteRouterRepository;
  readonly hitl: HitlRepository;
  readonly credentials: CredentialRepository;
  readonly worktree: WorktreeRepository;
  readonly scheduler: SchedulerRepository;
  readonly activity: ActivityRepository;
  readonly tools: ToolsRepository;
  readonly policy: PolicyRepository;
  readonly negotiation: NegotiationRepository;
  readonly room: RoomRepository;
  readonly handoffs: HandoffRepository;
  readonly workflows: WorkflowRepository;
  readonly launches: LaunchRepository;
  readonly sessions: SessionRepository;

  private constructor(private readonly engine: SqliteStore) {
    const db: DatabaseSync = engine.database;
    this.agents = new SqliteAgentRepository(db);
    const events = new SqliteEventRepository(db);
    this.events = events;
    this.router = new SqliteRouterRepository(db);
    this.hitl = new SqliteHitlRepository(db);
    this.credentials = new SqliteCredentialRepository(db);
    this.worktree = new SqliteWorktreeRepository(db);
    this.scheduler = new SqliteSchedulerRepository(db);
    this.activity = new SqliteActivityRepository(db);
    this.tools = new SqliteToolsRepository(db);
    this.policy = new SqlitePolicyRepository(db);
    this.negotiation = new SqliteNegotiationRepository(db);
    this.room = new SqliteRoomRepository(db);
    this.handoffs = new SqliteHandoffRepository(db);
    this.workflows = new SqliteWorkflowRepository(db);
    this.launches = new SqliteLaunchRepository(db);
    this.sessions = new SqliteSessionRepository(db);
    engine.addCommitParticipant(this.router.indexFill);
    // Rows written several times before a commit are written once, just before it (WriteStage).
    engine.addWriteStage(events.stageWrites());
    engine.addWriteStage(this.router.stageWrites());
  }

  /** Opens (creating if needed) the store file in `dataDir`; see SqliteStore.open for what it refuses. */
  static open(dataDir: string, options: CoordinatorStoreOptions = {}): CoordinatorStore {
    const engine = SqliteStore.open(dataDir, {
      schema: options.schema ?? COORDINATOR_SCHEMA,
      lockWaitMs: options.lockWaitMs,
      groupCommit: options.groupCommit,
    });
    try {
      return new CoordinatorStore(engine);
    } catch (err) {
      engine.close();
      throw err;
    }
  }

  get location(): string {
    return this.engine.location;
  }

  get schemaVersion(): number {
    return this.engine.schemaVersion;
  }

  get onDidFail(): Event<StoreFailedError> {
    return this.engine.onDidFail;
  }

  transaction<T>(fn: () => T): T {
    return this.engine.transaction(fn);
  }

  savepoint<T>(fn: () => T): T {
    return this.engine.savepoint(fn);
  }

  afterCommit(fn: () => void): void {
    this.engine.afterCommit(fn);
  }

  whenDurable(): Promise<void> {
    return this.engine.whenDurable();
  }

  close(): void {
    this.engine.close();
  }
}
