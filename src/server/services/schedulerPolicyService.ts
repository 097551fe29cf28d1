import * as grpc from '@grpc/grpc-js';
import { policyWire } from '../../core/negotiation/negotiations';
import type { Coordinator } from '../../core/coordinator';
import { FIELD_LIMITS, identifierRefusal } from '../../core/fieldLimits';
import {
  HITL_GATES,
  type AgentPreferences,
  type EffectivePolicy,
  type HitlGate,
  type NegotiationPolicy,
  type PolicyProfile,
} from '../../core/policy/model';
import type { CallContext } from '../../core/context';
import { NegotiationError, type Speaker } from '../../core/policy/speaker';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';
import { speakerOf } from '../speaker';
import { CoreError } from '../../core/kernel/errors';

/** policy.proto NegotiationPolicy as grpc-js hands it (keepCase; uint64 as string or number; absent messages null). */
/**
 * SchedulerPolicyService.HitlAction's target: a debate with a pending invocation; else a room (or a room's artifact)
 * with that id, whose escalations are answered through the same RPC; a debate with nothing pending does not shadow a
 * room of the same id (when the room has nothing either, the debate's answer is given).
 */
export function hitlActionFor(
  coordinator: Pick<Coordinator, 'negotiations' | 'room'>,
  id: string,
  action: string,
  rationale: string,
  speaker: Speaker,
  ctx: CallContext,
): { readonly ok: boolean; readonly reason: string } {
  const debate = coordinator.negotiations.get(id);
  if (debate === undefined) return coordinator.room.hitlAction(id, action, rationale, speaker, ctx);
  if (debate.pending) return coordinator.negotiations.hitlAction(id, action, rationale, speaker, ctx);
  const room = coordinator.room.hitlAction(id, action, rationale, speaker, ctx);
  return room.ok ? room : coordinator.negotiations.hitlAction(id, action, rationale, speaker, ctx);
}

export interface NegotiationPolicyMessage {
  max_rounds?: number;
  score_threshold?: number;
  diff_tolerance?: number;
  round_timeout_ms?: string | number;
  token_budget_per_round?: string | number;
  total_token_budget?: string | number;
  oscillation_limit?: number;
  hitl?: { mode?: string } | null;
  scoring?: { require_schema_valid?: boolean; require_examples_pass?: boolean; llm_weight?: number } | null;
}

export interface AgentPreferencesMessage {
  max_rounds: number;
  score_threshold: number;
  diff_tolerance: number;
  round_timeout_ms: number;
  token_budget_per_round: number;
  total_token_budget: number;
  oscillation_limit: number;
}

interface PolicyProfileMessage {
  name?: string;
  policy?: NegotiationPolicyMessage | null;
}

interface EvaluationReportMessage {
  from_agent?: string;
  deterministic_score?: number;
  llm_confidence?: number;
  notes?: string;
}

/**
 * A float as proto `float` carries it (0.7 arrives as 0.699999988…): rounded to 6 decimals, which float32's ~7
 * significant digits hold, so the operator's 0.7 is stored and compared as 0.7.
 */
export function fromFloat(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value ?? 0);
  return Number.isFinite(n) ? Math.round(n * 1e6) / 1e6 : n;
}

/** A uint32/uint64 as grpc-js hands it (a number, or a decimal string with `longs: String`). */
function fromInteger(value: unknown): number {
  if (value === undefined || value === null || value === '') return 0;
  return typeof value === 'number' ? value : Number(value);
}

/** The HITL gate's mode, any case; '' = None; anything else is passed on for the core to refuse naming the field. */
function gateOf(mode: unknown): HitlGate {
  if (mode === undefined || mode === null || mode === '') return 'None';
  const found = HITL_GATES.find((g) => typeof mode === 'string' && g.toLowerCase() === mode.trim().toLowerCase());
  return (found ?? mode) as HitlGate;
}

/** NegotiationPolicy (wire) → the core's policy; every field as given (SetNegotiationPolicy replaces the whole policy). */
export function policyFromMessage(m: NegotiationPolicyMessage): NegotiationPolicy {
  return {
    maxRounds: fromInteger(m.max_rounds),
    scoreThreshold: fromFloat(m.score_threshold),
    diffTolerance: fromFloat(m.diff_tolerance),
    roundTimeoutMs: fromInteger(m.round_timeout_ms),
    tokenBudgetPerRound: fromInteger(m.token_budget_per_round),
    totalTokenBudget: fromInteger(m.total_token_budget),
    oscillationLimit: fromInteger(m.oscillation_limit),
    hitl: gateOf(m.hitl?.mode),
    scoring: {
      requireSchemaValid: m.scoring?.require_schema_valid === true,
      requireExamplesPass: m.scoring?.require_examples_pass === true,
      llmWeight: fromFloat(m.scoring?.llm_weight ?? 0),
    },
  };
}

/** The core's policy.proto shape (negotiation/notices.ts policyWire: one writer of it), typed as the message. */
export function policyMessage(p: NegotiationPolicy): Required<NegotiationPolicyMessage> {
  return policyWire(p) as Required<NegotiationPolicyMessage>;
}

export function preferencesMessage(p: AgentPreferences): AgentPreferencesMessage {
  return {
    max_rounds: p.maxRounds,
    score_threshold: p.scoreThreshold,
    diff_tolerance: p.diffTolerance,
    round_timeout_ms: p.roundTimeoutMs,
    token_budget_per_round: p.tokenBudgetPerRound,
    total_token_budget: p.totalTokenBudget,
    oscillation_limit: p.oscillationLimit,
  };
}

/** policy.proto EffectivePolicy: the derived policy and each agent's clamped preferences. */
export function effectiveMessage(e: EffectivePolicy): {
  policy: Required<NegotiationPolicyMessage>;
  applied: Record<string, AgentPreferencesMessage>;
} {
  const applied: Record<string, AgentPreferencesMessage> = {};
  for (const [agent, prefs] of Object.entries(e.applied)) applied[agent] = preferencesMessage(prefs);
  return { policy: policyMessage(e.policy), applied };
}

function profileMessage(p: PolicyProfile): { name: string; policy: Required<NegotiationPolicyMessage> } {
  return { name: p.name, policy: policyMessage(p.policy) };
}

/** Bad input the response has no field for (a missing or oversized id): INVALID_ARGUMENT, `VALIDATION_ERROR: …`. */
class Malformed extends CoreError {
  constructor(message: string) {
    super('invalid', 'VALIDATION_ERROR', message);
  }
}

const LIMITS = FIELD_LIMITS.policy;

function idOf(field: string, value: unknown): string {
  const id = typeof value === 'string' ? value : '';
  if (id.trim() === '') throw new Malformed(`${field} is required`);
  const refusal = identifierRefusal(field, id, LIMITS.negotiation_id);
  if (refusal !== undefined) throw new Malformed(refusal);
  return id;
}

function textOf(field: string, value: unknown, max: number): string {
  const text = typeof value === 'string' ? value : '';
  if (text.length > max) throw new Malformed(`${field} is longer than ${max} characters (${text.length})`);
  return text;
}

/** Malformed INVALID_ARGUMENT, a NegotiationError by its kind (where the response has no refusal field), else INTERNAL. */
const failure = statusOf;

/**
 * sw4rm.scheduler.SchedulerPolicyService (RFC §17.2) over the core's NegotiationPolicies, Negotiations and
 * NegotiationRoom. SetNegotiationPolicy / SetPolicyProfiles change the coordinator-wide policy: only the operator
 * (or anyone when auth is `none`); an agent credential answers ok=false `PERMISSION_DENIED: …`; a refused value
 * ok=false `VALIDATION_ERROR: <field>: <why>`; success ok=true with reason `v<N>` (the version now in force), after
 * the change is durable. GetEffectivePolicy answers NOT_FOUND for an unknown negotiation. SubmitEvaluation and
 * HitlAction pass on to the debate (or, for HitlAction, the room whose id it names); a refusal there answers
 * accepted/ok=false with `<CODE>: <why>`. A missing or oversized id is INVALID_ARGUMENT; anything unexpected INTERNAL.
 */
export class SchedulerPolicyServiceAdapter {
  static readonly serviceName = 'sw4rm.scheduler.SchedulerPolicyService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { policies, store, ids, log } = this.coordinator;

    /** Who may change the policy: the operator, or any caller when auth is `none`; `rpc:<who>` for the version's set_by. */
    const setter = (
      call: { metadata: grpc.Metadata },
      rpc: string,
    ): { readonly by: string } | { readonly refused: string } => {
      const principal = principalOf(call);
      if (principal === undefined) return { by: 'rpc:unauthenticated' };
      if (principal.kind === 'operator') return { by: 'rpc:operator' };
      const refused = `PERMISSION_DENIED: ${rpc} changes the coordinator-wide negotiation policy: an operator action (an agent states preferences at Open instead)`;
      const ctx = callContext(call, ids);
      log.record({
        correlationId: ctx.correlationId,
        actor: 'policy',
        eventType: 'negotiation.policy_set_refused',
        level: 'WARN',
        details: { rpc, principal: ctx.principal ?? '', reason: 'PERMISSION_DENIED' },
      });
      return { refused };
    };

    const setting =
      <Req>(rpc: string, apply: (request: Req, by: string, call: grpc.ServerUnaryCall<Req, unknown>) => number) =>
      (call: grpc.ServerUnaryCall<Req, unknown>, callback: grpc.sendUnaryData<{ ok: boolean; reason: string }>) => {
        try {
          const who = setter(call, rpc);
          if ('refused' in who) return callback(null, { ok: false, reason: who.refused });
          const version = apply(call.request, who.by, call);
          answerWhenDurable(store, callback, { ok: true, reason: `v${version}` });
        } catch (err) {
          if (err instanceof NegotiationError)
            return callback(null, { ok: false, reason: `${err.code}: ${err.message}` });
          callback(failure(err));
        }
      };

    return {
      SetNegotiationPolicy: setting<{ policy?: NegotiationPolicyMessage | null }>(
        'SetNegotiationPolicy',
        (request, by, call) => {
          if (!request.policy) throw new NegotiationError('invalid', 'VALIDATION_ERROR', 'policy: is required');
          return policies.setBase(policyFromMessage(request.policy), by, callContext(call, ids)).version;
        },
      ),

      GetNegotiationPolicy: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        try {
          callback(null, { policy: policyMessage(policies.current().base) });
        } catch (err) {
          callback(failure(err));
        }
      },

      SetPolicyProfiles: setting<{ profiles?: PolicyProfileMessage[] }>('SetPolicyProfiles', (request, by, call) => {
        const list = request.profiles ?? [];
        if (list.length === 0)
          throw new NegotiationError('invalid', 'VALIDATION_ERROR', 'profiles: name at least one profile');
        if (list.length > LIMITS.profiles)
          throw new NegotiationError(
            'invalid',
            'VALIDATION_ERROR',
            `profiles: at most ${LIMITS.profiles} per call (${list.length})`,
          );
        const profiles = list.map((p, i) => {
          if (!p.policy)
            throw new NegotiationError('invalid', 'VALIDATION_ERROR', `profiles[${i}].policy: is required`);
          return { name: typeof p.name === 'string' ? p.name : '', policy: policyFromMessage(p.policy) };
        });
        return policies.setProfiles(profiles, by, callContext(call, ids)).version;
      }),

      ListPolicyProfiles: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        try {
          callback(null, { profiles: policies.current().profiles.map(profileMessage) });
        } catch (err) {
          callback(failure(err));
        }
      },

      GetEffectivePolicy: (
        call: grpc.ServerUnaryCall<{ negotiation_id?: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        try {
          const id = idOf('negotiation_id', call.request.negotiation_id);
          const effective = this.coordinator.negotiations.effectivePolicy(id);
          if (effective === undefined) throw new NegotiationError('not_found', 'NOT_FOUND', `no negotiation '${id}'`);
          callback(null, { effective: effectiveMessage(effective) });
        } catch (err) {
          callback(failure(err));
        }
      },

      SubmitEvaluation: (
        call: grpc.ServerUnaryCall<{ negotiation_id?: string; report?: EvaluationReportMessage | null }, unknown>,
        callback: grpc.sendUnaryData<{ accepted: boolean; reason: string }>,
      ) => {
        try {
          const id = idOf('negotiation_id', call.request.negotiation_id);
          const report = call.request.report;
          if (!report) throw new Malformed('report is required');
          const input = {
            fromAgent: textOf('report.from_agent', report.from_agent, LIMITS.from_agent),
            deterministicScore: fromFloat(report.deterministic_score ?? 0),
            llmConfidence: fromFloat(report.llm_confidence ?? 0),
            notes: textOf('report.notes', report.notes, LIMITS.notes),
          };
          const speaker = speakerOf(call, this.coordinator.credentials);
          const result = this.coordinator.negotiations.submitEvaluation(id, input, speaker, callContext(call, ids));
          answerWhenDurable(store, callback, { accepted: result.accepted, reason: result.reason });
        } catch (err) {
          if (err instanceof NegotiationError)
            return callback(null, { accepted: false, reason: `${err.code}: ${err.message}` });
          callback(failure(err));
        }
      },

      HitlAction: (
        call: grpc.ServerUnaryCall<{ negotiation_id?: string; action?: string; rationale?: string }, unknown>,
        callback: grpc.sendUnaryData<{ ok: boolean; reason: string }>,
      ) => {
        try {
          const id = idOf('negotiation_id', call.request.negotiation_id);
          const action = textOf('action', call.request.action, LIMITS.action);
          const rationale = textOf('rationale', call.request.rationale, LIMITS.rationale);
          const speaker = speakerOf(call, this.coordinator.credentials);
          const ctx = callContext(call, ids);
          const result = hitlActionFor(this.coordinator, id, action, rationale, speaker, ctx);
          answerWhenDurable(store, callback, { ok: result.ok, reason: result.reason });
        } catch (err) {
          if (err instanceof NegotiationError)
            return callback(null, { ok: false, reason: `${err.code}: ${err.message}` });
          callback(failure(err));
        }
      },
    };
  }
}
