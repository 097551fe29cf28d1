import { createHash } from 'node:crypto';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { FIELD_LIMITS } from '../fieldLimits';
import type { Transition, Transitions } from '../kernel/transitions';
import { DEBATE_INTENSITIES, type PolicyReader, type Speaker } from '../policy/model';
import type { AgentDirectory } from '../registry/model';
import { modalityAccepts } from '../router/model';
import { openerOf, speakerName } from './access';
import { checkId, checkText, fail, LIMITS } from './checks';
import { canonicalJson } from './delta';
import { step, type Delivery } from './delivery';
import { debateTimeoutOf, type Drafts } from './drafts';
import type { OpenInput } from './inputs';
import type { Journal } from './journal';
import type { NegotiationRecord, NegotiationRepository } from './model';
import { policyWire } from './notices';
import { openedRecord } from './state';

/** Debates one agent may have open (not decided or aborted) at once, as their opener: beyond, Open is refused BUFFER_FULL. */
export const MAX_OPEN_PER_OPENER = 32;

export interface OpenDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly agents: AgentDirectory;
  readonly policies: Pick<PolicyReader, 'effectiveFor'>;
  readonly drafts: Pick<Drafts, 'compiled' | 'remember'>;
  readonly journal: Journal;
  readonly delivery: Pick<Delivery, 'fanout'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/** What makes two Opens the same Open (the ids aside): everything asked, canonical. */
export function openDigest(input: OpenInput): string {
  return createHash('sha256')
    .update(
      canonicalJson({
        topic: input.topic,
        participants: input.participants,
        intensity: input.intensity,
        debate_timeout_ms: input.debateTimeoutMs,
        profile: input.profileHint,
        preferences: input.preferences,
        schema: input.schema,
      }),
    )
    .digest('hex');
}

/** The fields of an Open, each as it must be (VALIDATION_ERROR otherwise). */
function checkOpen(input: OpenInput): void {
  if (input.topic.trim() === '') throw fail('invalid', 'VALIDATION_ERROR', 'topic is required');
  checkText('topic', input.topic, LIMITS.topic);
  if (input.participants.length > LIMITS.participants) {
    throw fail(
      'invalid',
      'VALIDATION_ERROR',
      `participants has ${input.participants.length} entries; at most ${LIMITS.participants}`,
    );
  }
  for (const p of input.participants) checkId('participants entry', p, FIELD_LIMITS.registry.agent_id);
  if (new Set(input.participants).size !== input.participants.length)
    throw fail('invalid', 'VALIDATION_ERROR', 'participants lists an agent twice');
  if (input.participants.length < 2)
    throw fail('invalid', 'VALIDATION_ERROR', 'a negotiation needs at least two distinct participants');
  if (input.intensity !== '' && !DEBATE_INTENSITIES.includes(input.intensity)) {
    throw fail('invalid', 'VALIDATION_ERROR', `intensity must be one of ${DEBATE_INTENSITIES.join(', ')}`);
  }
  if (!Number.isFinite(input.debateTimeoutMs) || input.debateTimeoutMs < 0)
    throw fail('invalid', 'VALIDATION_ERROR', 'debate_timeout may not be negative');
  checkText('sw4rm-negotiation-profile', input.profileHint, LIMITS.profile);
  if (Buffer.byteLength(input.schema) > LIMITS.schema_bytes) {
    throw fail('invalid', 'VALIDATION_ERROR', `sw4rm-proposal-schema is larger than ${LIMITS.schema_bytes} bytes`);
  }
}

/**
 * Open: participants registered and accepting JSON, the opener one of them (or the operator) and under its cap, a
 * repeat of the same Open answered with the debate it opened, the EffectivePolicy and proposal schemas fixed for the
 * debate's life; the `open` and `policy` events to every participant.
 */
export class Opening {
  constructor(private readonly deps: OpenDeps) {}

  open(input: OpenInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    const { negotiation } = this.deps.store;
    checkId('negotiation_id', input.negotiationId, LIMITS.negotiation_id);
    const correlationId = input.correlationId === '' ? input.negotiationId : input.correlationId;
    if (correlationId !== input.negotiationId) {
      throw fail('invalid', 'VALIDATION_ERROR', 'correlation_id must equal negotiation_id (RFC §17), or be empty');
    }
    checkOpen(input);
    // The agent that opens it (the operator: none): its open debates are capped, and it is the requester of the HITL
    // invocations the debate opens, so HitlPolicy.maxPendingPerRequester applies per opener.
    const opener = openerOf(input.participants, input.preferences, speaker);
    const existing = negotiation.get(input.negotiationId);
    if (existing) {
      if (existing.openDigest === openDigest(input)) return existing;
      throw fail(
        'exists',
        'ALREADY_EXISTS',
        `negotiation '${input.negotiationId}' exists with other content; choose another negotiation_id`,
      );
    }
    if (opener !== undefined) {
      const open = negotiation.countOpenBy(opener);
      if (open >= MAX_OPEN_PER_OPENER) {
        throw fail(
          'exhausted',
          'BUFFER_FULL',
          `${opener} has ${open} debates open that it opened (at most ${MAX_OPEN_PER_OPENER}): end one first`,
        );
      }
    }
    for (const p of input.participants) {
      const agent = this.deps.agents.get(p);
      if (!agent)
        throw fail(
          'not_found',
          'NO_ROUTE',
          `participant '${p}' is not a registered agent; it must RegisterAgent first`,
        );
      if (!modalityAccepts(agent.descriptor.modalitiesSupported, 'application/json')) {
        throw fail(
          'precondition',
          'UNSUPPORTED_MESSAGE_TYPE',
          `participant '${p}' does not accept application/json, the content type of NEGOTIATION events`,
        );
      }
    }
    const { effective, schema: policySchema } = this.deps.policies.effectiveFor({
      intensity: input.intensity,
      profileHint: input.profileHint,
      preferences: input.preferences,
      debateTimeoutMs: debateTimeoutOf(input.debateTimeoutMs),
      topic: input.topic,
    });
    // The opener's schema does not replace the operator's for the topic: with both, a draft must satisfy both.
    const own = input.schema.trim() !== '';
    const schema = own ? input.schema : policySchema;
    const alsoPolicy = own && policySchema.trim() !== '' ? policySchema : '';
    // Compiled into locals: kept (cached) only once the Open is committed, so a refused Open leaves nothing behind.
    const compiled = [
      ...(schema.trim() !== ''
        ? [this.deps.drafts.compiled(schema, own ? 'sw4rm-proposal-schema' : "the policy's proposal schema")]
        : []),
      ...(alsoPolicy !== '' ? [this.deps.drafts.compiled(alsoPolicy, "the policy's proposal schema")] : []),
    ];
    const rec = openedRecord({
      id: input.negotiationId,
      correlationId,
      topic: input.topic,
      participants: input.participants,
      effective,
      schema,
      policySchema: alsoPolicy,
      openedBy: speakerName(speaker),
      opener,
      openDigest: openDigest(input),
      now: this.deps.clock.now(),
    });
    return this.deps.transitions.run((tx) => {
      const s = step(ctx, tx, true);
      this.deps.journal.record(
        rec,
        'negotiation.opened',
        {
          topic: rec.topic,
          participants: rec.participants,
          intensity: rec.intensity,
          opened_by: rec.openedBy,
          deadline: isoUtc(rec.deadlineAt),
          profile: effective.profile,
          policy_version: effective.policyVersion,
          policy: policyWire(effective.policy),
          applied: effective.applied,
          schema: schema === '' ? undefined : 'yes',
        },
        ctx,
      );
      this.deps.delivery.fanout(rec, { kind: 'open' }, s);
      this.deps.delivery.fanout(rec, { kind: 'policy' }, s);
      negotiation.put(rec);
      tx.install(() => {
        for (const c of compiled) this.deps.drafts.remember(c.key, c.validate);
      });
      this.deps.settle(rec, tx);
      return rec;
    }, rec.id);
  }
}
