import type { Transactions } from '../store/store';

/**
 * Agent sessions (README, "Agents in session mode"): a CLI coding agent driven over the Agent Client Protocol, the
 * coordinator its client. Plain data only: what the editor, the console and the store see of a session.
 */

/** What started a prompt turn. */
export type TurnOrigin =
  | { readonly kind: 'task'; readonly taskId: string }
  | { readonly kind: 'node'; readonly workflowId: string; readonly nodeId: string; readonly taskId?: string }
  | { readonly kind: 'handoff'; readonly handoffId: string }
  | { readonly kind: 'message'; readonly messageId: string; readonly from: string }
  | { readonly kind: 'person'; readonly by: string };

/** The protocol's reasons a turn ends, and the coordinator's own: the agent's process ended or answered an error. */
export type TurnEnd = 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled' | 'error';

export interface ToolDiff {
  readonly path: string;
  readonly oldText: string | null;
  readonly newText: string;
}

/** One entry of a session's transcript, in the order it happened. Texts are bounded (TRANSCRIPT_TEXT_MAX_CHARS). */
export type TranscriptEntry =
  | {
      readonly kind: 'turn';
      readonly at: number;
      readonly turn: number;
      readonly origin: TurnOrigin;
      readonly prompt: string;
    }
  | { readonly kind: 'agent' | 'thought' | 'user'; readonly at: number; readonly turn: number; readonly text: string }
  | {
      readonly kind: 'tool';
      readonly at: number;
      readonly turn: number;
      readonly toolCallId: string;
      readonly title: string;
      readonly toolKind: string;
      readonly status: string;
      readonly paths: readonly string[];
      readonly diffs: readonly ToolDiff[];
      readonly output: string;
    }
  | {
      readonly kind: 'plan';
      readonly at: number;
      readonly turn: number;
      readonly entries: ReadonlyArray<{ readonly content: string; readonly status: string; readonly priority: string }>;
    }
  | {
      readonly kind: 'permission';
      readonly at: number;
      readonly turn: number;
      readonly toolCallId: string;
      readonly title: string;
      /** The option chosen (`allow_once`, `reject_once`…) or `cancelled`, and who decided. */
      readonly answer: string;
      readonly decidedBy: string;
      readonly invocationId?: string;
    }
  | {
      readonly kind: 'end';
      readonly at: number;
      readonly turn: number;
      readonly end: TurnEnd;
      readonly error?: string;
    };

/** Bounds of one transcript: the oldest entries leave first (`dropped` counts them). */
export const TRANSCRIPT_MAX_ENTRIES = 2000;
export const TRANSCRIPT_TEXT_MAX_CHARS = 64 * 1024;

/** Where a session is (the Agents view shows it; the session panel's header). */
export type SessionState =
  /** The agent's process is starting: `initialize` and `session/new` not answered yet. */
  | 'starting'
  /** Open, no turn running: the next message or task becomes a turn. */
  | 'idle'
  /** A turn is running (what started it is in `turn`). */
  | 'working'
  /** A turn waits for a person's answer to a permission request. */
  | 'waiting_for_approval'
  /** The process ended (crashed, stopped, or the coordinator restarted without `session/load`): Relaunch starts it again. */
  | 'exited';

/** One agent's session as stored and shown (plain data). */
export interface SessionRecord {
  readonly agentId: string;
  readonly profileId: string;
  readonly state: SessionState;
  /** The ACP session id the agent answered at `session/new` (what `session/load` would resume), '' before. */
  readonly sessionId: string;
  /** What the agent said of itself at `initialize`: its name and version, and whether it can load a session. */
  readonly agentName: string;
  readonly agentVersion: string;
  readonly loadSession: boolean;
  /** The running turn: its number and origin; null while idle. */
  readonly turn: { readonly number: number; readonly origin: TurnOrigin; readonly startedAt: number } | null;
  /** The process's exit code, or why it ended, once `exited`. */
  readonly exitCode: number | null;
  readonly error: string | null;
  readonly startedAt: number;
  readonly updatedAt: number;
  /** Transcript entries that left it (the oldest first, past TRANSCRIPT_MAX_ENTRIES). */
  readonly dropped: number;
}

/**
 * A transcript entry as stored: `seq` numbers the entries of one agent's transcript from 0 in the order they were
 * made (an entry that changes, a tool call's status, keeps its seq and is written again).
 */
export interface StoredEntry {
  readonly seq: number;
  readonly entry: TranscriptEntry;
}

export interface SessionRepository {
  put(record: SessionRecord): void;
  get(agentId: string): SessionRecord | undefined;
  list(): SessionRecord[];
  /** Writes (inserts or replaces by seq) these entries of the agent's transcript. */
  putEntries(agentId: string, entries: readonly StoredEntry[]): void;
  /** The agent's stored entries in seq order, at most the last `limit`. */
  entries(agentId: string, limit?: number): StoredEntry[];
  /** Removes the agent's entries with seq below `seq` (the transcript's bound). Answers how many. */
  dropEntriesBefore(agentId: string, seq: number): number;
  /** Removes the record and every entry of the agent. */
  delete(agentId: string): boolean;
}

export interface SessionStorage extends Transactions {
  readonly sessions: SessionRepository;
}
