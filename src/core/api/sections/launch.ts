import type { Event } from '../../events';
import type {
  BridgeEndpoints,
  LaunchesChange,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  ProfileAvailability,
  ProfileIssue,
} from '../../launch/model';

export type {
  BridgeEndpoints,
  LaunchesChange,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  ProfileAvailability,
  ProfileIssue,
};

/**
 * Launched agents (README, "Launch your first agent"): profiles, launches, and the bridge they are wired to. Part
 * of CoordinatorApi (coordinatorApi.ts).
 */
export interface LaunchApi {
  /**
   * The launch profiles: built in, then the `sw4rm.agents.profiles` setting's, then each repository's
   * `.sw4rm/agents.json` (a later one with the same id replaces an earlier one), with every refused entry as an issue.
   */
  launchProfiles(): Promise<{ readonly profiles: LaunchProfile[]; readonly issues: ProfileIssue[] }>;
  /** The `sw4rm.agents.profiles` setting's value as the editor read it (any JSON); answers its issues. */
  setLaunchProfileSettings(value: unknown): Promise<ProfileIssue[]>;
  /** Whether the profile's command is installed (found on PATH); asked before every launch. Rejects `not_found`. */
  profileAvailability(profileId: string): Promise<ProfileAvailability>;
  /**
   * SW4RM: Launch Agent…: registers a managed agent (descriptor from the profile), mints its agent credential,
   * creates and binds its worktree (setup first), writes the bridge, approval and instructions files into the worktree
   * (excluded from git by the worktree's own exclude file), and answers how to start the process. Rejects
   * `not_found` (profile, repository, worktree), `invalid` (agent id), `refused` (id taken by an agent not launched
   * here, worktree bound to another agent, command not installed, bridge not listening) with a message for the user.
   */
  launchAgent(request: LaunchRequest, by: string): Promise<LaunchPlan>;
  /** Relaunch: the same agent, worktree and credential again (a new credential if that one was revoked), wiring rewritten. */
  relaunchAgent(agentId: string, by: string): Promise<LaunchPlan>;
  /** The editor opened its terminal and the process runs: RUNNING. */
  launchStarted(agentId: string): Promise<LaunchRecord>;
  /**
   * Its process ended or its terminal was closed: EXITED with the exit code (null when unknown), and the agent's
   * registry lifecycle moves on (SHUTTING_DOWN); its history, worktree and inbox are kept. Idempotent.
   */
  launchExited(agentId: string, exitCode: number | null, by: string): Promise<LaunchRecord>;
  /** Every launched agent, newest first. */
  launches(): Promise<LaunchRecord[]>;
  launch(agentId: string): Promise<LaunchRecord | undefined>;
  readonly onDidChangeLaunches: Event<LaunchesChange>;
  /** Where the MCP bridge and the hook endpoint listen; undefined while the bridge is not listening. */
  bridgeEndpoints(): Promise<BridgeEndpoints | undefined>;
}
