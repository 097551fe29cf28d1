import type { Event } from '../../events';
import type { ProviderInfo, ToolCallRecord, ToolsChange, ToolsQueries } from '../../tools/model';

/**
 * Tools (RFC §18; README, "Tools view"): providers, calls and their frames. Part of CoordinatorApi
 * (coordinatorApi.ts).
 */
export interface ToolsApi {
  /** Every tool provider (built in and agents), with its tools and whether it takes calls now. */
  toolProviders(): Promise<ProviderInfo[]>;
  /** The newest calls, newest first: at most `limit` (100). */
  toolCalls(limit?: number): Promise<ToolCallRecord[]>;
  /** A call's record and the frames kept for it (none after a restart); undefined when the call is no longer kept. */
  toolCallDetails(callId: string): Promise<ToolCallDetails | undefined>;
  /**
   * Cancels a call as its caller would (RFC §18.6): CANCELLED (the caller gets a terminal frame), ALREADY_COMPLETED or
   * NOT_FOUND, as an answer; logged as done by `by`.
   */
  cancelToolCall(callId: string, by: string): Promise<ToolCancelResult>;
  /** A provider registered, changed availability or left, or a call started, progressed or ended. Refresh throttled. */
  readonly onDidChangeTools: Event<ToolsChange>;
}

/** One frame kept for a call's details: its number, whether final, its content type, its content as text (cut at 4 KiB). */
export type ToolCallFrameText = ReturnType<ToolsQueries['callFrames']>[number];

export interface ToolCallDetails {
  readonly record: ToolCallRecord;
  readonly frames: readonly ToolCallFrameText[];
}

export interface ToolCancelResult {
  readonly errorCode: 'CANCELLED' | 'NOT_FOUND' | 'ALREADY_COMPLETED';
  readonly message: string;
}
