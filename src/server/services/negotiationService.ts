import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { FIELD_LIMITS } from '../../core/fieldLimits';
import { DEBATE_INTENSITIES, type DebateIntensity } from '../../core/policy/model';
import { parseAgentPreferences } from '../../core/policy/preferences';
import { NegotiationError } from '../../core/policy/speaker';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';
import { speakerOf } from '../speaker';

/** Open's call metadata (README, "Debates"): a profile hint, per-agent preferences (JSON), a proposal JSON Schema. */
export const PROFILE_METADATA = 'sw4rm-negotiation-profile';
export const PREFERENCES_METADATA = 'sw4rm-negotiation-preferences';
export const SCHEMA_METADATA = 'sw4rm-proposal-schema';

const LIMITS = FIELD_LIMITS.negotiation;

interface DurationMessage {
  seconds?: string | number;
  nanos?: number;
}

const invalid = (message: string) => new NegotiationError('invalid', 'VALIDATION_ERROR', message);

function metadataText(metadata: grpc.Metadata, key: string, maxBytes: number): string {
  const value = metadata.get(key)[0];
  if (value === undefined) return '';
  const text = typeof value === 'string' ? value : Buffer.from(value).toString('utf8');
  if (Buffer.byteLength(text) > maxBytes) throw invalid(`metadata ${key} is larger than ${maxBytes} bytes`);
  return text;
}

/** google.protobuf.Duration → ms; absent or zero → 0 (the profile's). */
export function durationMs(duration: DurationMessage | null | undefined, field: string): number {
  if (!duration) return 0;
  const seconds = Number(duration.seconds ?? 0);
  const nanos = duration.nanos ?? 0;
  if (!Number.isFinite(seconds) || seconds < 0 || nanos < 0) throw invalid(`${field} must be a non-negative duration`);
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

function intensityOf(value: unknown): DebateIntensity | '' {
  if (value === undefined || value === null || value === '' || value === 'DEBATE_INTENSITY_UNSPECIFIED' || value === 0)
    return '';
  if (typeof value === 'string' && (DEBATE_INTENSITIES as readonly string[]).includes(value))
    return value as DebateIntensity;
  throw invalid(`intensity must be one of ${DEBATE_INTENSITIES.join(', ')}`);
}

/**
 * sw4rm.negotiation.NegotiationService (negotiation.proto; RFC §17, §17.1) over the core's Negotiations: Open (metadata
 * sw4rm-negotiation-profile, sw4rm-negotiation-preferences, sw4rm-proposal-schema), Propose, Counter, Evaluate, Decide,
 * Abort. Each answers Empty once durable; a refusal is the NegotiationError's status with `<CODE>: <why>` as details.
 */
export class NegotiationServiceAdapter {
  static readonly serviceName = 'sw4rm.negotiation.NegotiationService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { negotiations, store, ids, credentials } = this.coordinator;
    type Call = grpc.ServerUnaryCall<Record<string, unknown>, unknown>;
    const unary = (work: (call: Call) => void) => (call: Call, callback: grpc.sendUnaryData<unknown>) => {
      try {
        work(call);
        answerWhenDurable(store, callback, {});
      } catch (err) {
        callback(statusOf(err));
      }
    };
    /** unary, after `prepare` (the proposal schemas compiled off the event loop, Negotiations.compileSchemas). */
    // A request `prepare` cannot read (bad metadata) is refused by `work`, which reads it again.
    const prepared =
      (prepare: (call: Call) => Promise<void>, work: (call: Call) => void) =>
      (call: Call, callback: grpc.sendUnaryData<unknown>) => {
        const then = () => unary(work)(call, callback);
        Promise.resolve()
          .then(() => prepare(call))
          .then(then, then);
      };
    const str = (v: unknown) => (typeof v === 'string' ? v : '');
    const bytes = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v) : Buffer.alloc(0));
    const openInput = (call: Call) => {
      const r = call.request;
      return {
        negotiationId: str(r.negotiation_id),
        correlationId: str(r.correlation_id),
        topic: str(r.topic),
        participants: Array.isArray(r.participants) ? r.participants.map(str) : [],
        intensity: intensityOf(r.intensity),
        debateTimeoutMs: durationMs(r.debate_timeout as DurationMessage | null, 'debate_timeout'),
        profileHint: metadataText(call.metadata, PROFILE_METADATA, LIMITS.profile).trim(),
        preferences: parseAgentPreferences(metadataText(call.metadata, PREFERENCES_METADATA, LIMITS.preferences_bytes)),
        schema: metadataText(call.metadata, SCHEMA_METADATA, LIMITS.schema_bytes),
      };
    };
    return {
      Open: prepared(
        (call) => negotiations.compileSchemas('', openInput(call)),
        (call) => {
          negotiations.open(openInput(call), speakerOf(call, credentials), callContext(call, ids));
        },
      ),
      Propose: prepared(
        (call) => negotiations.compileSchemas(str(call.request.negotiation_id)),
        (call) => {
          const r = call.request;
          negotiations.propose(
            {
              negotiationId: str(r.negotiation_id),
              fromAgent: str(r.from_agent),
              contentType: str(r.content_type),
              payload: bytes(r.payload),
            },
            speakerOf(call, credentials),
            callContext(call, ids),
          );
        },
      ),
      Counter: prepared(
        (call) => negotiations.compileSchemas(str(call.request.negotiation_id)),
        (call) => {
          const r = call.request;
          negotiations.counter(
            {
              negotiationId: str(r.negotiation_id),
              fromAgent: str(r.from_agent),
              contentType: str(r.content_type),
              payload: bytes(r.payload),
            },
            speakerOf(call, credentials),
            callContext(call, ids),
          );
        },
      ),
      Evaluate: unary((call) => {
        const r = call.request;
        negotiations.evaluate(
          {
            negotiationId: str(r.negotiation_id),
            fromAgent: str(r.from_agent),
            confidenceScore: Number(r.confidence_score ?? 0),
            notes: str(r.notes),
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
      }),
      Decide: unary((call) => {
        const r = call.request;
        negotiations.decide(
          {
            negotiationId: str(r.negotiation_id),
            decidedBy: str(r.decided_by),
            contentType: str(r.content_type),
            result: bytes(r.result),
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
      }),
      Abort: unary((call) => {
        const r = call.request;
        negotiations.abort(str(r.negotiation_id), str(r.reason), speakerOf(call, credentials), callContext(call, ids));
      }),
    };
  }
}
