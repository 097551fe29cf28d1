import { HARD_BOUNDS, MAX_DEBATE_TIMEOUT_MS, MAX_PROFILES, MIN_DEBATE_TIMEOUT_MS, TIE_BREAKS } from './defaults';
import { HITL_GATES, type HitlGate, type RoomThresholds, type TieBreak } from './model';
import type { PolicyPatch, PolicySettings } from './policies';
import { checkProfileName, checkProposalSchemas, describe, PREFERENCE_FIELDS, ROOM_FIELDS } from './validate';
import { NegotiationError } from './speaker';

/**
 * The negotiation policy as the editor's settings (sw4rm.negotiation.*) and the CLI's --negotiation-policy file write
 * it: proto field names inside each object (README, "Negotiation policy"). `parsePolicySettings` keeps every value it
 * can use and names each one it ignored; what only the whole can tell (a policy outside the guardrails) is
 * NegotiationPolicies.applySettings' refusal.
 */
export interface PolicySettingValues {
  /** NegotiationPolicy fields (proto names), plus `debate_timeout_ms`. */
  readonly basePolicy?: unknown;
  /** Profile name → NegotiationPolicy fields (plus `debate_timeout_ms`) laid over that profile. */
  readonly profiles?: unknown;
  /** Field (proto name) → {min, max}. */
  readonly guardrails?: unknown;
  /** min_score_threshold, min_confidence_threshold, min_pass_ratio, max_std_dev, escalate_below_confidence, escalate_above_std_dev, vote_timeout_ms, auto_approve. */
  readonly room?: unknown;
  readonly tieBreak?: unknown;
  /** [{topic, schema}], schema a JSON Schema object or its text. */
  readonly proposalSchemas?: unknown;
}

/** The keys of a PolicySettingValues object (the CLI file's top level). */
export const POLICY_SETTING_KEYS: readonly (keyof PolicySettingValues)[] = [
  'basePolicy',
  'profiles',
  'guardrails',
  'room',
  'tieBreak',
  'proposalSchemas',
];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `prefix` names where the values came from: `sw4rm.negotiation.` for settings, `<file>: ` for the CLI. */
export function parsePolicySettings(
  values: PolicySettingValues,
  prefix = 'sw4rm.negotiation.',
): { readonly settings: PolicySettings; readonly warnings: readonly string[] } {
  const warnings: string[] = [];
  const ignore = (name: string, why: string) => warnings.push(`${prefix}${name} ${why}; ignored.`);
  const settings: { -readonly [K in keyof PolicySettings]: PolicySettings[K] } = {};

  const number = (name: string, value: unknown, min: number, max: number, integer: boolean): number | undefined => {
    if (typeof value !== 'number' || !Number.isFinite(value))
      return void ignore(name, `is not a number (${describe(value)})`);
    if (integer && !Number.isInteger(value)) return void ignore(name, `is not a whole number (${value})`);
    if (value < min || value > max) return void ignore(name, `is outside ${min}..${max} (${value})`);
    return value;
  };

  const policyPatch = (name: string, raw: unknown): { patch: PolicyPatch; debateTimeoutMs?: number } | undefined => {
    if (!isObject(raw)) return void ignore(name, 'is not an object of policy fields');
    const patch: Record<string, unknown> = {};
    const scoring: Record<string, unknown> = {};
    let debateTimeoutMs: number | undefined;
    for (const [key, value] of Object.entries(raw)) {
      const field = PREFERENCE_FIELDS.find((f) => f.proto === key);
      if (field) {
        const hard = HARD_BOUNDS[field.key];
        const n = number(
          `${name}.${key}`,
          value,
          field.key === 'totalTokenBudget' ? 0 : hard.min,
          hard.max,
          field.integer,
        );
        if (n !== undefined) patch[field.key] = n;
      } else if (key === 'hitl') {
        const mode = isObject(value) ? value.mode : value;
        const gate = HITL_GATES.find((g) => typeof mode === 'string' && g.toLowerCase() === mode.trim().toLowerCase());
        if (gate) patch.hitl = gate as HitlGate;
        else ignore(`${name}.hitl`, `is not one of ${HITL_GATES.join(', ')} (${describe(mode)})`);
      } else if (key === 'scoring') {
        if (!isObject(value)) {
          ignore(`${name}.scoring`, 'is not an object');
          continue;
        }
        for (const [sk, sv] of Object.entries(value)) {
          if (sk === 'require_schema_valid' || sk === 'require_examples_pass') {
            if (typeof sv === 'boolean')
              scoring[sk === 'require_schema_valid' ? 'requireSchemaValid' : 'requireExamplesPass'] = sv;
            else ignore(`${name}.scoring.${sk}`, `is not true or false (${describe(sv)})`);
          } else if (sk === 'llm_weight') {
            const n = number(`${name}.scoring.llm_weight`, sv, 0, 1, false);
            if (n !== undefined) scoring.llmWeight = n;
          } else
            ignore(
              `${name}.scoring.${sk}`,
              'is not a scoring field (require_schema_valid, require_examples_pass, llm_weight)',
            );
        }
      } else if (key === 'debate_timeout_ms') {
        debateTimeoutMs = number(
          `${name}.debate_timeout_ms`,
          value,
          MIN_DEBATE_TIMEOUT_MS,
          MAX_DEBATE_TIMEOUT_MS,
          true,
        );
      } else {
        ignore(`${name}.${key}`, 'is not a policy field');
      }
    }
    if (Object.keys(scoring).length > 0) patch.scoring = scoring;
    return { patch: patch as PolicyPatch, debateTimeoutMs };
  };

  if (values.basePolicy !== undefined) {
    const base = policyPatch('basePolicy', values.basePolicy);
    if (base) {
      if (Object.keys(base.patch).length > 0) settings.base = base.patch;
      if (base.debateTimeoutMs !== undefined) settings.baseDebateTimeoutMs = base.debateTimeoutMs;
    }
  }

  if (values.profiles !== undefined) {
    if (!isObject(values.profiles)) ignore('profiles', 'is not an object of profile name → policy fields');
    else {
      const profiles: { name: string; policy: PolicyPatch }[] = [];
      const debateTimeoutMs: Record<string, number> = {};
      for (const [name, raw] of Object.entries(values.profiles)) {
        try {
          checkProfileName('name', name);
        } catch (err) {
          if (!(err instanceof NegotiationError)) throw err;
          ignore(
            `profiles["${name.slice(0, 64)}"]`,
            'is not a profile name (1..64 characters of A-Z a-z 0-9 _ . : -, not __proto__)',
          );
          continue;
        }
        if (profiles.length >= MAX_PROFILES) {
          ignore(`profiles["${name}"]`, `is past the ${MAX_PROFILES} profiles allowed`);
          continue;
        }
        const parsed = policyPatch(`profiles["${name}"]`, raw);
        if (!parsed) continue;
        profiles.push({ name, policy: parsed.patch });
        if (parsed.debateTimeoutMs !== undefined) debateTimeoutMs[name] = parsed.debateTimeoutMs;
      }
      if (profiles.length > 0) settings.profiles = profiles;
      if (Object.keys(debateTimeoutMs).length > 0) settings.debateTimeoutMs = debateTimeoutMs;
    }
  }

  if (values.guardrails !== undefined) {
    if (!isObject(values.guardrails)) ignore('guardrails', 'is not an object of field → {min, max}');
    else {
      const guardrails: Record<string, { min?: number; max?: number }> = {};
      for (const [key, raw] of Object.entries(values.guardrails)) {
        const field = PREFERENCE_FIELDS.find((f) => f.proto === key);
        if (!field) {
          ignore(`guardrails.${key}`, 'is not a policy field with guardrails');
          continue;
        }
        if (!isObject(raw)) {
          ignore(`guardrails.${key}`, 'is not {min, max}');
          continue;
        }
        const hard = HARD_BOUNDS[field.key];
        const bounds: { min?: number; max?: number } = {};
        for (const end of ['min', 'max'] as const) {
          if (raw[end] === undefined) continue;
          const n = number(`guardrails.${key}.${end}`, raw[end], hard.min, hard.max, field.integer);
          if (n !== undefined) bounds[end] = n;
        }
        if (bounds.min !== undefined || bounds.max !== undefined) guardrails[field.key] = bounds;
      }
      if (Object.keys(guardrails).length > 0) settings.guardrails = guardrails as PolicySettings['guardrails'];
    }
  }

  if (values.room !== undefined) {
    if (!isObject(values.room)) ignore('room', 'is not an object of room thresholds');
    else {
      const room: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(values.room)) {
        const field = ROOM_FIELDS.find((f) => f.proto === key);
        if (field) {
          const n = number(`room.${key}`, value, field.min, field.max, field.integer);
          if (n !== undefined) room[field.key] = n;
        } else if (key === 'auto_approve') {
          if (typeof value === 'boolean') room.autoApprove = value;
          else ignore('room.auto_approve', `is not true or false (${describe(value)})`);
        } else ignore(`room.${key}`, 'is not a room threshold');
      }
      if (Object.keys(room).length > 0) settings.room = room as Partial<RoomThresholds>;
    }
  }

  if (values.tieBreak !== undefined) {
    if (TIE_BREAKS.includes(values.tieBreak as TieBreak)) settings.tieBreak = values.tieBreak as TieBreak;
    else ignore('tieBreak', `is not one of ${TIE_BREAKS.join(', ')} (${describe(values.tieBreak)})`);
  }

  if (values.proposalSchemas !== undefined) {
    if (!Array.isArray(values.proposalSchemas)) ignore('proposalSchemas', 'is not a list of {topic, schema}');
    else {
      const list: { topic: string; schema: string }[] = [];
      values.proposalSchemas.forEach((raw: unknown, i) => {
        if (!isObject(raw)) return void ignore(`proposalSchemas[${i}]`, 'is not {topic, schema}');
        const schema =
          typeof raw.schema === 'string' ? raw.schema : isObject(raw.schema) ? JSON.stringify(raw.schema) : undefined;
        if (schema === undefined)
          return void ignore(`proposalSchemas[${i}].schema`, 'is not a JSON Schema (an object, or its text)');
        const entry = { topic: typeof raw.topic === 'string' ? raw.topic : '', schema };
        try {
          checkProposalSchemas('proposalSchemas', [entry]);
        } catch (err) {
          if (!(err instanceof NegotiationError)) throw err;
          return void warnings.push(
            `${prefix}${err.message.replace('proposalSchemas[0]', `proposalSchemas[${i}]`)}; ignored.`,
          );
        }
        list.push(entry);
      });
      // An empty list is a choice too: no proposal schemas.
      settings.proposalSchemas = list;
    }
  }

  return { settings, warnings };
}
