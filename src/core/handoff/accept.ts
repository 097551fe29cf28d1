import type { Clock } from '../clock';
import { CoreError } from '../kernel/errors';
import type { CallContext } from '../context';
import type { Speaker } from '../policy/model';
import type { BindingStatus } from '../worktree/model';
import { knows, mayActAs, speakerName } from './access';
import type { HandoffChanges } from './changes';
import { SWITCH_HANDOFF_FACT, type HandoffWorktrees } from './deps';
import type { HandoffRecord, HandoffRepository, HandoffWorktree } from './model';
import type { HandoffNotices } from './notices';
import { denied, identifier, LIMITS, notFound, precondition } from './refusals';
import { accepted, draftOf, waitsFor, type CarryOutcome, type HandoffMemory, type OpenRecord } from './state';

export interface AcceptDeps {
  readonly clock: Clock;
  readonly handoffs: Pick<HandoffRepository, 'get' | 'put'>;
  readonly worktrees: HandoffWorktrees;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly notices: HandoffNotices;
  /** timeouts.ts: a time that ran out is decided first. */
  readonly catchUp: (requestId: string) => void;
  /** carry.ts. */
  readonly followSwitch: (agentId: string) => void;
  readonly withdrawSwitch: (invocationId: string, requestId: string, why: string, ctx: CallContext) => void;
}

/** A worktree carry that the binding could not complete (its transaction is rolled back; the caller answers the refusal). */
class CarryFailed extends CoreError {
  constructor(message: string) {
    super('precondition', 'VALIDATION_ERROR', message);
    this.name = 'CarryFailed';
  }
}

/** AcceptHandoff: who may accept, and the acceptance with a worktree carry (BIND or SWITCH_REQUEST in its transaction). */
export class Acceptance {
  constructor(private readonly deps: AcceptDeps) {}

  /**
   * AcceptHandoff: only the current target → ACCEPTED. With a worktree carry the receiver's binding moves first (BIND or
   * SWITCH_REQUEST through the worktree state machine) and the acceptance commits in the same transaction; a carry the
   * state machine forbids refuses the accept (FAILED_PRECONDITION, the reason named).
   */
  async accept(requestId: string, agentId: string, speaker: Speaker, ctx: CallContext): Promise<HandoffRecord> {
    identifier('request_id', requestId, LIMITS.request_id, true);
    identifier('accepting_agent', agentId, LIMITS.agent_id, true);
    if (!mayActAs(speaker, agentId)) throw denied(`${speakerName(speaker)} may not accept as '${agentId}'`);
    this.deps.catchUp(requestId);
    const record = this.deps.memory.get(requestId);
    const notOffered = () => denied(`handoff '${requestId}' is not offered to '${agentId}'`);
    if (!record) {
      const stored = this.deps.handoffs.get(requestId);
      if (!stored) throw notFound(requestId);
      if (stored.acceptedBy === agentId) return stored;
      if (!knows(stored, speaker)) throw notOffered();
      throw precondition(`handoff '${requestId}' is ${stored.state}: it can no longer be accepted`);
    }
    if (!knows(record, speaker)) throw notOffered();
    if (record.state === 'ACCEPTED') {
      if (record.acceptedBy === agentId) return this.deps.handoffs.get(requestId) ?? record;
      throw precondition(`handoff '${requestId}' was accepted by '${record.acceptedBy}'`);
    }
    if (record.awaitingOperator)
      throw precondition(
        `handoff '${requestId}' waits for the operator (no agent could take it); an agent may not accept it now`,
      );
    if (record.toAgent !== agentId)
      throw denied(
        `only the current target '${record.toAgent}' may accept handoff '${requestId}'; '${agentId}' is not`,
      );
    const hctx: CallContext = { ...ctx, correlationId: record.correlationId };
    if (record.worktree && record.worktree.outcome === '') return this.acceptCarrying(record, agentId, speaker, hctx);
    const { changes } = this.deps;
    return changes.full(
      changes.change(record, (draft) => this.commit(draft, agentId, 'agent', speaker, hctx, null), 'accept'),
    );
  }

  /** Inside a transaction: PENDING → ACCEPTED with its event and the requester's notice. */
  commit(
    record: OpenRecord,
    by: string,
    kind: 'agent' | 'operator',
    speaker: Speaker,
    ctx: CallContext,
    carry: CarryOutcome | null,
  ): void {
    const now = this.deps.clock.now();
    const attempt = accepted(record, by, now, carry);
    this.deps.handoffs.put(record);
    const notice = this.deps.notices.toParty(record, record.fromAgent, 'accepted', {}, ctx);
    this.deps.changes.event(record, by, 'handoff.accepted', {
      accepted_by: by,
      by_operator: kind === 'operator',
      attempt: record.attempts.length,
      waited_ms: now - (attempt?.at ?? record.requestedAt),
      worktree: record.worktree
        ? {
            repo_id: record.worktree.repoId,
            worktree_id: record.worktree.worktreeId,
            outcome: record.worktree.outcome,
            detail: record.worktree.detail,
            invocation_id: record.worktree.invocationId || undefined,
          }
        : undefined,
      principal: ctx.principal,
      speaker: speakerName(speaker),
      requester_notice: notice,
    });
  }

  /** Whether `record` may still be accepted by `agentId` (checked again after the worktree's asynchronous work). */
  private acceptable(requestId: string, agentId: string): OpenRecord | undefined {
    const r = this.deps.memory.get(requestId);
    return r && waitsFor(r, agentId) ? r : undefined;
  }

  private async acceptCarrying(
    record: OpenRecord,
    agentId: string,
    speaker: Speaker,
    ctx: CallContext,
  ): Promise<HandoffRecord> {
    const { changes, worktrees, memory, handoffs } = this.deps;
    const carry = record.worktree!;
    const place = worktrees.placeOf(agentId);
    const refuse = (why: string) =>
      precondition(
        `handoff '${record.requestId}' carries worktree '${carry.worktreeId}' of '${carry.repoId}', but ${why}`,
      );
    /** The same agent's accept that ran meanwhile (a retry while git worked) is this one's answer. */
    const acceptedMeanwhile = (): HandoffRecord | undefined => {
      const now = memory.get(record.requestId) ?? handoffs.get(record.requestId);
      return now && now.state !== 'PENDING' && now.acceptedBy === agentId ? changes.full(now) : undefined;
    };
    if (place && place.repoId === carry.repoId && place.worktreeId === carry.worktreeId) {
      return changes.full(
        changes.change(
          record,
          (draft) =>
            this.commit(draft, agentId, 'agent', speaker, ctx, {
              outcome: 'already_there',
              detail: `'${agentId}' works in it already`,
              invocationId: '',
            }),
          'accept',
        ),
      );
    }
    const binding = worktrees.status(agentId);
    let committed: OpenRecord | undefined;
    const within =
      (outcome: HandoffWorktree['outcome'], detail: (b: BindingStatus) => string) => (b: BindingStatus) => {
        const current = this.acceptable(record.requestId, agentId);
        // A BIND is rolled back when the handoff changed meanwhile (the receiver stays UNBOUND); a switch asked for is
        // withdrawn after it (throwing here would leave its HITL invocation half made).
        if (!current && outcome === 'bound')
          throw new CarryFailed('the handoff changed while the worktree was prepared');
        if (!current) return;
        if (outcome === 'bound' && b.state !== 'BOUND_HOME')
          throw new CarryFailed(
            `binding '${agentId}' to it failed: ${b.failure?.reason ?? b.state} ${b.failure?.detail ?? ''}`.trim(),
          );
        // The last step of the binding's transaction (this transition joins it): memory follows the store at once (a
        // failure after it: reloaded below).
        committed = changes.run((tx) => {
          const draft = draftOf(current);
          this.commit(draft, agentId, 'agent', speaker, ctx, {
            outcome,
            detail: detail(b),
            invocationId: b.switch?.invocationId ?? '',
          });
          changes.settle(tx, draft);
          return draft;
        }, 'accept');
      };
    /** The binding failed after this acceptance was written: its transaction was rolled back, and memory with it. */
    const undo = () => {
      if (committed) changes.reload(record.requestId);
      committed = undefined;
    };
    if (binding.state === 'UNBOUND') {
      // RFC §16.2 BIND: UNBOUND → BOUND_HOME with the carried worktree as the receiver's home (refused while it is another
      // bound agent's home: one bound agent per home worktree).
      try {
        await worktrees.bind(
          agentId,
          carry.repoId,
          carry.worktreeId,
          ctx,
          within('bound', (b) => `'${agentId}' bound to it (BIND, UNBOUND → BOUND_HOME) at ${b.worktreePath}`),
        );
      } catch (err) {
        undo();
        const done = acceptedMeanwhile();
        if (done) return done;
        throw refuse(`the worktree state machine refused to bind '${agentId}' to it: ${(err as Error).message}`);
      }
    } else if (binding.state === 'BOUND_HOME' && binding.repoId === carry.repoId) {
      // RFC §16.2 SWITCH_REQUEST: BOUND_HOME → SWITCH_PENDING; a person (HITL WORKTREE_OVERRIDE) or a policy rule decides.
      let switched: BindingStatus;
      try {
        switched = await worktrees.requestSwitch(
          agentId,
          carry.worktreeId,
          ctx,
          {
            reason: `handoff ${record.requestId} from ${record.fromAgent} carries its worktree`,
            facts: { [SWITCH_HANDOFF_FACT]: record.requestId },
          },
          within(
            'switch_pending',
            (b) =>
              `'${agentId}' asked to switch into it (SWITCH_REQUEST, BOUND_HOME → SWITCH_PENDING; HITL WORKTREE_OVERRIDE ${b.switch?.invocationId ?? ''})`,
          ),
        );
      } catch (err) {
        undo();
        const done = acceptedMeanwhile();
        if (done) return done;
        throw refuse(
          `the worktree state machine refused the switch of '${agentId}' into it: ${(err as Error).message}`,
        );
      }
      // The handoff changed while git ran (expired, rejected, rerouted): the switch asked for is withdrawn (after a
      // crash here, by restore: its invocation names the handoff, which does not wait for it).
      if (!committed && switched.switch)
        this.deps.withdrawSwitch(switched.switch.invocationId, record.requestId, 'it was no longer acceptable', ctx);
      // A switch decided as it was asked (a policy rule) is followed at once.
      if (committed) this.deps.followSwitch(agentId);
    } else {
      throw refuse(
        `'${agentId}' is ${binding.state} in repository '${binding.repoId}': the worktree state machine (RFC §16.2) carries a worktree only into an UNBOUND agent (BIND) or one BOUND_HOME in the same repository (SWITCH_REQUEST)`,
      );
    }
    if (!committed) {
      const done = acceptedMeanwhile();
      if (done) return done;
      const now = memory.get(record.requestId) ?? handoffs.get(record.requestId);
      throw precondition(
        `handoff '${record.requestId}' changed while the worktree was carried (now ${now?.state ?? 'gone'}${now?.toAgent && now.toAgent !== agentId ? `, offered to '${now.toAgent}'` : ''}); it was not accepted`,
      );
    }
    return changes.full(committed);
  }
}
