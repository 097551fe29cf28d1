import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { NegotiationError, type NegotiationErrorKind } from '../policy/model';

/** How the handoff area refuses (a NegotiationError: kind and SW4RM code) and checks the fields a call names. */

export const LIMITS = FIELD_LIMITS.handoff;

export const fail = (kind: NegotiationErrorKind, code: string, message: string) =>
  new NegotiationError(kind, code, message);
export const invalid = (message: string) => fail('invalid', 'VALIDATION_ERROR', message);
export const denied = (message: string) => fail('permission', 'PERMISSION_DENIED', message);
export const precondition = (message: string) => fail('precondition', 'FAILED_PRECONDITION', message);
export const notFound = (requestId: string) => fail('not_found', 'NOT_FOUND', `no handoff '${requestId}'`);

/** An id field: required or not, within its limit, without leading or trailing spaces. */
export function identifier(field: string, value: string, max: number, required: boolean): string {
  if (required && value === '') throw invalid(`${field} is required`);
  const refusal = identifierRefusal(field, value, max);
  if (refusal !== undefined) throw invalid(refusal);
  if (value !== value.trim()) throw invalid(`${field} '${value.slice(0, 80)}' has leading or trailing spaces`);
  return value;
}

/** A text field: within its limit, no NUL. */
export function text(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters (${value.length})`);
  if (value.includes('\u0000')) throw invalid(`${field} contains NUL`);
  return value;
}

export function nonNegative(field: string, value: number): number {
  if (!Number.isFinite(value) || value < 0)
    throw invalid(`${field} must be a non-negative number, not ${String(value)}`);
  return value;
}
