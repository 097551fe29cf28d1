import type { CallContext } from '../context';
import { type HitlInvocation, type HitlInvocations, HitlRequestError, HitlStateError } from '../hitl/model';
import type { Guard } from '../kernel/guard';
import type { Transitions } from '../kernel/transitions';
import { NegotiationError, type Speaker } from '../policy/model';
import { hitlActionRefusal, speakerName } from './access';
import { LIMITS, denied, invalid, notFound } from './checks';
import type { Decisions } from './decide';
import type { RoomRepository } from './model';
import { ROOM_HITL_ACTIONS } from './notices';

/** What following an escalation uses. */
export interface EscalationDeps {
  readonly room: Pick<RoomRepository, 'latest' | 'escalatedFor' | 'countInRoom'>;
  readonly hitl: Pick<HitlInvocations, 'decide' | 'whenSettled'>;
  readonly transitions: Transitions;
  readonly guard: Guard;
  readonly decisions: Pick<Decisions, 'applyHitl'>;
}

/**
 * An escalated revision's HITL invocation once it is open: watched until it settles (whenever: after a restart too),
 * its answer applied as the revision's final decision; and HitlAction, the operator deciding it from the scheduler's
 * policy service.
 */
export class Escalations {
  private readonly watched = new Set<string>();

  constructor(private readonly deps: EscalationDeps) {}

  /** Applies the invocation's answer when it settles (whenever: the same call restore() makes after a restart). */
  watch(invocationId: string): void {
    if (this.watched.has(invocationId)) return;
    this.watched.add(invocationId);
    this.deps.hitl.whenSettled(invocationId).then(
      (invocation) => {
        this.watched.delete(invocationId);
        this.settled(invocation);
      },
      () => {
        this.watched.delete(invocationId); /* the coordinator is stopping: restore() applies it at the next start */
      },
    );
  }

  /** A settled invocation: the escalated revision it belongs to (if it still waits on it) decided by its answer. */
  settled(invocation: HitlInvocation): void {
    if (this.deps.guard.isStopped) return;
    const artifactId =
      typeof invocation.context.facts.artifact_id === 'string' ? invocation.context.facts.artifact_id : '';
    const proposal = artifactId === '' ? undefined : this.deps.room.latest(artifactId);
    if (!proposal || proposal.state !== 'escalated' || proposal.invocationId !== invocation.id) return;
    this.deps.guard.run(proposal.roomId, () => {
      this.deps.transitions.run((tx) => this.deps.decisions.applyHitl(tx, proposal, invocation), proposal.roomId);
    });
  }

  /** See NegotiationRoom.hitlAction. */
  hitlAction(
    roomId: string,
    action: string,
    rationale: string,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    const refusal = hitlActionRefusal(speaker);
    if (refusal !== undefined) throw denied(refusal);
    const name = action.trim().toLowerCase();
    if (!(ROOM_HITL_ACTIONS as readonly string[]).includes(name))
      throw invalid(`action must be one of ${ROOM_HITL_ACTIONS.join(', ')}, not ${JSON.stringify(action)}`);
    const why = rationale.trim();
    if (why === '')
      throw invalid('rationale is required: say why (it is recorded in the audit trail and the decision)');
    if (why.length > LIMITS.rationale) throw invalid(`rationale is longer than ${LIMITS.rationale} characters`);
    const pending = this.deps.room.escalatedFor(roomId);
    if (pending.length === 0) {
      if (!this.deps.room.latest(roomId) && this.deps.room.countInRoom(roomId) === 0)
        throw notFound(`no negotiation room or artifact '${roomId}'`);
      return { ok: false, reason: `FAILED_PRECONDITION: room '${roomId}' has no escalation waiting for a person` };
    }
    if (pending.length > 1) {
      return {
        ok: false,
        reason: `FAILED_PRECONDITION: room '${roomId}' has ${pending.length} escalations waiting (${pending.map((p) => p.artifactId).join(', ')}); name the artifact_id instead`,
      };
    }
    const proposal = pending[0];
    const invocationId = proposal.invocationId ?? '';
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.decide(
        invocationId,
        {
          action: name,
          rationale: why,
          payload: name === 'modify' ? { outcome: 'REVISION_REQUESTED', artifact_id: proposal.artifactId } : undefined,
        },
        speakerName(speaker),
        ctx,
      );
    } catch (err) {
      if (err instanceof HitlStateError) return { ok: false, reason: `FAILED_PRECONDITION: ${err.message}` };
      if (err instanceof HitlRequestError)
        throw new NegotiationError(err.code === 'BUFFER_FULL' ? 'exhausted' : 'invalid', err.code, err.message);
      throw err;
    }
    this.settled(invocation);
    const outcome =
      name === 'approve'
        ? 'APPROVED'
        : name === 'modify'
          ? 'REVISION_REQUESTED'
          : 'REVISION_REQUESTED (rejected, closed)';
    return { ok: true, reason: `artifact '${proposal.artifactId}' revision ${proposal.revision}: ${outcome}` };
  }
}
