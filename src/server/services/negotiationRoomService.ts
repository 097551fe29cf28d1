import type * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { ARTIFACT_TYPES, type ArtifactType, type RoomDecision, type VoteRecord } from '../../core/room/model';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';
import { speakerOf } from '../speaker';

interface TimestampMessage {
  seconds?: string | number;
  nanos?: number;
}

interface ProposalMessage {
  artifact_type?: string;
  artifact_id?: string;
  producer_id?: string;
  artifact?: Buffer;
  artifact_content_type?: string;
  requested_critics?: string[];
  negotiation_room_id?: string;
  created_at?: TimestampMessage | null;
}

interface VoteMessage {
  artifact_id?: string;
  critic_id?: string;
  score?: number;
  confidence?: number;
  passed?: boolean;
  strengths?: string[];
  weaknesses?: string[];
  recommendations?: string[];
  negotiation_room_id?: string;
  voted_at?: TimestampMessage | null;
}

interface LookupMessage {
  artifact_id?: string;
  negotiation_room_id?: string;
  timeout_seconds?: number;
}

/** A proto Timestamp as ms since the epoch; absent (or zero) is null. */
export function msOf(ts: TimestampMessage | null | undefined): number | null {
  if (!ts) return null;
  const ms = Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

export function timestampOf(ms: number): { seconds: string; nanos: number } {
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
}

function voteMessage(v: VoteRecord): Record<string, unknown> {
  return {
    artifact_id: v.artifactId,
    critic_id: v.criticId,
    score: v.score,
    confidence: v.confidence,
    passed: v.passed,
    strengths: v.strengths,
    weaknesses: v.weaknesses,
    recommendations: v.recommendations,
    negotiation_room_id: v.roomId,
    voted_at: timestampOf(v.votedAt),
  };
}

export function decisionMessage(d: RoomDecision): Record<string, unknown> {
  const a = d.aggregate;
  return {
    artifact_id: d.artifactId,
    outcome: d.outcome,
    votes: d.votes.map(voteMessage),
    aggregated_score: {
      mean: a.mean,
      min_score: a.minScore,
      max_score: a.maxScore,
      std_dev: a.stdDev,
      weighted_mean: a.weightedMean,
      vote_count: a.voteCount,
    },
    policy_version: d.policyVersion,
    reason: d.reason,
    negotiation_room_id: d.roomId,
    decided_at: timestampOf(d.decidedAt),
  };
}

/**
 * sw4rm.negotiation_room.NegotiationRoomService over the core's NegotiationRoom (RFC §17.5): SubmitProposal, SubmitVote,
 * GetVotes, GetDecision (never blocks; no decision while the critics vote), WaitForDecision (blocks until the current
 * revision's final decision, timeout_seconds default 300, at most 3600, then DEADLINE_EXCEEDED; ended when the call is
 * cancelled). Refusals: statusOf (the SW4RM code first in the details). Answers after the store is durable.
 * identity.ts checks producer_id and critic_id against the caller's credential before a handler runs.
 */
export class NegotiationRoomServiceAdapter {
  static readonly serviceName = 'sw4rm.negotiation_room.NegotiationRoomService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { room, ids, store, credentials } = this.coordinator;
    type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void;
    const unary =
      <Req, Res>(
        work: (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void,
      ): Unary<Req, Res> =>
      (call, callback) => {
        try {
          work(call, callback);
        } catch (err) {
          callback(statusOf(err));
        }
      };
    return {
      SubmitProposal: unary<
        { proposal?: ProposalMessage | null },
        { artifact_id: string; negotiation_room_id: string }
      >((call, callback) => {
        const p = call.request.proposal ?? {};
        const type = String(p.artifact_type ?? '');
        const result = room.submitProposal(
          {
            artifactType: (ARTIFACT_TYPES as readonly string[]).includes(type) ? (type as ArtifactType) : '',
            artifactId: p.artifact_id ?? '',
            producerId: p.producer_id ?? '',
            artifact: Buffer.from(p.artifact ?? Buffer.alloc(0)),
            contentType: p.artifact_content_type ?? '',
            requestedCritics: p.requested_critics ?? [],
            roomId: p.negotiation_room_id ?? '',
            createdAt: msOf(p.created_at),
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
        answerWhenDurable(store, callback, { artifact_id: result.artifactId, negotiation_room_id: result.roomId });
      }),
      SubmitVote: unary<{ vote?: VoteMessage | null }, { artifact_id: string; critic_id: string }>((call, callback) => {
        const v = call.request.vote ?? {};
        const result = room.submitVote(
          {
            artifactId: v.artifact_id ?? '',
            criticId: v.critic_id ?? '',
            score: Number(v.score ?? 0),
            confidence: Number(v.confidence ?? 0),
            passed: v.passed === true,
            strengths: v.strengths ?? [],
            weaknesses: v.weaknesses ?? [],
            recommendations: v.recommendations ?? [],
            roomId: v.negotiation_room_id ?? '',
            votedAt: msOf(v.voted_at),
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
        answerWhenDurable(store, callback, { artifact_id: result.artifactId, critic_id: result.criticId });
      }),
      GetVotes: unary<LookupMessage, { votes: unknown[]; vote_count: number }>((call, callback) => {
        const votes = room.getVotes(
          call.request.artifact_id ?? '',
          call.request.negotiation_room_id ?? '',
          speakerOf(call, credentials),
        );
        answerWhenDurable(store, callback, { votes: votes.map(voteMessage), vote_count: votes.length });
      }),
      GetDecision: unary<LookupMessage, { decision: unknown }>((call, callback) => {
        const decision = room.getDecision(
          call.request.artifact_id ?? '',
          call.request.negotiation_room_id ?? '',
          speakerOf(call, credentials),
        );
        answerWhenDurable(store, callback, { decision: decision ? decisionMessage(decision) : null });
      }),
      WaitForDecision: (
        call: grpc.ServerUnaryCall<LookupMessage, { decision: unknown }>,
        callback: grpc.sendUnaryData<{ decision: unknown }>,
      ) => {
        const aborter = new AbortController();
        call.on('cancelled', () => aborter.abort());
        const seconds = Number(call.request.timeout_seconds ?? 0);
        room
          .waitForDecision(
            call.request.artifact_id ?? '',
            call.request.negotiation_room_id ?? '',
            Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0,
            aborter.signal,
          )
          .then((decision) => answerWhenDurable(store, callback, { decision: decisionMessage(decision) }))
          .catch((err: unknown) => {
            if (!aborter.signal.aborted) callback(statusOf(err));
          });
      },
    };
  }
}
