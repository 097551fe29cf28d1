import type { Event } from '../../events';
import type { SessionRecord, SessionState, StoredEntry, TranscriptEntry, TurnOrigin } from '../../sessions/model';
import type { SessionsChange } from '../../sessions/sessions';

export type { SessionRecord, SessionState, SessionsChange, StoredEntry, TranscriptEntry, TurnOrigin };

/**
 * Agents in session mode (README, "Run a workflow of coding agents"): the ACP sessions the coordinator drives, their
 * transcripts, and a person's controls. A session starts with launchAgent of a `session` profile. Part of
 * CoordinatorApi (coordinatorApi.ts).
 */
export interface SessionsApi {
  /** Every agent's session, open or exited. */
  sessions(): Promise<SessionRecord[]>;
  session(agentId: string): Promise<SessionRecord | undefined>;
  /** The stored transcript, at most the last `limit` entries (default all kept, 2000); `dropped` counts the ones before. Rejects `not_found`. */
  sessionTranscript(agentId: string, limit?: number): Promise<{ entries: StoredEntry[]; dropped: number }>;
  /** A person's prompt in the agent's session. Rejects `refused` while a turn runs or when it is not open, `invalid` when empty. */
  promptSession(agentId: string, text: string, by: string): Promise<void>;
  /** Stop: cancels the running turn (`session/cancel`). */
  stopSessionTurn(agentId: string): Promise<void>;
  /** Ends the agent's process; Relaunch starts a new session. */
  endSession(agentId: string): Promise<void>;
  /** A session's record changed, or an entry of its transcript was made or changed. */
  readonly onDidChangeSessions: Event<SessionsChange>;
}
