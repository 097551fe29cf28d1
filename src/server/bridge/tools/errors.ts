import { ActivityEntryInvalidError } from '../../../core/activity/activityBuffer';
import { HitlStateError } from '../../../core/hitl/hitlService';
import { SwarmError, type ErrorKind } from '../../../core/kernel/errors';
import { RETRYABLE_CODES } from '../../../core/router/lifecycle';
import { SchedulerError } from '../../../core/scheduler/scheduler';
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

/**
 * What each kind of refusal means as an MCP error's SW4RM code, for an error whose own code is an area's (`worktree_not_bound`,
 * `too_large`): that code then stays in the message.
 */
const MCP_CODE: Readonly<Record<ErrorKind, string>> = {
  invalid: 'VALIDATION_ERROR',
  not_found: 'NOT_FOUND',
  permission: 'PERMISSION_DENIED',
  precondition: 'FAILED_PRECONDITION',
  exhausted: 'BUFFER_FULL',
  unimplemented: 'UNSUPPORTED_MESSAGE_TYPE',
  internal: 'INTERNAL_ERROR',
  deadline: 'TOOL_TIMEOUT',
  unavailable: 'AGENT_UNAVAILABLE',
  cancelled: 'CANCELLED',
  exists: 'ALREADY_EXISTS',
};

/**
 * A core refusal as the bridge's MCP tool error (the one mapping from SwarmError): its SW4RM code and message, retryable when
 * the code says so; an area's own lower-case code (`worktree_not_bound`) is answered by its kind's code with
 * `<own code>: <message>` as the message.
 */
export function mcpErrorOf(err: SwarmError): BridgeToolError {
  if (/^[A-Z][A-Z_]+$/.test(err.errorCode)) return refusal(err.errorCode, err.message);
  return refusal(MCP_CODE[err.errorKind], `${err.errorCode}: ${err.message}`);
}

/**
 * The refusals the core's areas throw, as the bridge answers them (mcpErrorOf: BridgeToolError with the SW4RM code the
 * area gives); anything else is rethrown as it is (the MCP server answers it INTERNAL_ERROR and logs it).
 */
export function asBridgeError(err: unknown): unknown {
  if (err instanceof BridgeToolError) return err;
  // The bridge's own cases. An unknown invocation is NOT_FOUND here (gRPC answers it FAILED_PRECONDITION VALIDATION_ERROR).
  if (err instanceof HitlStateError)
    return refusal(err.reason === 'not_found' ? 'NOT_FOUND' : 'FAILED_PRECONDITION', err.message);
  // A SchedulerError that names no code: the bridge's defaults (NOT_FOUND, FAILED_PRECONDITION) are not gRPC's (NO_ROUTE, VALIDATION_ERROR).
  if (err instanceof SchedulerError) {
    return refusal(
      err.sw4rmCode ??
        { not_found: 'NOT_FOUND', refused: 'FAILED_PRECONDITION', invalid: 'VALIDATION_ERROR' }[err.code],
      err.message,
    );
  }
  // Its message starts with its code already: the MCP error's message is the rest.
  if (err instanceof ActivityEntryInvalidError)
    return refusal('VALIDATION_ERROR', err.message.replace(/^VALIDATION_ERROR: /, ''));
  if (err instanceof SwarmError) return mcpErrorOf(err);
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
