import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { ARTIFACT_KINDS, ARTIFACT_LIMITS } from '../../core/activity/activityBuffer';
import type { Artifact } from '../../core/activity/model';
import { FIELD_LIMITS, identifierRefusal } from '../../core/fieldLimits';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../../core/limits';
import { callContext } from '../callContext';
import { speakerOf } from '../speaker';
import { NegotiationError } from '../../core/policy/speaker';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';

interface ArtifactMessage {
  negotiation_id?: string;
  kind?: string;
  version?: string;
  content_type?: string;
  content?: Buffer | Uint8Array;
  created_at?: string;
}

/**
 * What one ListArtifacts answer may carry of artifact content: the gRPC message limit less room for the other fields;
 * one kind of one negotiation (at most ARTIFACT_LIMITS.bytesPerKind) always fits.
 */
const LIST_CONTENT_BUDGET = Math.max(ARTIFACT_LIMITS.bytesPerKind, TRANSPORT_MAX_MESSAGE_BYTES - 1024 * 1024);

/**
 * sw4rm.activity.ActivityService (activity.proto): AppendArtifact stores an artifact of a negotiation (checked by the
 * activity buffer: negotiation_id, kind, sizes; a refusal is `ok: false` with the reason), ListArtifacts lists them in
 * the order appended.
 */
export class ActivityServiceAdapter {
  static readonly serviceName = 'sw4rm.activity.ActivityService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { activity, store, credentials } = this.coordinator;
    return {
      AppendArtifact: (
        call: grpc.ServerUnaryCall<{ artifact?: ArtifactMessage | null }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        try {
          const given = call.request.artifact;
          if (!given) return callback(null, { ok: false, reason: 'VALIDATION_ERROR: artifact is required' });
          const artifact: Artifact = {
            negotiationId: given.negotiation_id ?? '',
            kind: given.kind ?? '',
            version: given.version ?? '',
            contentType: given.content_type ?? '',
            content: Buffer.from(given.content ?? new Uint8Array()),
            createdAt: (given.created_at ?? '').trim(),
          };
          const result = activity.appendArtifact(
            artifact,
            callContext(call, this.coordinator.ids),
            speakerOf(call, credentials),
          );
          if (!result.ok && result.reason.startsWith('PERMISSION_DENIED: '))
            return callback({ code: grpc.status.PERMISSION_DENIED, details: result.reason });
          if (!result.ok) return callback(null, { ok: false, reason: result.reason });
          answerWhenDurable(store, callback, { ok: true, reason: '' });
        } catch (err) {
          callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${(err as Error).message}` });
        }
      },
      ListArtifacts: (
        call: grpc.ServerUnaryCall<{ negotiation_id?: string; kind?: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const invalid = (details: string) =>
          callback({ code: grpc.status.INVALID_ARGUMENT, details: `VALIDATION_ERROR: ${details}` });
        const negotiationId = call.request.negotiation_id ?? '';
        const kind = call.request.kind ?? '';
        if (negotiationId === '') return invalid('negotiation_id is required');
        const refusal = identifierRefusal('negotiation_id', negotiationId, FIELD_LIMITS.activity.negotiation_id);
        if (refusal) return invalid(refusal);
        if (kind !== '' && !ARTIFACT_KINDS.includes(kind))
          return invalid(`kind must be empty or one of ${ARTIFACT_KINDS.join(', ')}`);
        try {
          const items = activity.listArtifacts(
            negotiationId,
            kind,
            speakerOf(call, credentials),
            callContext(call, this.coordinator.ids),
          );
          const bytes = items.reduce((sum, a) => sum + a.content.length, 0);
          if (bytes > LIST_CONTENT_BUDGET) {
            return callback({
              code: grpc.status.RESOURCE_EXHAUSTED,
              details: `BUFFER_FULL: the ${items.length} artifacts hold ${bytes} bytes, more than one answer may carry (${LIST_CONTENT_BUDGET}); list them one kind at a time (kind = contract, diff, decision, score, note: one kind always fits in an answer)`,
            });
          }
          callback(null, {
            items: items.map((a) => ({
              negotiation_id: a.negotiationId,
              kind: a.kind,
              version: a.version,
              content_type: a.contentType,
              content: a.content,
              created_at: a.createdAt,
            })),
          });
        } catch (err) {
          // Only a permission refusal is the caller's: any other error of the listing is answered INTERNAL (as it always was).
          if (err instanceof NegotiationError && err.kind === 'permission') return callback(statusOf(err));
          callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${(err as Error).message}` });
        }
      },
    };
  }
}
