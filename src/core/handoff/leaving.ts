import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { AgentDirectory, RegistryChange } from '../registry/model';
import { ACTOR, type HandoffChanges } from './changes';
import type { HandoffRecord } from './model';
import type { MoveOn } from './moveOn';
import { backToPending, draftOf, targetLeft, waitsFor, type HandoffMemory, type OpenRecord } from './state';

export interface LeavingDeps {
  readonly clock: Clock;
  readonly agents: Pick<AgentDirectory, 'get'>;
  readonly guard: Guard;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly moveOn: MoveOn;
  /** carry.ts: a carried worktree's pending switch the handoff no longer waits for is withdrawn. */
  readonly withdrawSwitch: (invocationId: string, requestId: string, why: string, ctx: CallContext) => void;
}

/** Agents leaving: a target that left is replaced; an acceptor that left sends its handoffs back to PENDING. */
export class AgentsLeaving {
  constructor(private readonly deps: LeavingDeps) {}

  /** An agent deregistered or went FAILED: the handoffs offered to it move on; those it had accepted go back to PENDING. */
  onAgentChange(change: RegistryChange): void {
    let agentId: string;
    let why: string;
    if (change.kind === 'left') {
      agentId = change.agentId;
      why = `left (deregistered: ${change.reason})`;
    } else if (change.kind === 'state' && change.agent.state === 'FAILED_STATE') {
      agentId = change.agent.descriptor.agentId;
      why = 'failed (lifecycle state FAILED)';
    } else {
      return;
    }
    const { guard, changes, moveOn } = this.deps;
    for (const record of [...this.deps.memory.records()]) {
      if (record.state === 'ACCEPTED' && record.acceptedBy === agentId) {
        guard.run('acceptor_left', () => this.acceptorLeft(record, why));
        continue;
      }
      if (!waitsFor(record, agentId)) continue;
      const ctx: CallContext = { correlationId: record.correlationId };
      guard.run('target_left', () => {
        changes.run((tx) => {
          const draft = draftOf(record);
          targetLeft(draft, why, this.deps.clock.now());
          // Nobody else could take it: nothing changed (the draft is dropped), the attempt stays the current one (the agent may come back for it).
          if (moveOn.next(draft, 'left', ACTOR, ctx, { left: agentId, left_reason: why.slice(0, 500) }))
            changes.settle(tx, draft);
        }, 'target_left');
      });
    }
  }

  /** Why the agent that accepted `record` can no longer carry the work (not registered, or FAILED), or undefined. */
  acceptorGone(record: HandoffRecord): string | undefined {
    if (record.state !== 'ACCEPTED' || record.acceptedBy === '' || record.acceptedBy.startsWith('operator:'))
      return undefined;
    const agent = this.deps.agents.get(record.acceptedBy);
    if (!agent) return 'left (it is not registered)';
    if (agent.state === 'FAILED_STATE') return 'failed (lifecycle state FAILED)';
    return undefined;
  }

  /**
   * The accepting agent left (deregistered) or failed: the handoff goes back to PENDING with a new wait (`timeout` from
   * now) and is offered to the next candidate like after a rejection (its attempt ends `left`); the origin is told.
   * Nobody else: the operator (option), else REJECTED (AGENT_UNAVAILABLE).
   */
  acceptorLeft(record: OpenRecord, why: string): void {
    const ctx: CallContext = { correlationId: record.correlationId };
    const acceptor = record.acceptedBy;
    const pendingSwitch = record.worktree?.outcome === 'switch_pending' ? record.worktree.invocationId : '';
    this.deps.changes.change(
      record,
      (draft) => {
        // The next acceptor is carried into the worktree afresh; the departed one's switch is withdrawn (below).
        backToPending(draft, why, this.deps.clock.now());
        this.deps.moveOn.next(draft, 'acceptor_left', ACTOR, ctx, {
          acceptor_left: acceptor,
          left_reason: why.slice(0, 500),
          withdrawn_switch: pendingSwitch || undefined,
        });
      },
      'acceptor_left',
    );
    if (pendingSwitch)
      this.deps.withdrawSwitch(pendingSwitch, record.requestId, `its accepting agent '${acceptor}' ${why}`, ctx);
  }
}
