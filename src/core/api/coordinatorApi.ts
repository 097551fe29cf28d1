import type { RegistryApi } from './sections/registry';
import type { RouterApi } from './sections/router';
import type { DeadLettersApi } from './sections/deadLetters';
import type { HitlApi } from './sections/hitl';
import type { CredentialsApi } from './sections/credentials';
import type { WorktreesApi } from './sections/worktrees';
import type { SchedulerApi } from './sections/scheduler';
import type { ActivityApi } from './sections/activity';
import type { ToolsApi } from './sections/tools';
import type { NegotiationsApi } from './sections/negotiations';
import type { RoomApi } from './sections/room';
import type { HandoffsApi } from './sections/handoffs';
import type { WorkflowsApi } from './sections/workflows';
import type { LaunchApi } from './sections/launch';
import type { SessionsApi } from './sections/sessions';

export * from './sections/registry';
export * from './sections/router';
export * from './sections/deadLetters';
export * from './sections/hitl';
export * from './sections/credentials';
export * from './sections/worktrees';
export * from './sections/scheduler';
export * from './sections/activity';
export * from './sections/tools';
export * from './sections/negotiations';
export * from './sections/room';
export * from './sections/handoffs';
export * from './sections/workflows';
export * from './sections/launch';
export * from './sections/sessions';
export * from './sections/payloadText';
/** Why a change was refused (api/errors.ts): users import it from here, as before. */
export { CoordinatorApiError, type CoordinatorApiErrorCode } from './errors';
/** The bounds of the store's disk budget in MiB (sw4rm.storeBudgetMiB, --store-budget). */
export {
  MAX_MEMORY_BUDGET_MIB,
  MAX_STORE_BUDGET_MIB,
  MIN_MEMORY_BUDGET_MIB,
  MIN_STORE_BUDGET_MIB,
} from '../router/router';

/**
 * Everything the editor asks of, tells and hears from the coordinator. Queries and changes answer Promises,
 * changes to the coordinator's state arrive as events, and only plain data crosses: records that can be
 * copied (structured clone, JSON), never live core objects. `InProcessCoordinatorApi` implements it over a
 * coordinator in the same thread; a coordinator in a worker thread or another process implements the same
 * interface, so no view changes then.
 *
 * It is the sum of one interface per area (sections/<area>.ts): a method of an area is declared in its section only.
 */
export interface CoordinatorApi
  extends
    RegistryApi,
    RouterApi,
    DeadLettersApi,
    HitlApi,
    CredentialsApi,
    WorktreesApi,
    SchedulerApi,
    ActivityApi,
    ToolsApi,
    NegotiationsApi,
    RoomApi,
    HandoffsApi,
    WorkflowsApi,
    LaunchApi,
    SessionsApi {}
