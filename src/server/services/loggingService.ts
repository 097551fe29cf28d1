import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { FIELD_LIMITS } from '../../core/fieldLimits';
import { parseBoundedJson } from '../../core/json';
import { MAX_LOG_DETAILS_BYTES } from '../../core/limits';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';

interface TimestampMessage {
  seconds?: string | number;
  nanos?: number;
}
interface LogEventMessage {
  ts?: TimestampMessage | null;
  correlation_id?: string;
  agent_id?: string;
  event_type?: string;
  level?: string;
  details_json?: string;
}

const LEVELS = ['INFO', 'WARN', 'ERROR'] as const;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f\u2028\u2029]/;

/** sw4rm.logging.LoggingService: Ingest stores an agent's structured event beside the coordinator's own. */
export class LoggingServiceAdapter {
  static readonly serviceName = 'sw4rm.logging.LoggingService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    return {
      Ingest: (call: grpc.ServerUnaryCall<LogEventMessage, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const invalid = (details: string) =>
          callback({ code: grpc.status.INVALID_ARGUMENT, details: `VALIDATION_ERROR: ${details}` });
        const event = call.request;
        const eventType = (event.event_type ?? '').trim();
        if (eventType === '') return invalid('event_type must not be empty');
        for (const [field, value, max] of [
          ['event_type', eventType, FIELD_LIMITS.logging.event_type],
          ['agent_id', event.agent_id ?? '', FIELD_LIMITS.logging.agent_id],
          ['correlation_id', event.correlation_id ?? '', FIELD_LIMITS.logging.correlation_id],
        ] as const) {
          if (value.length > max) return invalid(`${field} is longer than ${max} characters`);
          // Stricter than identifierRefusal: line separators would break the one-line log format too.
          if (CONTROL_CHARACTERS.test(value)) return invalid(`${field} contains control characters`);
          if (value.includes('\uFFFD')) return invalid(`${field} is not valid UTF-8 (U+FFFD)`);
        }
        const level = (event.level ?? '').trim().toUpperCase() || 'INFO';
        if (!(LEVELS as readonly string[]).includes(level))
          return invalid(`level '${level.slice(0, 20)}' is not one of INFO, WARN, ERROR`);
        const detailsJson = event.details_json ?? '';
        if (Buffer.byteLength(detailsJson) > MAX_LOG_DETAILS_BYTES) {
          return invalid(`details_json is larger than ${MAX_LOG_DETAILS_BYTES} bytes`);
        }
        let details: unknown = {};
        if (detailsJson.trim() !== '') {
          // Size and depth (README "Limits") before JSON.parse; a deeper text is refused, never walked.
          const parsed = parseBoundedJson(detailsJson, { what: 'details_json', maxBytes: MAX_LOG_DETAILS_BYTES });
          if (!parsed.ok) return invalid(parsed.reason);
          details = parsed.value;
        }
        const agentTs = toIso(event.ts);
        if (agentTs === null) return invalid('ts is not a valid timestamp');
        const ctx = callContext(call, this.coordinator.ids);
        const correlationId = (event.correlation_id ?? '').trim() || ctx.correlationId;
        this.coordinator.log.record({
          source: 'agent',
          actor: (event.agent_id ?? '').trim() || 'unknown-agent',
          correlationId,
          eventType,
          level: level as (typeof LEVELS)[number],
          details: {
            ...(isPlainObject(details) ? details : { value: details }),
            agent_ts: agentTs,
          },
        });
        answerWhenDurable(this.coordinator.store, callback, { ok: true });
      },
    };
  }
}

/** The agent's timestamp as ISO-8601, undefined when absent, null when out of range. */
function toIso(ts: TimestampMessage | null | undefined): string | undefined | null {
  if (!ts) return undefined;
  const seconds = Number(ts.seconds ?? 0);
  const nanos = ts.nanos ?? 0;
  if (seconds === 0 && nanos === 0) return undefined;
  const ms = seconds * 1000 + Math.floor(nanos / 1e6);
  if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15 || nanos < 0 || nanos > 999_999_999) return null;
  return new Date(ms).toISOString();
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
