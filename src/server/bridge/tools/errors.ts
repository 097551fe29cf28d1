import { ActivityBufferFullError } from '../../../core/activity/model';
import { ActivityEntryInvalidError } from '../../../core/activity/activityBuffer';
import { HitlStateError } from '../../../core/hitl/hitlService';
import { HitlRequestError } from '../../../core/hitl/request';
import { NegotiationError } from '../../../core/policy/speaker';
import { RETRYABLE_CODES } from '../../../core/router/lifecycle';
import { SchedulerError } from '../../../core/scheduler/scheduler';
import { ToolCallError, type ToolErrorKind } from '../../../core/tools/model';
import { BridgeToolError } from '../model';

/**
 * SW4RM codes after which the same call may succeed later: the router's RETRYABLE_CODES (the one list), plus an
 * operation still under way and an agent that is shutting down (it may come back).
 */
const RETRYABLE: ReadonlySet<string> = new Set([...RETRYABLE_CODES, 'ALREADY_IN_PROGRESS', 'AGENT_SHUTDOWN']);

/** A refusal with `code` (and retryable when the code says so). */
export function refusal(code: string, message: string): BridgeToolError {
  return new BridgeToolError(code, message, RETRYABLE.has(code));
}

/** What a tools-area error kind means as a SW4RM code; the area's own code (`worktree_not_bound`, …) stays in the message. */
const TOOL_KIND_CODES: Readonly<Record<ToolErrorKind, string>> = {
  invalid_argument: 'VALIDATION_ERROR',
  not_found: 'NOT_FOUND',
  permission_denied: 'PERMISSION_DENIED',
  failed_precondition: 'FAILED_PRECONDITION',
  resource_exhausted: 'BUFFER_FULL',
  unimplemented: 'UNSUPPORTED_MESSAGE_TYPE',
  internal: 'INTERNAL_ERROR',
  deadline_exceeded: 'TOOL_TIMEOUT',
  unavailable: 'AGENT_UNAVAILABLE',
  cancelled: 'CANCELLED',
  already_exists: 'ALREADY_EXISTS',
};

/**
 * The refusals the core's areas throw, as the bridge answers them (BridgeToolError with the SW4RM code the area gives);
 * anything else is rethrown as it is (the MCP server answers it INTERNAL_ERROR and logs it).
 */
export function asBridgeError(err: unknown): unknown {
  if (err instanceof BridgeToolError) return err;
  if (err instanceof NegotiationError) return refusal(err.code, err.message);
  if (err instanceof HitlRequestError) return refusal(err.code, err.message);
  if (err instanceof HitlStateError) return refusal(err.reason === 'not_found' ? 'NOT_FOUND' : 'FAILED_PRECONDITION', err.message);
  if (err instanceof SchedulerError) {
    return refusal(err.sw4rmCode ?? { not_found: 'NOT_FOUND', refused: 'FAILED_PRECONDITION', invalid: 'VALIDATION_ERROR' }[err.code], err.message);
  }
  if (err instanceof ToolCallError) {
    const code = /^[A-Z][A-Z_]+$/.test(err.code) ? err.code : TOOL_KIND_CODES[err.kind];
    return refusal(code, code === err.code ? err.message : err.details);
  }
  if (err instanceof ActivityBufferFullError) return refusal('BUFFER_FULL', err.message);
  if (err instanceof ActivityEntryInvalidError) return refusal('VALIDATION_ERROR', err.message.replace(/^VALIDATION_ERROR: /, ''));
  return err;
}

/** Runs `work`, answering a core refusal as a BridgeToolError. */
export async function refusing<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw asBridgeError(err);
  }
}

/** `"<CODE>: why"` (how the router and the activity buffer word a refusal) as a BridgeToolError. */
export function fromReason(reason: string, fallbackCode = 'VALIDATION_ERROR'): BridgeToolError {
  const match = /^([A-Z][A-Z_]+): ([\s\S]*)$/.exec(reason);
  return match ? refusal(match[1], match[2]) : refusal(fallbackCode, reason);
}
