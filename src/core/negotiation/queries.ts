import type { EffectivePolicy, Speaker } from '../policy/model';
import { participantOrOperator } from './access';
import { checkId, fail, LIMITS } from './checks';
import type { NegotiationDetail, NegotiationRecord, NegotiationRepository, NegotiationSummary } from './model';
import { checkLive } from './state';

/** The reads: the editor's (list, detail), the calls' (the debate a call is about: known, live; a retried end). */
export class NegotiationReads {
  constructor(private readonly deps: { readonly store: { readonly negotiation: NegotiationRepository } }) {}

  get(negotiationId: string): NegotiationRecord | undefined {
    return this.deps.store.negotiation.get(negotiationId);
  }

  effectivePolicy(negotiationId: string): EffectivePolicy | undefined {
    return this.get(negotiationId)?.effective;
  }

  list(limit = 200): NegotiationSummary[] {
    return this.deps.store.negotiation.list(limit).map((r) => ({
      id: r.id,
      topic: r.topic,
      participants: r.participants,
      intensity: r.intensity,
      state: r.state,
      rounds: r.rounds,
      bestScore: r.bestScore,
      stopReason: r.stopReason,
      pendingInvocationId: r.pending?.invocationId ?? null,
      openedAt: r.openedAt,
      updatedAt: r.updatedAt,
    }));
  }

  detail(id: string): NegotiationDetail | undefined {
    const record = this.get(id);
    return record ? { record, rounds: this.deps.store.negotiation.rounds(id) } : undefined;
  }

  /** The negotiation, if the id is well-formed and known (any state). */
  known(id: string): NegotiationRecord | undefined {
    checkId('negotiation_id', id, LIMITS.negotiation_id);
    return this.get(id);
  }

  /** The negotiation, live: NOT_FOUND, ended (NEGOTIATION_CLOSED), paused (unless `pausedOk`). */
  live(id: string, pausedOk: boolean): NegotiationRecord {
    checkId('negotiation_id', id, LIMITS.negotiation_id);
    const rec = this.get(id);
    if (!rec) throw fail('not_found', 'NOT_FOUND', `no negotiation '${id}'; Open it first`);
    checkLive(rec, pausedOk);
    return rec;
  }

  /**
   * A Decide or Abort sent again after it ended the negotiation (a retry after a lost answer): the ended record when
   * the same caller ended it the same way, else undefined (and the call goes on to be refused NEGOTIATION_CLOSED).
   */
  repeatedEnd(
    id: string,
    speaker: Speaker,
    same: (rec: NegotiationRecord, participant: string | undefined) => boolean,
  ): NegotiationRecord | undefined {
    const rec = this.get(id);
    if (!rec || (rec.state !== 'decided' && rec.state !== 'aborted')) return undefined;
    let participant: string | undefined;
    try {
      participant = participantOrOperator(rec, speaker, 'end');
    } catch {
      return undefined;
    }
    return same(rec, participant) ? rec : undefined;
  }
}
