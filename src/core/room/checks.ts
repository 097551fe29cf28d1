import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { NegotiationError } from '../policy/model';

/** The room's refusals (NegotiationError, as the policy and negotiation areas answer) and the checks of a request's fields. */

export const LIMITS = FIELD_LIMITS.room;

export function invalid(message: string): NegotiationError {
  return new NegotiationError('invalid', 'VALIDATION_ERROR', message);
}

export function notFound(message: string): NegotiationError {
  return new NegotiationError('not_found', 'NOT_FOUND', message);
}

export function precondition(message: string): NegotiationError {
  return new NegotiationError('precondition', 'FAILED_PRECONDITION', message);
}

export function denied(message: string): NegotiationError {
  return new NegotiationError('permission', 'PERMISSION_DENIED', message);
}

/** `value` when it is a valid identifier of at most `max` characters; INVALID_ARGUMENT naming `field` otherwise. */
export function identifier(field: string, value: string, max: number): string {
  const refusal = identifierRefusal(field, value, max);
  if (refusal !== undefined) throw invalid(refusal);
  return value;
}

/** A vote's list of texts (strengths, weaknesses, recommendations) within the room's limits, copied. */
export function textList(field: string, list: readonly string[]): string[] {
  if (list.length > LIMITS.vote_list_entries)
    throw invalid(`${field} holds ${list.length} entries; at most ${LIMITS.vote_list_entries}`);
  list.forEach((entry, i) => {
    if (entry.length > LIMITS.vote_list_entry)
      throw invalid(`${field}[${i}] is longer than ${LIMITS.vote_list_entry} characters`);
    if (entry.includes('\u0000')) throw invalid(`${field}[${i}] contains NUL`);
  });
  return [...list];
}
