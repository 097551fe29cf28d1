import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Transition, Transitions } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { checkDecider, participantOrOperator, speakerName } from './access';
import { checkContentType, checkText, fail, LIMITS } from './checks';
import { step } from './delivery';
import type { Ends } from './ends';
import type { HitlGate } from './hitl';
import type { DecisionInput } from './inputs';
import type { NegotiationRecord, NegotiationRepository } from './model';
import type { NegotiationReads } from './queries';
import { consensusRound } from './state';

const DECIDED_BY = ['consensus', 'hitl', 'policy'] as const;

export interface DecideDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly reads: Pick<NegotiationReads, 'live' | 'repeatedEnd'>;
  readonly ends: Pick<Ends, 'finish'>;
  readonly gate: Pick<HitlGate, 'cancelPending'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/** The decided_by a Decide means: '' = consensus for a participant, hitl for the operator. */
function decidedByOf(asked: string, participant: string | undefined): string {
  return asked === '' ? (participant === undefined ? 'hitl' : 'consensus') : asked;
}

/**
 * Decide: the operator ends a live debate (a paused one too) with any result; a participant only by consensus, on a
 * round's contract the others accepted. A pending HITL invocation is withdrawn. A retry after it ended is answered.
 */
export class Decisions {
  constructor(private readonly deps: DecideDeps) {}

  decide(input: DecisionInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    const repeat = this.deps.reads.repeatedEnd(
      input.negotiationId,
      speaker,
      (r, who) =>
        r.decision !== null &&
        r.decision.decidedBy === decidedByOf(input.decidedBy, who) &&
        r.decision.contentType === input.contentType &&
        r.decision.result.equals(input.result) &&
        r.decision.stopReason === 'decided',
    );
    if (repeat) return repeat;
    // A participant may not end a debate that waits on a person; the operator may.
    const rec = this.deps.reads.live(input.negotiationId, speaker.kind !== 'agent');
    const participant = participantOrOperator(rec, speaker, 'decide');
    checkText('decided_by', input.decidedBy, LIMITS.decided_by);
    const decidedBy = decidedByOf(input.decidedBy, participant);
    if (!(DECIDED_BY as readonly string[]).includes(decidedBy)) {
      throw fail(
        'invalid',
        'VALIDATION_ERROR',
        `decided_by must be one of ${DECIDED_BY.join(', ')}, not '${decidedBy.slice(0, 40)}'`,
      );
    }
    if (input.result.byteLength > LIMITS.payload_bytes)
      throw fail(
        'invalid',
        'OVERSIZE_PAYLOAD',
        `result is larger than ${LIMITS.payload_bytes} bytes (${input.result.byteLength})`,
      );
    if (input.result.byteLength > 0 || input.contentType !== '') checkContentType('content_type', input.contentType);
    let round = 0;
    if (participant !== undefined) {
      checkDecider(participant, decidedBy);
      round = consensusRound(
        rec,
        this.deps.store.negotiation.rounds(rec.id),
        participant,
        input.result,
        input.contentType,
      );
    }
    const now = this.deps.clock.now();
    const pendingId = rec.pending?.invocationId;
    const by = participant ?? speakerName(speaker);
    return this.deps.transitions.run((tx) => {
      this.deps.ends.finish(
        rec,
        {
          decidedBy,
          contentType: input.contentType,
          result: Buffer.from(input.result),
          round,
          finalScore: rec.bestScore ?? 0,
          rationale: `Decide by ${by}`,
          stopReason: 'decided',
          policyVersion: rec.effective.policyVersion,
          fallback: null,
          at: now,
        },
        by,
        step(ctx, tx, false),
      );
      // After the event went out (a refusal before that leaves the invocation as it was).
      this.deps.gate.cancelPending(pendingId, speakerName(speaker), 'decided by Decide', ctx);
      this.deps.settle(rec, tx);
      return rec;
    }, rec.id);
  }
}
