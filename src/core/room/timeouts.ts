import { isoUtc, type Clock } from '../clock';
import type { Guard } from '../kernel/guard';
import type { KeyedTimers } from '../kernel/timers';
import type { Transition, Transitions } from '../kernel/transitions';
import type { Decisions } from './decide';
import { ACTOR, type RoomJournal } from './journal';
import type { ProposalRecord, RoomRepository } from './model';
import { missingCritics, revisionKey } from './state';

/** What the vote timeouts use. */
export interface TimeoutDeps {
  readonly room: Pick<RoomRepository, 'revision' | 'votes'>;
  readonly clock: Pick<Clock, 'now'>;
  readonly journal: RoomJournal;
  readonly transitions: Transitions;
  readonly guard: Guard;
  readonly timers: KeyedTimers<string>;
  readonly decisions: Pick<Decisions, 'decide'>;
}

/**
 * A revision's vote timeout (RoomThresholds.voteTimeoutMs, 0: none): a timer by revision, armed when the revision is
 * submitted (or restored) and disarmed when it is decided; when it fires, the revision is decided on the votes there
 * are, the missing critics named (vote_timeout escalates).
 */
export class VoteTimeouts {
  constructor(private readonly deps: TimeoutDeps) {}

  /** Inside the transition that submitted the revision: its timer, armed once that commits. */
  arm(tx: Transition, proposal: ProposalRecord): void {
    if (proposal.voteDeadlineAt <= 0) return;
    tx.arm(this.deps.timers, revisionKey(proposal.artifactId, proposal.revision), this.delay(proposal), () =>
      this.timedOut(proposal),
    );
  }

  /** At start (restore), outside any transition: the revision's timer for what is left of its deadline. */
  rearm(proposal: ProposalRecord): void {
    if (proposal.voteDeadlineAt <= 0 || this.deps.guard.isStopped) return;
    this.deps.timers.arm(revisionKey(proposal.artifactId, proposal.revision), this.delay(proposal), () =>
      this.timedOut(proposal),
    );
  }

  /** The vote deadline passed: decided on the votes there are (the missing critics named: vote_timeout escalates). */
  timedOut(proposal: ProposalRecord): void {
    this.deps.guard.run(proposal.roomId, () => {
      const current = this.deps.room.revision(proposal.artifactId, proposal.revision);
      if (!current || current.state !== 'voting') return;
      const votes = this.deps.room.votes(current.artifactId, current.revision);
      const missing = missingCritics(current, votes);
      this.deps.transitions.run((tx) => {
        this.deps.journal.record(
          current.roomId,
          ACTOR,
          'room.vote_timeout',
          {
            room_id: current.roomId,
            artifact_id: current.artifactId,
            revision: current.revision,
            missing,
            deadline: isoUtc(current.voteDeadlineAt),
          },
          'WARN',
        );
        this.deps.decisions.decide(tx, current, votes, missing, { correlationId: current.roomId });
      }, current.roomId);
    });
  }

  private delay(proposal: ProposalRecord): number {
    return Math.max(0, proposal.voteDeadlineAt - this.deps.clock.now());
  }
}
