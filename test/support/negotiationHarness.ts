import { strict as assert } from 'node:assert';
import type { HitlPolicy } from '../../src/core/hitl/policy';
import type { RouterOptions } from '../../src/core/router/router';
import type { OpenInput, ProposalInput } from '../../src/core/negotiation/negotiations';
import type { Negotiations } from '../../src/core/negotiation/negotiations';
import type { NegotiationPolicy } from '../../src/core/policy/model';
import type { PolicySettings } from '../../src/core/policy/policies';
import { COORDINATOR_SPEAKER, NegotiationError, type Speaker } from '../../src/core/policy/speaker';
import { CollectingSink, RouterHarness, ctx, settle } from './routerHarness';

export const OPERATOR: Speaker = { kind: 'operator', label: 'operator' };

/** An agent credential's speaker: it may act only as `agentId`. */
export function agentSpeaker(agentId: string): Speaker {
  return { kind: 'agent', label: `agent:${agentId}`, mayActAs: (id) => id === agentId };
}

/** A test policy (within the default guardrails) from MEDIUM-like defaults. */
export function testPolicy(overrides: Partial<NegotiationPolicy> = {}): NegotiationPolicy {
  return {
    maxRounds: 3,
    scoreThreshold: 0.7,
    diffTolerance: 0.1,
    roundTimeoutMs: 60_000,
    tokenBudgetPerRound: 8_000,
    totalTokenBudget: 48_000,
    oscillationLimit: 2,
    hitl: 'None',
    scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0 },
    ...overrides,
  };
}

/** The events (§17.1 JSON) one participant received, in delivery order. */
export interface ReceivedEvent {
  readonly messageId: string;
  readonly correlationId: string;
  readonly producerId: string;
  readonly raw: Buffer;
  readonly json: Record<string, unknown>;
}

/**
 * The real coordinator (store file, ManualClock, router, HITL, activity, policies) with participant agents that
 * register and stream their inboxes; NEGOTIATION envelopes are read from their sinks and confirmed (AckDelivery).
 */
export class NegotiationHarness extends RouterHarness {
  private readonly sinks = new Map<string, CollectingSink>();

  constructor(hitlPolicy?: HitlPolicy, routerOptions: Partial<RouterOptions> = {}) {
    super(routerOptions, {}, hitlPolicy);
  }

  get negotiations(): Negotiations {
    return this.coordinator.negotiations;
  }

  agent(agentId: string): void {
    this.register(agentId);
    this.sinks.set(agentId, this.stream(agentId).sink);
  }

  reconnect(agentId: string): void {
    this.sinks.set(agentId, this.stream(agentId).sink);
  }

  /** A profile named TEST with this policy (a new policy version), and optional other settings (tie-break). */
  usePolicy(policy: NegotiationPolicy, settings: PolicySettings = {}): void {
    this.coordinator.policies.setProfiles([{ name: 'TEST', policy }], 'test', ctx('policy'));
    if (Object.keys(settings).length > 0) this.coordinator.policies.applySettings(settings, ctx('policy'));
  }

  openInput(id: string, participants: readonly string[], extra: Partial<OpenInput> = {}): OpenInput {
    return {
      negotiationId: id,
      correlationId: '',
      topic: `topic of ${id}`,
      participants,
      intensity: 'MEDIUM',
      debateTimeoutMs: 0,
      profileHint: 'TEST',
      preferences: {},
      schema: '',
      ...extra,
    };
  }

  openN(id: string, participants: readonly string[], extra: Partial<OpenInput> = {}, speaker: Speaker = OPERATOR) {
    return this.negotiations.open(this.openInput(id, participants, extra), speaker, ctx(`open-${id}`));
  }

  proposal(id: string, from: string, value: unknown, contentType = 'application/json'): ProposalInput {
    const payload = Buffer.isBuffer(value)
      ? value
      : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8');
    return { negotiationId: id, fromAgent: from, contentType, payload };
  }

  propose(id: string, from: string, value: unknown, contentType?: string) {
    return this.negotiations.propose(
      this.proposal(id, from, value, contentType),
      agentSpeaker(from),
      ctx(`propose-${id}`),
    );
  }

  counter(id: string, from: string, value: unknown, contentType?: string) {
    return this.negotiations.counter(
      this.proposal(id, from, value, contentType),
      agentSpeaker(from),
      ctx(`counter-${id}`),
    );
  }

  evaluate(id: string, from: string, score: number, notes = '') {
    this.negotiations.evaluate(
      { negotiationId: id, fromAgent: from, confidenceScore: score, notes },
      agentSpeaker(from),
      ctx(`evaluate-${id}`),
    );
  }

  /** NEGOTIATION events `agentId` received so far (all of them, in order); deliveries are confirmed. */
  received(agentId: string): ReceivedEvent[] {
    const sink = this.sinks.get(agentId);
    assert.ok(sink, `no stream for ${agentId}`);
    const seen = new Set<string>();
    const out: ReceivedEvent[] = [];
    for (const item of sink.ofType('NEGOTIATION')) {
      if (seen.has(item.envelope.messageId)) continue;
      seen.add(item.envelope.messageId);
      this.router.ackDelivery(agentId, item.seq, item.envelope.messageId, 'DELIVERED', ctx('ack-delivery'));
      const raw = Buffer.from(item.envelope.payload);
      out.push({
        messageId: item.envelope.messageId,
        correlationId: item.envelope.correlationId,
        producerId: item.envelope.producerId,
        raw,
        json: JSON.parse(raw.toString('utf8')) as Record<string, unknown>,
      });
    }
    return out;
  }

  kinds(agentId: string): string[] {
    return this.received(agentId).map((e) => String(e.json.kind));
  }

  stateOf(id: string): string | undefined {
    return this.negotiations.get(id)?.state;
  }

  async advance(ms: number): Promise<void> {
    this.clock.advance(ms);
    await settle();
  }
}

/** Asserts that `fn` throws a NegotiationError with this kind and code; answers its message. */
export function refused(fn: () => unknown, kind: string, code: string, message?: RegExp): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof NegotiationError, `expected a NegotiationError, got ${String(err)}`);
    assert.equal(err.kind, kind, err.message);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return err.message;
  }
  assert.fail(`expected a refusal ${code}`);
}

export { COORDINATOR_SPEAKER, ctx, settle };
