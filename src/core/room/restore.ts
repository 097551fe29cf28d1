import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { HitlInvocations } from '../hitl/model';
import type { Guard } from '../kernel/guard';
import type { Transitions } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import type { Decisions } from './decide';
import type { Escalations } from './escalations';
import { ACTOR } from './journal';
import type { RoomRepository } from './model';
import { allVoted } from './state';
import type { VoteTimeouts } from './timeouts';

/** What restoring uses. */
export interface RestoreDeps {
  readonly room: Pick<RoomRepository, 'listUnfinished' | 'votes'>;
  readonly hitl: Pick<HitlInvocations, 'get'>;
  readonly clock: Pick<Clock, 'now'>;
  readonly log: Pick<EventRecorder, 'record'>;
  readonly transitions: Transitions;
  readonly guard: Guard;
  readonly decisions: Pick<Decisions, 'decide' | 'applyHitl'>;
  readonly timeouts: Pick<VoteTimeouts, 'rearm' | 'timedOut'>;
  readonly escalations: Pick<Escalations, 'watch' | 'settled'>;
}

/**
 * At start: each unfinished revision taken up where it was. Voting: decided now when every critic voted or its
 * deadline passed while the coordinator was stopped, else its vote timer re-armed. Escalated: its invocation watched,
 * or its answer (given while stopped) applied, or (the invocation is gone) decided as a cancelled one.
 */
export function restoreRoom(deps: RestoreDeps, ctx: CallContext): void {
  const unfinished = deps.room.listUnfinished();
  let voting = 0;
  let escalated = 0;
  for (const proposal of unfinished) {
    deps.guard.run(proposal.roomId, () => {
      if (proposal.state === 'voting') {
        voting++;
        const votes = deps.room.votes(proposal.artifactId, proposal.revision);
        if (allVoted(proposal, votes)) {
          deps.transitions.run(
            (tx) => deps.decisions.decide(tx, proposal, votes, [], { correlationId: proposal.roomId }),
            proposal.roomId,
          );
        } else if (proposal.voteDeadlineAt > 0 && proposal.voteDeadlineAt <= deps.clock.now()) {
          // The deadline passed while the coordinator was stopped: decided now, not at the clock's next tick.
          deps.timeouts.timedOut(proposal);
        } else {
          deps.timeouts.rearm(proposal);
        }
      } else if (proposal.state === 'escalated') {
        escalated++;
        const invocation = proposal.invocationId ? deps.hitl.get(proposal.invocationId) : undefined;
        if (invocation && invocation.state === 'pending') deps.escalations.watch(invocation.id);
        else if (invocation) deps.escalations.settled(invocation);
        else {
          // The invocation is gone (retention): decided as a fallback, never as a person's approval.
          deps.transitions.run(
            (tx) =>
              deps.decisions.applyHitl(tx, proposal, {
                id: proposal.invocationId ?? '',
                state: 'cancelled',
                decision: null,
              }),
            proposal.roomId,
          );
        }
      }
    });
  }
  if (unfinished.length > 0) {
    deps.log.record({
      correlationId: ctx.correlationId,
      actor: ACTOR,
      eventType: 'room.restored',
      details: { voting, escalated },
    });
  }
}
