import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { HandoffChanges } from './changes';
import type { HandoffRepository } from './model';
import type { HandoffNotices } from './notices';
import { MAX_ATTEMPTS } from './options';
import { LIMITS } from './refusals';
import {
  ended,
  rerouted,
  rerouteLimits,
  toOperator,
  type Ended,
  type OpenRecord,
  type Trigger,
  type Via,
} from './state';
import type { Targets } from './targets';

export interface MoveOnDeps {
  readonly clock: Clock;
  readonly handoffs: Pick<HandoffRepository, 'put'>;
  readonly notices: HandoffNotices;
  readonly changes: Pick<HandoffChanges, 'event'>;
  readonly targets: Targets;
  readonly answerBy: (record: OpenRecord) => number | null;
  /** HandoffOptions.reroute and routeToOperator. */
  readonly reroute: boolean;
  readonly routeToOperator: boolean;
}

/** Moving on, inside a transaction: the next target, the operator, or the end — and how a handoff ends. */
export class MoveOn {
  constructor(private readonly deps: MoveOnDeps) {}

  /**
   * After the current target rejected, its window passed or it left, or its accepting agent left: a redirect that can
   * take it, else the best capable agent not tried (rerouting on, the delegation policy allowing it, attempts left), else
   * the operator (option; once), else the end (REJECTED); a target whose window passed or that left, without a
   * successor, changes nothing (answers false).
   */
  next(
    record: OpenRecord,
    trigger: Trigger,
    actor: string,
    ctx: CallContext,
    details: Record<string, unknown>,
    redirectTo = '',
  ): boolean {
    const { clock, handoffs, notices, changes, targets } = this.deps;
    const now = clock.now();
    const policy = record.delegationPolicy;
    const tried = new Set([record.fromAgent, ...record.attempts.map((a) => a.agentId)]);
    const redirects = record.attempts.filter((a) => a.via === 'redirect').length;
    const { mayReroute, waitLeft, notes } = rerouteLimits(record, now, MAX_ATTEMPTS, isoUtc);
    let next: { agentId: string; via: Via } | undefined;
    if (mayReroute && redirectTo !== '') {
      const why =
        policy && policy.maxRedirects > 0 && redirects >= policy.maxRedirects
          ? `delegation_policy.max_redirects ${policy.maxRedirects} reached`
          : targets.redirectRefusal(record, redirectTo, tried);
      if (why === undefined) next = { agentId: redirectTo, via: 'redirect' };
      else notes.push(`redirect to '${redirectTo}' not followed: ${why}`);
    }
    if (!next && mayReroute && this.deps.reroute) {
      const best = targets.candidates(record.capabilitiesRequired, tried)[0];
      if (best) next = { agentId: best.agentId, via: 'capability' };
      else notes.push(targets.noRoute(record.capabilitiesRequired, record.fromAgent, tried));
    } else if (!next && mayReroute) notes.push('rerouting is off (sw4rm.handoffs.reroute)');
    const previous = record.attempts[record.attempts.length - 1];
    if (next) {
      rerouted(record, next, now);
      handoffs.put(record);
      const targetNotice = notices.toTarget(record, ctx);
      const requesterNotice = notices.toParty(
        record,
        record.fromAgent,
        'rerouted',
        { previous_agent: previous?.agentId ?? '', previous_outcome: trigger },
        ctx,
      );
      changes.event(
        record,
        actor,
        'handoff.rerouted',
        {
          ...details,
          trigger,
          from_target: previous?.agentId ?? '',
          to_agent: next.agentId,
          via: next.via,
          attempt: record.attempts.length,
          expires_at: isoUtc(record.expiresAt!),
          answer_by: isoUtc(this.deps.answerBy(record)!),
          notes: notes.length ? notes : undefined,
          notification: targetNotice,
          requester_notice: requesterNotice,
        },
        targetNotice.sent ? 'INFO' : 'WARN',
      );
      return true;
    }
    // A target whose answer window passed keeps the offer while the wait lasts (it may still answer).
    if (trigger === 'expired') return false;
    if (this.deps.routeToOperator && !record.awaitingOperator && waitLeft) {
      toOperator(record, now);
      handoffs.put(record);
      const notice = notices.toParty(
        record,
        record.fromAgent,
        'awaiting_operator',
        { previous_agent: previous?.agentId ?? '', previous_outcome: trigger },
        ctx,
      );
      changes.event(
        record,
        actor,
        'handoff.awaiting_operator',
        {
          ...details,
          trigger,
          from_target: previous?.agentId ?? '',
          expires_at: isoUtc(record.expiresAt!),
          notes,
          requester_notice: notice,
        },
        'WARN',
      );
      return true;
    }
    // Nobody else can take it: it stays offered to the agent that left (found by GetPendingHandoffs if it comes back) until it expires.
    if (trigger === 'left') return false;
    const nobody = notes.length ? `; not offered to anyone else: ${notes.join('; ')}` : '';
    const why =
      trigger === 'acceptor_left'
        ? `the accepting agent '${previous?.agentId ?? ''}' ${previous?.reason ?? 'left'}${nobody}`
        : `rejected by '${previous?.agentId ?? ''}'${nobody}`;
    if (trigger === 'acceptor_left') {
      record.rejectionReason = why.slice(0, LIMITS.rejection_reason);
      record.rejectionCode = 'AGENT_UNAVAILABLE';
    }
    this.end(record, 'REJECTED', actor, why, ctx, {
      ...details,
      trigger,
      from_target: previous?.agentId ?? '',
      notes: notes.length ? notes : undefined,
    });
    return true;
  }

  /** The handoff ends (REJECTED, EXPIRED, CANCELLED) with its event and the requester's notice (and `extraNotices`' parties'). */
  end(
    record: OpenRecord,
    state: Exclude<Ended, 'COMPLETED'>,
    actor: string,
    why: string,
    ctx: CallContext,
    details: Record<string, unknown>,
    extraNotices: readonly string[] = [],
    notice: Record<string, unknown> = {},
  ): void {
    ended(record, state, why, this.deps.clock.now());
    this.deps.handoffs.put(record);
    const event = state === 'REJECTED' ? 'rejected' : state === 'EXPIRED' ? 'expired' : 'cancelled';
    const notices: Record<string, unknown> = {};
    for (const party of new Set([record.fromAgent, ...extraNotices])) {
      if (party !== '' && !party.startsWith('operator:'))
        notices[party] = this.deps.notices.toParty(record, party, event, { reason: why, ...notice }, ctx);
    }
    this.deps.changes.event(
      record,
      actor,
      `handoff.${event}`,
      { ...details, reason: why, attempts: record.attempts.length, notices },
      state === 'CANCELLED' ? 'INFO' : 'WARN',
    );
  }
}
