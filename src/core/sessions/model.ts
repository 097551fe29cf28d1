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
