import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Transition, Transitions } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { mustSpeakAs } from './access';
import { checkContentType, fail, LIMITS } from './checks';
import { step, type Delivery } from './delivery';
import { deltaOf, sameContract, type Drafts } from './drafts';
import type { Ends } from './ends';
import type { ProposalInput } from './inputs';
import type { Journal } from './journal';
import type { NegotiationRecord, NegotiationRepository, RoundRecord } from './model';
import type { NegotiationReads } from './queries';
import { tokensOf } from './scoring';
import { checkRound, newRound, stopAfterRound, superseded, takeRound } from './state';

export interface ProposeDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly reads: Pick<NegotiationReads, 'known' | 'live'>;
  readonly drafts: Pick<Drafts, 'check'>;
  readonly journal: Journal;
  readonly delivery: Pick<Delivery, 'fanout'>;
  readonly ends: Pick<Ends, 'stop'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/**
 * Propose / Counter: a participant as itself adds round N (contract_vN) to a live debate: in order, within max_rounds
 * and the token budgets, an invalid draft using no round; its DeltaSummary, oscillation, the contract and diff
 * artifacts, and the stop rules it may break (oscillation, total tokens).
 */
export class Rounds {
  constructor(private readonly deps: ProposeDeps) {}

  round(kind: 'propose' | 'counter', input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    const { negotiation } = this.deps.store;
    // A retry of the call that made the latest round (same author, kind and bytes) is answered with that round, whatever
    // the state (the retried call itself may have ended or paused the debate).
    const known = this.deps.reads.known(input.negotiationId);
    if (known) {
      mustSpeakAs(known, input.fromAgent, speaker);
      const last = negotiation.latestRound(known.id);
      if (
        last &&
        last.kind === kind &&
        last.from === input.fromAgent &&
        last.contentType === input.contentType &&
        last.payload.equals(input.payload)
      )
        return last;
    }
    const rec = this.deps.reads.live(input.negotiationId, false);
    mustSpeakAs(rec, input.fromAgent, speaker);
    checkContentType('content_type', input.contentType);
    if (input.payload.byteLength > LIMITS.payload_bytes) {
      throw fail(
        'invalid',
        'OVERSIZE_PAYLOAD',
        `payload is larger than ${LIMITS.payload_bytes} bytes (${input.payload.byteLength})`,
      );
    }
    const rounds = negotiation.rounds(rec.id);
    const latest = rounds.at(-1);
    const tokens = tokensOf(input.payload);
    checkRound(rec, kind, rounds.length, tokens, input.payload.byteLength);
    const json = this.deps.drafts.check(rec, input);
    const n = rounds.length + 1;
    const delta = deltaOf(latest, input.payload, json);
    const twoBack = rounds.length >= 2 ? rounds[rounds.length - 2] : undefined;
    const oscillation = twoBack !== undefined && sameContract(twoBack, input.contentType, input.payload, json);
    const round = newRound(
      rec,
      n,
      kind,
      input.fromAgent,
      input.contentType,
      input.payload,
      tokens,
      delta.summary,
      oscillation,
      this.deps.clock.now(),
    );
    const policy = rec.effective.policy;
    return this.deps.transitions.run((tx) => {
      const s = step(ctx, tx, true);
      takeRound(rec, round);
      // A round still waiting on the engine is superseded: its engine answer would no longer count.
      if (latest?.llm === 'pending') negotiation.putRound(superseded(latest, n));
      negotiation.putRound(round);
      this.deps.journal.record(
        rec,
        'negotiation.round',
        {
          superseded_pending: latest?.llm === 'pending' ? latest.n : undefined,
          round: n,
          kind,
          from: round.from,
          content_type: round.contentType,
          bytes: round.payload.byteLength,
          tokens,
          tokens_used: rec.tokensUsed,
          magnitude: delta.summary.magnitude,
          changed_paths: delta.summary.pathCount,
          oscillation,
          oscillations: rec.oscillations,
          converged: latest !== undefined && delta.summary.magnitude <= policy.diffTolerance,
        },
        ctx,
      );
      this.deps.delivery.fanout(rec, { kind, round: n }, s, round);
      this.deps.journal.artifact(rec, 'contract', `v${n}`, round.contentType, round.payload, ctx);
      if (latest)
        this.deps.journal.artifact(
          rec,
          'diff',
          `v${n - 1}_to_v${n}`,
          'application/json',
          Buffer.from(JSON.stringify(delta.artifact)),
          ctx,
        );
      const stop = stopAfterRound(rec);
      if (stop) this.deps.ends.stop(rec, stop, s);
      negotiation.put(rec);
      this.deps.settle(rec, tx);
      return round;
    }, rec.id);
  }
}
