import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { IdSource } from '../ids';
import type { CommitEmitter, Transitions } from '../kernel/transitions';
import { NegotiationError, type PolicyReader, type Speaker } from '../policy/model';
import type { AgentDirectory } from '../registry/model';
import { type CoordinatorOutbox, modalityAccepts } from '../router/model';
import { mayActAs, speakerName } from './access';
import { LIMITS, denied, identifier, invalid, notFound, precondition } from './checks';
import { ACTOR, type RoomJournal } from './journal';
import { ARTIFACT_TYPES, type ArtifactType, type RoomChange, type RoomRepository } from './model';
import { REVIEW_REQUEST_CONTENT_TYPE, reviewRequest } from './notices';
import { newRevision, repeatsRevision, revisionRefusal } from './state';
import type { VoteTimeouts } from './timeouts';

export interface RoomProposalInput {
  /** '' = ARTIFACT_TYPE_UNSPECIFIED (refused). */
  readonly artifactType: ArtifactType | '';
  /** '' = the coordinator assigns one. */
  readonly artifactId: string;
  readonly producerId: string;
  readonly artifact: Buffer;
  readonly contentType: string;
  readonly requestedCritics: readonly string[];
  /** '' = the coordinator assigns one. */
  readonly roomId: string;
  /** ms since epoch, null when absent. */
  readonly createdAt: number | null;
}

/** What submitting uses. */
export interface SubmitDeps {
  readonly room: Pick<RoomRepository, 'latest' | 'decision' | 'putProposal'>;
  readonly agents: Pick<AgentDirectory, 'get'>;
  readonly outbox: Pick<CoordinatorOutbox, 'sendToAgent'>;
  readonly policies: Pick<PolicyReader, 'current'>;
  readonly clock: Pick<Clock, 'now'>;
  readonly ids: Pick<IdSource, 'uuid'>;
  readonly journal: RoomJournal;
  readonly transitions: Transitions;
  readonly timeouts: Pick<VoteTimeouts, 'arm'>;
  readonly changed: CommitEmitter<RoomChange>;
}

/**
 * SubmitProposal: a producer's artifact (or its next revision) checked, stored voting and sent to each requested
 * critic by a NEGOTIATION envelope in the same transaction (refused whole when no critic could be notified); a retry
 * of the latest submission answers that revision.
 */
export class Submissions {
  constructor(private readonly deps: SubmitDeps) {}

  submitProposal(
    input: RoomProposalInput,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly artifactId: string; readonly roomId: string; readonly revision: number } {
    if (input.artifactType === '' || !ARTIFACT_TYPES.includes(input.artifactType)) {
      throw invalid(`artifact_type must be one of ${ARTIFACT_TYPES.join(', ')} (ARTIFACT_TYPE_UNSPECIFIED is refused)`);
    }
    const artifactType = input.artifactType;
    const producerId = identifier('producer_id', input.producerId.trim(), LIMITS.agent_id);
    if (producerId === '') throw invalid('producer_id is required');
    if (!mayActAs(speaker, producerId))
      throw denied(`${speakerName(speaker)} may not submit as producer '${producerId}'`);
    if (this.deps.agents.get(producerId) === undefined)
      throw notFound(`producer_id '${producerId}' is not a registered agent`);
    if (input.artifactId !== '') identifier('artifact_id', input.artifactId, LIMITS.artifact_id);
    if (input.roomId !== '') identifier('negotiation_room_id', input.roomId, LIMITS.negotiation_room_id);
    const contentType =
      identifier('artifact_content_type', input.contentType.trim(), LIMITS.artifact_content_type) ||
      'application/octet-stream';
    if (input.artifact.byteLength === 0) throw invalid('artifact is empty');
    if (input.artifact.byteLength > LIMITS.artifact_bytes)
      throw invalid(`artifact is ${input.artifact.byteLength} bytes; at most ${LIMITS.artifact_bytes}`);
    const critics = this.checkCritics(input.requestedCritics, producerId);

    const latest = input.artifactId === '' ? undefined : this.deps.room.latest(input.artifactId);
    if (latest) {
      if (input.roomId !== '' && input.roomId !== latest.roomId) {
        throw precondition(`artifact '${latest.artifactId}' is in room '${latest.roomId}', not '${input.roomId}'`);
      }
      if (latest.producerId !== producerId)
        throw denied(`artifact '${latest.artifactId}' was submitted by '${latest.producerId}', not '${producerId}'`);
      // A retry of the latest submission (its answer was lost) answers that revision, in every state: no new revision.
      if (repeatsRevision(latest, { artifactType, contentType, artifact: input.artifact, requestedCritics: critics })) {
        return { artifactId: latest.artifactId, roomId: latest.roomId, revision: latest.revision };
      }
      // The decision is read only when the revision is decided and not closed (what the refusal needs).
      const decision =
        latest.closed || latest.state !== 'decided'
          ? undefined
          : this.deps.room.decision(latest.artifactId, latest.revision);
      const refusal = revisionRefusal(latest, decision, artifactType);
      if (refusal) throw refusal.kind === 'invalid' ? invalid(refusal.message) : precondition(refusal.message);
    }

    const policy = this.deps.policies.current();
    const now = this.deps.clock.now();
    const artifactId = latest?.artifactId ?? (input.artifactId || this.deps.ids.uuid());
    const roomId = latest?.roomId ?? (input.roomId || this.deps.ids.uuid());
    const proposal = newRevision(
      {
        roomId,
        artifactId,
        artifactType,
        producerId,
        contentType,
        artifact: input.artifact,
        requestedCritics: critics,
        createdAt: input.createdAt,
      },
      latest,
      { version: policy.version, voteTimeoutMs: policy.room.voteTimeoutMs },
      now,
    );
    const revision = proposal.revision;
    const roomCtx: CallContext = { ...ctx, correlationId: roomId };
    this.deps.transitions.run((tx) => {
      this.deps.room.putProposal(proposal);
      const notified: Array<{ critic_id: string; message_id: string }> = [];
      const refused: Array<{ critic_id: string; code: string; reason: string }> = [];
      for (const critic of critics) {
        const sent = this.deps.outbox.sendToAgent(
          {
            to: critic,
            messageType: 'NEGOTIATION',
            contentType: REVIEW_REQUEST_CONTENT_TYPE,
            correlationId: roomId,
            payload: Buffer.from(JSON.stringify(reviewRequest(proposal, critic)), 'utf8'),
          },
          roomCtx,
        );
        if (sent.accepted) notified.push({ critic_id: critic, message_id: sent.messageId });
        else refused.push({ critic_id: critic, code: sent.code, reason: sent.reason.slice(0, 500) });
      }
      // Nothing was admitted: the transaction rolls back whole (the router holds none of these messages).
      if (notified.length === 0) {
        const first = refused[0];
        throw new NegotiationError(
          first.code === 'BUFFER_FULL'
            ? 'exhausted'
            : first.code === 'OVERSIZE_PAYLOAD' || first.code === 'VALIDATION_ERROR'
              ? 'invalid'
              : 'unavailable',
          first.code,
          `no requested critic could be notified: ${refused.map((r) => `${r.critic_id}: ${r.reason}`).join('; ')}`,
        );
      }
      this.deps.journal.record(roomId, producerId, 'room.proposal_submitted', {
        room_id: roomId,
        artifact_id: artifactId,
        revision,
        artifact_type: proposal.artifactType,
        producer_id: producerId,
        content_type: contentType,
        bytes: proposal.artifact.byteLength,
        requested_critics: critics,
        notified,
        vote_deadline: proposal.voteDeadlineAt > 0 ? isoUtc(proposal.voteDeadlineAt) : null,
        policy_version: proposal.policyVersion,
        submitted_by: speakerName(speaker),
        principal: ctx.principal,
      });
      // A critic whose notification was refused (its inbox is full…) can still vote; the vote timeout escalates otherwise.
      for (const r of refused)
        this.deps.journal.record(
          roomId,
          ACTOR,
          'room.critic_not_notified',
          { room_id: roomId, artifact_id: artifactId, revision, ...r },
          'WARN',
        );
      this.deps.timeouts.arm(tx, proposal);
      tx.notify<RoomChange>(this.deps.changed, { roomId, artifactId, state: 'voting' });
    }, roomId);
    return { artifactId, roomId, revision };
  }

  /** The requested critics: 1 to the limit, registered, distinct, not the producer, accepting the review request's content type. */
  private checkCritics(list: readonly string[], producerId: string): string[] {
    if (list.length === 0) throw invalid('requested_critics must name at least one critic');
    if (list.length > LIMITS.requested_critics)
      throw invalid(`requested_critics names ${list.length} critics; at most ${LIMITS.requested_critics}`);
    const seen = new Set<string>();
    list.forEach((raw, i) => {
      const critic = identifier(`requested_critics[${i}]`, raw.trim(), LIMITS.agent_id);
      if (critic === '') throw invalid(`requested_critics[${i}] is empty`);
      if (seen.has(critic)) throw invalid(`requested_critics names '${critic}' twice`);
      if (critic === producerId) throw invalid(`the producer '${producerId}' may not critique its own artifact`);
      const agent = this.deps.agents.get(critic);
      if (!agent) throw notFound(`requested critic '${critic}' is not a registered agent`);
      if (!modalityAccepts(agent.descriptor.modalitiesSupported, REVIEW_REQUEST_CONTENT_TYPE)) {
        throw invalid(
          `requested critic '${critic}' does not accept ${REVIEW_REQUEST_CONTENT_TYPE} (its modalities_supported), so it cannot be sent the artifact`,
        );
      }
      seen.add(critic);
    });
    return [...seen];
  }
}
