import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { HitlInvocations } from '../hitl/model';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import { CommitEmitter, Transitions, type Transition } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import { type EffectivePolicy, NegotiationError, type PolicyReader, type Speaker } from '../policy/model';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import { Aborts } from './abort';
import { LIMITS } from './checks';
import { Decisions } from './decide';
import { Delivery } from './delivery';
import { Drafts } from './drafts';
import { DebateEngine, type DebateInference } from './engine';
import { Ends } from './ends';
import { Evaluations } from './evaluate';
import { HitlGate } from './hitl';
import type { DecisionInput, EvaluationInput, EvaluationReportInput, OpenInput, ProposalInput } from './inputs';
import { ACTOR, Journal, type ArtifactSink } from './journal';
import type {
  NegotiationChange,
  NegotiationDetail,
  NegotiationQueries,
  NegotiationRecord,
  NegotiationStorage,
  NegotiationSummary,
  RoundRecord,
} from './model';
import { Opening } from './open';
import { Rounds } from './propose';
import { NegotiationReads } from './queries';
import { Restore, type NegotiationRetention } from './restore';
import { Timeouts } from './timeouts';

export type { DecisionInput, EvaluationInput, EvaluationReportInput, OpenInput, ProposalInput } from './inputs';
export { NEGOTIATION_RETENTION, type NegotiationRetention } from './restore';
export { HITL_DIFF_MAX_BYTES, NEGOTIATION_HITL_ACTIONS, NEGOTIATION_HITL_COMPONENT, policyWire } from './notices';
export { UNDELIVERED_GIVE_UP_MS, UNDELIVERED_RETRY_MS } from './delivery';
export { MAX_OPEN_PER_OPENER } from './open';
export { VALIDATOR_CACHE_SIZE } from './drafts';

export interface NegotiationDeps {
  readonly store: NegotiationStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly hitl: HitlInvocations;
  /** ActivityBuffer.appendArtifact: contract_vN / diff / reports. */
  readonly artifacts: ArtifactSink;
  /** The reasoning proxy (InferenceEngine): asked only when an engine agent is online and llm_weight > 0. */
  readonly inference: DebateInference;
  readonly policies: PolicyReader;
  /** Retention of finished negotiations (defaults: NEGOTIATION_RETENTION). */
  readonly retention?: Partial<NegotiationRetention>;
}

/**
 * Debates (RFC §17, §17.1–§17.4; README, "Debates"): open, rounds (Propose then Counter), early JSON Schema validation,
 * a DeltaSummary per round, evaluations scored deterministically first and blended with the inference engine's confidence,
 * acceptance and the stop rules of the EffectivePolicy, deadlock → the tie-break or a HITL DEBATE_DEADLOCK invocation,
 * every event fanned out as a NEGOTIATION envelope to every participant inside the transition of its state change.
 *
 * The facade: it wires the parts (README.md in this folder) and runs each public call through `refusing`.
 */
export class Negotiations implements NegotiationQueries, Disposable {
  private readonly changed = new CommitEmitter<NegotiationChange>();
  readonly onDidChange: Event<NegotiationChange> = this.changed.event;
  private readonly guard: Guard;
  private readonly reads: NegotiationReads;
  private readonly drafts: Drafts;
  private readonly delivery: Delivery;
  private readonly timeouts: Timeouts;
  private readonly gate: HitlGate;
  private readonly engine: DebateEngine;
  private readonly opening: Opening;
  private readonly rounds: Rounds;
  private readonly evaluations: Evaluations;
  private readonly decisions: Decisions;
  private readonly aborts: Aborts;
  private readonly starting: Restore;

  constructor(protected readonly deps: NegotiationDeps) {
    const { store, log, clock } = deps;
    const guard = (this.guard = new Guard((context, err) => log.internalError(ACTOR, context, err)));
    const transitions = new Transitions(store, guard);
    /** The end of every transition of a debate: its timeouts re-armed from the record, its change told once durable (as before the kernel). */
    const settle = (rec: NegotiationRecord, tx: Transition): void => {
      this.timeouts.rearm(rec, tx);
      const change: NegotiationChange = { negotiationId: rec.id, state: rec.state };
      tx.whenDurable(() => this.changed.fire(change));
    };
    const journal = new Journal({ log, clock, artifacts: deps.artifacts });
    this.reads = new NegotiationReads({ store });
    this.drafts = new Drafts({ store, policies: deps.policies });
    this.delivery = new Delivery({ store, transitions, outbox: deps.outbox, clock, log, guard });
    const ends: Ends = new Ends({
      store,
      clock,
      policies: deps.policies,
      journal,
      delivery: this.delivery,
      pause: (rec, why, stopReason, s) => this.gate.pause(rec, why, stopReason, s),
    });
    this.timeouts = new Timeouts({ store, transitions, clock, log, guard, ends, settle });
    this.gate = new HitlGate({ store, transitions, clock, log, guard, hitl: deps.hitl, journal, ends, settle });
    this.engine = new DebateEngine({
      store,
      transitions,
      log,
      guard,
      inference: deps.inference,
      journal,
      ends,
      settle,
    });
    const parts = { store, transitions, clock, reads: this.reads, journal, delivery: this.delivery, ends, settle };
    this.opening = new Opening({ ...parts, agents: deps.agents, policies: deps.policies, drafts: this.drafts });
    this.rounds = new Rounds({ ...parts, drafts: this.drafts });
    this.evaluations = new Evaluations({ ...parts, inference: deps.inference, engine: this.engine });
    this.decisions = new Decisions({ ...parts, gate: this.gate });
    this.aborts = new Aborts({ ...parts, gate: this.gate });
    this.starting = new Restore(
      {
        store,
        transitions,
        clock,
        ids: deps.ids,
        log,
        guard,
        hitl: deps.hitl,
        delivery: this.delivery,
        timeouts: this.timeouts,
        engine: this.engine,
        gate: this.gate,
        ends,
        settle,
      },
      deps.retention,
    );
  }

  /** The compiled proposal schemas kept (Drafts, VALIDATOR_CACHE_SIZE); a test of the cache reads them. */
  protected get validators(): ReadonlyMap<string, unknown> {
    return this.drafts.cached;
  }

  /** One bounded pruning run (logged `negotiation.pruned`); answers whether it left more. */
  pruneFinished(): boolean {
    return this.starting.pruneFinished();
  }

  // ------------------------------------------------------------------ RPCs

  /**
   * The proposal schemas an Open (`open` given) or a Propose / Counter of `negotiationId` will compile, compiled
   * beforehand on the schema worker, off the event loop: the server awaits this, then makes the call, which finds them
   * cached. Never throws: the call itself refuses.
   */
  compileSchemas(negotiationId: string, open?: OpenInput): Promise<void> {
    return this.drafts.compileSchemas(negotiationId, open);
  }

  open(input: OpenInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('open', input.negotiationId, ctx, () => this.opening.open(input, speaker, ctx));
  }

  propose(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    return this.refusing('propose', input.negotiationId, ctx, () => this.rounds.round('propose', input, speaker, ctx));
  }

  counter(input: ProposalInput, speaker: Speaker, ctx: CallContext): RoundRecord {
    return this.refusing('counter', input.negotiationId, ctx, () => this.rounds.round('counter', input, speaker, ctx));
  }

  evaluate(input: EvaluationInput, speaker: Speaker, ctx: CallContext): void {
    this.refusing('evaluate', input.negotiationId, ctx, () => this.evaluations.evaluate(input, speaker, ctx));
  }

  /** SchedulerPolicyService.SubmitEvaluation: an EvaluationReport counts as the agent's evaluation of the current round. */
  submitEvaluation(
    negotiationId: string,
    report: EvaluationReportInput,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly accepted: boolean; readonly reason: string } {
    try {
      this.refusing('submit_evaluation', negotiationId, ctx, () =>
        this.evaluations.report(negotiationId, report, speaker, ctx),
      );
      return { accepted: true, reason: '' };
    } catch (err) {
      if (err instanceof NegotiationError) return { accepted: false, reason: `${err.code}: ${err.message}` };
      throw err;
    }
  }

  decide(input: DecisionInput, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('decide', input.negotiationId, ctx, () => this.decisions.decide(input, speaker, ctx));
  }

  abort(negotiationId: string, reason: string, speaker: Speaker, ctx: CallContext): NegotiationRecord {
    return this.refusing('abort', negotiationId, ctx, () => this.aborts.abort(negotiationId, reason, speaker, ctx));
  }

  /** SchedulerPolicyService.HitlAction: decides the pending HITL invocation of this negotiation (the operator only). */
  hitlAction(
    negotiationId: string,
    action: string,
    rationale: string,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    return this.gate.action(negotiationId, action, rationale, speaker, ctx);
  }

  effectivePolicy(negotiationId: string): EffectivePolicy | undefined {
    return this.reads.effectivePolicy(negotiationId);
  }

  get(negotiationId: string): NegotiationRecord | undefined {
    return this.reads.get(negotiationId);
  }

  list(limit = 200): NegotiationSummary[] {
    return this.reads.list(limit);
  }

  detail(id: string): NegotiationDetail | undefined {
    return this.reads.detail(id);
  }

  /** At start: timers re-armed, HITL invocations settled while stopped applied, pending inference asked again. */
  restore(ctx: CallContext): void {
    this.starting.restore(ctx);
  }

  dispose(): void {
    this.guard.stop();
    this.timeouts.dispose();
    this.delivery.dispose();
    this.starting.dispose();
    this.changed.dispose();
  }

  /** Runs a public call; a refusal is logged (`negotiation.refused`, outside any transaction) and thrown. */
  private refusing<T>(call: string, negotiationId: string, ctx: CallContext, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof NegotiationError) {
        this.deps.log.record({
          correlationId: negotiationId.slice(0, LIMITS.negotiation_id) || ctx.correlationId,
          actor: ACTOR,
          eventType: 'negotiation.refused',
          level: 'WARN',
          details: {
            call,
            negotiation_id: negotiationId.slice(0, LIMITS.negotiation_id),
            code: err.code,
            reason: err.message.slice(0, 500),
          },
        });
      }
      throw err;
    }
  }
}
