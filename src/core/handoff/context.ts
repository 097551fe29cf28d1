import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { FIELD_LIMITS } from '../fieldLimits';
import { parseBoundedJson } from '../json';
import { baseContentType } from '../router/model';
import { HANDOFF_CONTEXT_CONTENT_TYPE } from './model';

/**
 * The HandoffContext JSON Schema, verbatim from handoff-context.txt ("JSON Schema"): conversation_history (entries with
 * role and content), tool_state, metadata, all three required.
 */
export const HANDOFF_CONTEXT_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'HandoffContext',
  type: 'object',
  properties: {
    conversation_history: {
      type: 'array',
      description: 'Prior messages in the conversation',
      items: {
        type: 'object',
        properties: {
          role: { type: 'string', description: 'Message role (user, assistant, system, tool)' },
          content: { type: 'string', description: 'Message content' },
          timestamp: { type: 'string', format: 'date-time', description: 'ISO 8601 timestamp' },
          metadata: { type: 'object', description: 'Optional message metadata' },
        },
        required: ['role', 'content'],
      },
    },
    tool_state: {
      type: 'object',
      description: 'Current tool state including active calls and cached results',
      additionalProperties: true,
    },
    metadata: { type: 'object', description: 'Additional context metadata', additionalProperties: true },
  },
  required: ['conversation_history', 'tool_state', 'metadata'],
} as const;

/** RFC 3339 date-time (what ajv-formats' `date-time` accepts: a time zone is required, leap seconds at 23:59:60). */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;
const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

export function isDateTime(text: string): boolean {
  const m = DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (month < 1 || month > 12 || day < 1 || day > (month === 2 && !leap ? 28 : DAYS[month - 1])) return false;
  if (hour > 23 || minute > 59 || second > 60) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return second < 60 || (hour === 23 && minute === 59) || m[9] !== undefined;
}

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (!compiled) {
    const ajv = new Ajv({ allErrors: false, strict: true, addUsedSchema: false });
    ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
    compiled = ajv.compile(HANDOFF_CONTEXT_SCHEMA);
  }
  return compiled;
}

/** `context_snapshot/conversation_history/0: must have required property 'role'`: the failing JSON path, then why. */
function describe(error: ErrorObject): string {
  const extra =
    error.keyword === 'additionalProperties'
      ? ` ('${String((error.params as { additionalProperty?: unknown }).additionalProperty)}')`
      : '';
  return `context_snapshot${error.instancePath}: ${error.message ?? error.keyword}${extra}`;
}

/** How a context snapshot is read, by the content type it declares. */
export type ContextKind = 'handoff-context' | 'json' | 'opaque';

export function contextKindOf(contentType: string): ContextKind {
  const base = contentType === '' ? undefined : baseContentType(contentType);
  if (base === HANDOFF_CONTEXT_CONTENT_TYPE) return 'handoff-context';
  if (base === 'application/json') return 'json';
  return 'opaque';
}

/**
 * Why a context snapshot cannot be accepted (a VALIDATION_ERROR's text), or undefined. Every context: at most
 * FIELD_LIMITS.handoff.context_bytes. HANDOFF_CONTEXT_CONTENT_TYPE: bounded JSON (json.ts) valid against the
 * HandoffContext schema, the failing JSON path named; `application/json`: bounded valid JSON; anything else: opaque.
 */
export function contextRefusal(bytes: Uint8Array, contentType: string): string | undefined {
  const max = FIELD_LIMITS.handoff.context_bytes;
  if (bytes.byteLength > max)
    return `context_snapshot is ${bytes.byteLength} bytes; at most ${max} (send a larger context by reference)`;
  if (contentType !== '' && baseContentType(contentType) === undefined) {
    return `sw4rm-context-content-type '${contentType.slice(0, 80)}' is not a MIME type (e.g. ${HANDOFF_CONTEXT_CONTENT_TYPE})`;
  }
  const kind = contextKindOf(contentType);
  if (kind === 'opaque') return undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return 'context_snapshot is not valid UTF-8 (its content type says JSON)';
  }
  const parsed = parseBoundedJson(text, { what: 'context_snapshot', maxBytes: max });
  if (!parsed.ok) return parsed.reason;
  if (kind === 'json') return undefined;
  const validate = validator();
  if (validate(parsed.value)) return undefined;
  return describe(validate.errors![0]);
}
