import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { EventRecorder } from '../log/model';
import { ACTOR, type HandoffChanges } from './changes';
import { SWITCH_HANDOFF_FACT, type HandoffDeps } from './deps';
import type { HandoffRepository } from './model';
import type { HandoffNotices } from './notices';
import { switchDecided, type HandoffMemory } from './state';

export interface CarryDeps extends Pick<HandoffDeps, 'worktrees' | 'invocation' | 'cancelInvocation'> {
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly handoffs: Pick<HandoffRepository, 'get' | 'put'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly notices: HandoffNotices;
}

/** A carried worktree's switch after the acceptance: followed when decided, withdrawn when the handoff no longer waits for it. */
export class WorktreeCarry {
  constructor(private readonly deps: CarryDeps) {}

  /**
   * The binding of `agentId` changed: an ACCEPTED handoff it accepted whose carried worktree's switch was pending
   * follows the decision — `switched` (BOUND_NON_HOME in that worktree) or `switch_refused` (denied, cancelled, timed
   * out: back home) — in one transaction with its event, and the origin is told (`handoff_status` event `worktree`).
   */
  followSwitch(agentId: string): void {
    const { worktrees, changes, notices } = this.deps;
    for (const record of [...this.deps.memory.records()]) {
      const carry = record.worktree;
      if (record.state !== 'ACCEPTED' || record.acceptedBy !== agentId || !carry || carry.outcome !== 'switch_pending')
        continue;
      const b = worktrees.status(agentId);
      if (b.state === 'SWITCH_PENDING' && b.switch?.invocationId === carry.invocationId) continue;
      const switched = b.state === 'BOUND_NON_HOME' && b.repoId === carry.repoId && b.worktreeId === carry.worktreeId;
      const decided = this.deps.invocation(carry.invocationId);
      const ctx: CallContext = { correlationId: record.correlationId };
      changes.change(
        record,
        (draft) => {
          const detail = switched
            ? `'${agentId}' works in it (the switch was granted${b.nonHomeUntil !== null ? ` until ${isoUtc(b.nonHomeUntil)}` : ''})`
            : `the switch into it was not granted (HITL WORKTREE_OVERRIDE ${carry.invocationId} ${decided?.state ?? 'gone'}); '${agentId}' is ${b.state}${b.worktreeId ? ` in '${b.worktreeId}'` : ''}`;
          const w = switchDecided(draft, switched, detail, this.deps.clock.now());
          this.deps.handoffs.put(draft);
          const worktree = {
            repo_id: w.repoId,
            worktree_id: w.worktreeId,
            outcome: w.outcome,
            detail: w.detail,
            invocation_id: w.invocationId,
          };
          const notice = notices.toParty(draft, draft.fromAgent, 'worktree', { worktree }, ctx);
          changes.event(
            draft,
            ACTOR,
            switched ? 'handoff.worktree_switched' : 'handoff.worktree_switch_refused',
            {
              accepted_by: agentId,
              worktree,
              binding_state: b.state,
              invocation_state: decided?.state,
              requester_notice: notice,
            },
            switched ? 'INFO' : 'WARN',
          );
        },
        'worktree_change',
      );
    }
  }

  /** Withdraws a carried worktree's pending switch the handoff no longer waits for (HITL cancel; the binding goes home). */
  withdrawSwitch(invocationId: string, requestId: string, why: string, ctx: CallContext): void {
    try {
      if (this.deps.invocation(invocationId)?.state !== 'pending') return;
      this.deps.cancelInvocation(
        invocationId,
        ACTOR,
        `handoff ${requestId} no longer waits for this switch: ${why}`,
        ctx,
      );
    } catch (err) {
      this.deps.log.internalError(ACTOR, ctx.correlationId, err, {
        request_id: requestId,
        invocation_id: invocationId,
        during: 'withdraw switch',
      });
    }
  }

  /**
   * At start: a switch a handoff asked for (its invocation names the handoff) that the handoff does not wait for (any
   * more: cancelled, rerouted, its acceptor gone — the process died before the withdrawal) is withdrawn; one decided while
   * nobody listened is followed. Bounded by the bindings (one per agent). Answers how many were withdrawn.
   */
  reconcileSwitches(): number {
    let withdrawn = 0;
    for (const b of this.deps.worktrees.list()) {
      if (b.state !== 'SWITCH_PENDING' || !b.switch) continue;
      const invocation = this.deps.invocation(b.switch.invocationId);
      const requestId = invocation?.facts[SWITCH_HANDOFF_FACT];
      if (invocation?.state !== 'pending' || typeof requestId !== 'string') continue;
      const r = this.deps.memory.get(requestId) ?? this.deps.handoffs.get(requestId);
      const waits =
        r !== undefined &&
        (r.state === 'ACCEPTED' || r.state === 'COMPLETED') &&
        r.acceptedBy === b.agentId &&
        r.worktree?.outcome === 'switch_pending' &&
        r.worktree.invocationId === b.switch.invocationId;
      if (waits) continue;
      withdrawn++;
      this.withdrawSwitch(b.switch.invocationId, requestId, `found at start: it is ${r?.state ?? 'gone'}`, {
        correlationId: r?.correlationId ?? requestId,
      });
    }
    for (const r of [...this.deps.memory.records()])
      if (r.state === 'ACCEPTED' && r.worktree?.outcome === 'switch_pending')
        this.deps.guard.run('restore', () => this.followSwitch(r.acceptedBy));
    return withdrawn;
  }
}
