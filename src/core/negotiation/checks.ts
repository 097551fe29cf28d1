import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { NegotiationError, type NegotiationErrorKind } from '../policy/model';
import { baseContentType } from '../router/model';

/** The negotiation fields' limits (FIELD_LIMITS.negotiation). */
export const LIMITS = FIELD_LIMITS.negotiation;

/** A refusal of the negotiation area: NegotiationError with its kind and SW4RM code. */
export const fail = (kind: NegotiationErrorKind, code: string, message: string): NegotiationError =>
  new NegotiationError(kind, code, message);

/** The kind of a refusal carrying the router's code (every copy of an event refused). */
export function routerKind(code: string): NegotiationErrorKind {
  switch (code) {
    case 'BUFFER_FULL':
    case 'OVERLOADED':
      return 'exhausted';
    case 'OVERSIZE_PAYLOAD':
    case 'VALIDATION_ERROR':
      return 'invalid';
    case 'UNSUPPORTED_MESSAGE_TYPE':
    case 'PERMISSION_DENIED':
      return 'precondition';
    default:
      return 'unavailable';
  }
}

/** An identifier field: present and well-formed. */
export function checkId(field: string, value: string, max: number): void {
  if (value.trim() === '') throw fail('invalid', 'VALIDATION_ERROR', `${field} is required`);
  const refusal = identifierRefusal(field, value, max);
  if (refusal) throw fail('invalid', 'VALIDATION_ERROR', refusal);
}

export function checkText(field: string, value: string, max: number): void {
  if (value.length > max)
    throw fail('invalid', 'VALIDATION_ERROR', `${field} is longer than ${max} characters (${value.length})`);
}

export function checkContentType(field: string, contentType: string): void {
  checkText(field, contentType, LIMITS.content_type);
  if (contentType === '' || baseContentType(contentType) === undefined || /[\u0000-\u001f\u007f]/.test(contentType)) {
    throw fail(
      'invalid',
      'VALIDATION_ERROR',
      `${field} '${contentType.slice(0, 80)}' is not a MIME type (e.g. application/json)`,
    );
  }
}
