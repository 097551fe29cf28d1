import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import type { Transition, Transitions } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import type { CoordinatorOutbox } from '../router/model';
import { fail, routerKind } from './checks';
import { ACTOR } from './journal';
import type {
  NegotiationEventKind,
  NegotiationRecord,
  NegotiationRepository,
  RoundRecord,
  UndeliveredEvent,
} from './model';
import { eventPayload } from './notices';
import { eventSent, nextEvent, waitsBehind } from './state';

/** A refused event copy is retried this often, and given up (logged ERROR) after this long. */
export const UNDELIVERED_RETRY_MS = 1_000;
export const UNDELIVERED_GIVE_UP_MS = 10 * 60_000;

/**
 * What one call may still undo, beside its transition: an event copy accepted by the router cannot be taken back.
 * Open, Propose, Counter, Evaluate are `refusable`: the call is refused when no copy of its events could be sent because
 * the router refused every one (NO_ROUTE aside). Decide, Abort, timers and HITL answers are never refused for delivery.
 */
export interface Sent {
  readonly refusable: boolean;
  /** Copies the router accepted so far in this call. */
  accepted: number;
}

export const sent = (refusable: boolean): Sent => ({ refusable, accepted: 0 });

/** One transition of a debate as its parts see it: the call's context, the kernel's transition and the delivery bookkeeping. */
export interface Step {
  readonly ctx: CallContext;
  readonly tx: Transition;
  readonly call: Sent;
}

/** A step of a call (`refusable`) or of the coordinator's own work, in transition `tx`. */
export const step = (ctx: CallContext, tx: Transition, refusable: boolean): Step => ({
  ctx,
  tx,
  call: sent(refusable),
});

export interface DeliveryDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly outbox: CoordinatorOutbox;
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly guard: Guard;
}

/**
 * The §17.1 events of a debate to its participants: one NEGOTIATION envelope per participant inside the transition of
 * the change, copies the router refused kept as references on the record and redelivered in order.
 */
export class Delivery implements Disposable {
  /** Negotiations with event copies waiting for redelivery (NegotiationRecord.undelivered). */
  private readonly redeliver = new Set<string>();
  /** Redelivery attempts per deferred copy (negotiation, recipient, seq), kept in memory between record writes. */
  private readonly attempts = new Map<string, number>();
  private readonly retry: KeyedTimers<'retry'>;

  constructor(private readonly deps: DeliveryDeps) {
    this.retry = new KeyedTimers(deps.clock, deps.guard, () => 'negotiation-redelivery');
  }

  /**
   * One §17.1 event to every participant, as a NEGOTIATION envelope from `coordinator` (correlation_id = negotiation_id),
   * inside the caller's transition. Every copy goes to the recipient's STANDARD lane (the coordinator's), FIFO per
   * recipient, so events arrive in the order sent. A refusable call (Sent.refusable) whose copies were ALL refused by the
   * router (none accepted, at least one refused with a code other than NO_ROUTE) is refused with the router's code and
   * nothing of it is kept. Otherwise a refused copy, a copy to a participant that is no longer registered (NO_ROUTE) and
   * a copy behind an earlier waiting one are kept in `undelivered` and retried in order (given up after
   * UNDELIVERED_GIVE_UP_MS), each logged WARN `negotiation.event_deferred`.
   */
  fanout(
    rec: NegotiationRecord,
    event: { kind: NegotiationEventKind; round?: number; from?: string },
    { ctx, tx, call }: Step,
    round?: RoundRecord,
  ): void {
    const ref = nextEvent(rec, event, this.deps.clock.now());
    const payload = eventPayload(rec, ref, () => (round ? [round] : this.deps.store.negotiation.rounds(rec.id)));
    if (!payload) throw new Error(`the ${event.kind} event of '${rec.id}' has nothing to report`);
    const kind = event.kind;
    const deferred: Array<{ to: string; code: string; reason: string; attempts: number }> = [];
    let refusal: { to: string; code: string; reason: string } | undefined;
    let acceptedNow = 0;
    for (const to of rec.participants) {
      if (waitsBehind(rec, to)) {
        deferred.push({ to, code: 'ORDER', reason: 'an earlier event to this participant waits', attempts: 0 });
        continue;
      }
      const result = this.send(rec, to, payload, ctx);
      if (result.accepted) {
        acceptedNow++;
        continue;
      }
      if (result.code !== 'NO_ROUTE') refusal ??= { to, code: result.code, reason: result.reason };
      deferred.push({ to, code: result.code, reason: result.reason, attempts: 1 });
    }
    if (call.refusable && call.accepted === 0 && acceptedNow === 0 && refusal) {
      throw fail(
        routerKind(refusal.code),
        refusal.code,
        `the ${kind} event could not be sent to any participant (${refusal.to}: ${refusal.reason})`,
      );
    }
    call.accepted += acceptedNow;
    // References, not the bytes: they are rebuilt from the record and its rounds when retried.
    eventSent(rec, ref, deferred);
    for (const d of deferred) {
      this.deps.log.record({
        correlationId: rec.id,
        actor: ACTOR,
        eventType: 'negotiation.event_deferred',
        level: 'WARN',
        details: { negotiation_id: rec.id, to: d.to, seq: ref.seq, kind, code: d.code, reason: d.reason.slice(0, 500) },
      });
    }
    if (deferred.length > 0) {
      tx.install(() => this.redeliver.add(rec.id));
      tx.after(() => this.scheduleRetry());
    }
  }

  /** At start: the negotiations with copies still waiting (running and ended alike). */
  restore(records: readonly NegotiationRecord[]): void {
    for (const rec of records) if (rec.undelivered.length > 0) this.redeliver.add(rec.id);
    if (this.redeliver.size > 0) this.scheduleRetry();
  }

  dispose(): void {
    this.retry.dispose();
  }

  private send(
    rec: NegotiationRecord,
    to: string,
    payload: Buffer,
    ctx: CallContext,
  ): ReturnType<CoordinatorOutbox['sendToAgent']> {
    return this.deps.outbox.sendToAgent(
      {
        to,
        messageType: 'NEGOTIATION',
        contentType: 'application/json',
        payload,
        correlationId: rec.id,
        ackTimeout: false,
      },
      ctx,
    );
  }

  private scheduleRetry(): void {
    if (this.retry.has('retry') || this.deps.guard.isStopped) return;
    this.retry.arm('retry', UNDELIVERED_RETRY_MS, () => this.retryUndelivered());
  }

  private retryUndelivered(): void {
    for (const id of [...this.redeliver]) {
      const rec = this.deps.store.negotiation.get(id);
      if (!rec || rec.undelivered.length === 0) {
        this.redeliver.delete(id);
        continue;
      }
      try {
        this.deps.transitions.run((tx) => this.redeliverOf(rec, tx), rec.id);
      } catch (err) {
        this.deps.log.internalError(ACTOR, rec.id, err);
      }
    }
    if (this.redeliver.size > 0) this.scheduleRetry();
  }

  /** One negotiation's waiting copies, in order: sent, given up, or kept (and the later ones to that participant behind it). */
  private redeliverOf(rec: NegotiationRecord, tx: Transition): void {
    const ctx: CallContext = { correlationId: rec.id };
    const now = this.deps.clock.now();
    const blocked = new Set<string>();
    const kept: UndeliveredEvent[] = [];
    const payloads = new Map<number, Buffer | undefined>();
    /** Attempt counts to keep (a number) or forget (undefined) once committed. */
    const counts = new Map<string, number | undefined>();
    let rounds: RoundRecord[] | undefined;
    let changed = false;
    for (const u of rec.undelivered) {
      if (blocked.has(u.to)) {
        kept.push(u);
        continue;
      }
      const key = `${rec.id}\u0000${u.to}\u0000${u.seq}`;
      if (!payloads.has(u.seq)) {
        const legacy = (u as { payload?: string }).payload;
        if (legacy !== undefined) payloads.set(u.seq, Buffer.from(legacy, 'base64'));
        else {
          if ((u.kind === 'propose' || u.kind === 'counter' || u.kind === 'evaluate') && !rounds)
            rounds = this.deps.store.negotiation.rounds(rec.id);
          const known = rounds;
          payloads.set(
            u.seq,
            eventPayload(rec, u, () => known ?? this.deps.store.negotiation.rounds(rec.id)),
          );
        }
      }
      const payload = payloads.get(u.seq);
      const attempts = (this.attempts.get(key) ?? u.attempts) + 1;
      const result = payload
        ? this.send(rec, u.to, payload, ctx)
        : { accepted: false as const, code: 'INTERNAL', reason: 'the event could not be rebuilt from the record' };
      if (result.accepted) {
        this.deps.log.record({
          correlationId: rec.id,
          actor: ACTOR,
          eventType: 'negotiation.event_redelivered',
          details: { negotiation_id: rec.id, to: u.to, seq: u.seq, kind: u.kind, attempts },
        });
        counts.set(key, undefined);
        changed = true;
        continue;
      }
      if (!payload || now - u.firstRefusedAt >= UNDELIVERED_GIVE_UP_MS) {
        this.deps.log.record({
          correlationId: rec.id,
          actor: ACTOR,
          eventType: 'negotiation.event_undeliverable',
          level: 'ERROR',
          details: {
            negotiation_id: rec.id,
            to: u.to,
            seq: u.seq,
            kind: u.kind,
            code: result.code,
            reason: result.reason.slice(0, 500),
            attempts,
          },
        });
        counts.set(key, undefined);
        changed = true;
        continue;
      }
      // Attempts are counted in memory: the record is written only when an entry goes or its code changes.
      counts.set(key, attempts);
      if (u.code !== result.code) {
        u.code = result.code;
        changed = true;
      }
      blocked.add(u.to);
      kept.push(u);
    }
    if (changed) {
      rec.undelivered = kept;
      this.deps.store.negotiation.put(rec);
    }
    const done = rec.undelivered.length === 0;
    tx.install(() => {
      for (const [key, n] of counts) {
        if (n === undefined) this.attempts.delete(key);
        else this.attempts.set(key, n);
      }
      if (done) this.redeliver.delete(rec.id);
    });
  }
}
