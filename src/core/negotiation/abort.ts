import type { CallContext } from '../context';
import type { Transition, Transitions } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { participantOrOperator, speakerName } from './access';
import { checkText, LIMITS } from './checks';
import { step } from './delivery';
import type { Ends } from './ends';
import type { HitlGate } from './hitl';
import type { NegotiationRecord } from './model';
import type { NegotiationReads } from './queries';

export interface AbortDeps {
  readonly transitions: Transitions;
  readonly reads: Pick<NegotiationReads, 'live' | 'repeatedEnd'>;
  readonly ends: Pick<Ends, 'abort'>;
  readonly gate: Pick<HitlGate, 'cancelPending'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/** Abort: a participant or the operator ends a live or paused debate (`aborted`); a pending HITL invocation is withdrawn. */
export class Aborts {
  constructor(private readonly deps: AbortDeps) {}

  abort(negotiationId: string, reason: string, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    checkText('reason', reason, LIMITS.reason);
    const repeat = this.deps.reads.repeatedEnd(
      negotiationId,
      speaker,
      (r, who) =>
        r.abort !== null &&
        r.abort.errorCode === 'aborted' &&
        r.abort.reason === reason &&
        r.abort.by === (who ?? speakerName(speaker)),
    );
    if (repeat) return repeat;
    const rec = this.deps.reads.live(negotiationId, true);
    const participant = participantOrOperator(rec, speaker, 'abort');
    const pendingId = rec.pending?.invocationId;
    return this.deps.transitions.run((tx) => {
      this.deps.ends.abort(
        rec,
        reason,
        'aborted',
        participant ?? speakerName(speaker),
        'aborted',
        step(ctx, tx, false),
      );
      this.deps.gate.cancelPending(pendingId, speakerName(speaker), 'aborted', ctx);
      this.deps.settle(rec, tx);
      return rec;
    }, rec.id);
  }
}
