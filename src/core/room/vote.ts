import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { CommitEmitter, Transitions } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { mayActAs, speakerName } from './access';
import { LIMITS, denied, identifier, invalid, precondition, textList } from './checks';
import type { Decisions } from './decide';
import type { RoomJournal } from './journal';
import type { RoomChange, RoomRepository, VoteRecord } from './model';
import type { RoomReads } from './queries';
import { allVoted, newVote, sameVote, touched, type VoteContent } from './state';

/** SubmitVote: a vote as the critic sends it (the revision is the one current when it arrives). */
export type VoteInput = Omit<VoteRecord, 'revision' | 'replaced' | 'votedAt' | 'roomId'> & {
  /** '' = the artifact's room. */
  readonly roomId: string;
  readonly votedAt: number | null;
};

/** What voting uses. */
export interface VoteDeps {
  readonly room: Pick<RoomRepository, 'votes' | 'decision' | 'putVote' | 'putProposal'>;
  readonly reads: Pick<RoomReads, 'current'>;
  readonly clock: Pick<Clock, 'now'>;
  readonly journal: RoomJournal;
  readonly transitions: Transitions;
  readonly decisions: Pick<Decisions, 'decide'>;
  readonly changed: CommitEmitter<RoomChange>;
}

/**
 * SubmitVote: a requested critic's vote on the current revision, stored with its event (replacing the critic's
 * earlier vote); the last requested critic's vote decides the revision in the same transaction. A retry of the same
 * vote (or of the critic's vote on the previous revision) changes nothing.
 */
export class Votes {
  constructor(private readonly deps: VoteDeps) {}

  submitVote(
    input: VoteInput,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly artifactId: string; readonly criticId: string } {
    const artifactId = identifier('artifact_id', input.artifactId, LIMITS.artifact_id);
    if (artifactId === '') throw invalid('artifact_id is required');
    const criticId = identifier('critic_id', input.criticId.trim(), LIMITS.agent_id);
    if (criticId === '') throw invalid('critic_id is required');
    if (!mayActAs(speaker, criticId)) throw denied(`${speakerName(speaker)} may not vote as critic '${criticId}'`);
    if (input.roomId !== '') identifier('negotiation_room_id', input.roomId, LIMITS.negotiation_room_id);
    const proposal = this.deps.reads.current(artifactId, input.roomId);
    if (typeof input.score !== 'number' || !Number.isFinite(input.score) || input.score < 0 || input.score > 10) {
      throw invalid(`score must be a number from 0 to 10, not ${String(input.score)}`);
    }
    if (
      typeof input.confidence !== 'number' ||
      !Number.isFinite(input.confidence) ||
      input.confidence < 0 ||
      input.confidence > 1
    ) {
      throw invalid(`confidence must be a number from 0 to 1, not ${String(input.confidence)}`);
    }
    const content: VoteContent = {
      score: input.score,
      confidence: input.confidence,
      passed: input.passed === true,
      strengths: textList('strengths', input.strengths),
      weaknesses: textList('weaknesses', input.weaknesses),
      recommendations: textList('recommendations', input.recommendations),
    };
    const previous = this.deps.room.votes(artifactId, proposal.revision).find((v) => v.criticId === criticId);
    // A retry of the same vote (its answer was lost) changes nothing, whatever the revision's state.
    if (sameVote(previous, content)) return { artifactId, criticId };
    // A retry of the critic's vote on the previous revision (the producer resubmitted meanwhile) changes nothing either:
    // a vote counts for the revision current when it arrives, so it is not carried over to this one. A vote whose
    // voted_at is at or after this revision's submission was cast for it, however like the earlier one it is.
    if (
      previous === undefined &&
      proposal.revision > 1 &&
      (input.votedAt === null || input.votedAt < proposal.submittedAt) &&
      sameVote(
        this.deps.room.votes(artifactId, proposal.revision - 1).find((v) => v.criticId === criticId),
        content,
      )
    ) {
      return { artifactId, criticId };
    }
    if (!proposal.requestedCritics.includes(criticId)) {
      throw denied(
        `'${criticId}' is not a requested critic of revision ${proposal.revision} of artifact '${artifactId}' (requested: ${proposal.requestedCritics.join(', ')})`,
      );
    }
    if (input.votedAt !== null && input.votedAt < proposal.submittedAt) {
      throw precondition(
        `the vote was cast for an earlier revision: its voted_at ${isoUtc(input.votedAt)} is before revision ${proposal.revision} of artifact '${artifactId}' was submitted (${isoUtc(proposal.submittedAt)}); read the revision again and vote on it`,
      );
    }
    if (proposal.state !== 'voting') {
      const decision = this.deps.room.decision(artifactId, proposal.revision);
      throw precondition(
        `revision ${proposal.revision} of artifact '${artifactId}' is ${proposal.state === 'escalated' ? 'escalated to a human' : `decided (${decision?.outcome ?? 'final'})`}: votes are closed`,
      );
    }
    const now = this.deps.clock.now();
    const vote = newVote(proposal, criticId, content, input.votedAt, previous, now);
    this.deps.transitions.run((tx) => {
      this.deps.room.putVote(vote);
      const details = {
        room_id: proposal.roomId,
        artifact_id: artifactId,
        revision: proposal.revision,
        critic_id: criticId,
        score: vote.score,
        confidence: vote.confidence,
        passed: vote.passed,
        principal: ctx.principal,
      };
      if (previous) {
        this.deps.journal.record(proposal.roomId, criticId, 'room.vote_replaced', {
          ...details,
          replaced: vote.replaced,
          previous: {
            score: previous.score,
            confidence: previous.confidence,
            passed: previous.passed,
            voted_at: isoUtc(previous.votedAt),
          },
        });
      } else {
        this.deps.journal.record(proposal.roomId, criticId, 'room.vote', details);
      }
      const next = touched(proposal, now);
      const votes = this.deps.room.votes(artifactId, next.revision);
      if (allVoted(next, votes)) {
        this.deps.decisions.decide(tx, next, votes, [], { correlationId: next.roomId, principal: ctx.principal });
      } else {
        this.deps.room.putProposal(next);
        tx.notify<RoomChange>(this.deps.changed, { roomId: next.roomId, artifactId, state: next.state });
      }
    }, proposal.roomId);
    return { artifactId, criticId };
  }
}
