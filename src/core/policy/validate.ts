import picomatch from 'picomatch';
import { compileSchemaText, schemaCompiler } from '../tools/descriptors';
import {
  HARD_BOUNDS, MAX_DEBATE_TIMEOUT_MS, MAX_PROFILES, MAX_PROPOSAL_SCHEMAS, MAX_TOPIC_GLOB_CHARS, MAX_VOTE_TIMEOUT_MS,
  MIN_DEBATE_TIMEOUT_MS, MIN_VOTE_TIMEOUT_MS, PROFILE_NAME, TIE_BREAKS,
} from './defaults';
import { DEBATE_INTENSITIES, HITL_GATES, type AgentPreferences, type Guardrails, type NegotiationPolicy, type PolicyProfile, type PolicySet, type RoomThresholds } from './model';
import { NegotiationError } from './speaker';

/**
 * Checks of everything the policy set holds. Each refusal is NegotiationError('invalid', 'VALIDATION_ERROR',
 * '<field>: <why>') with the proto field name (e.g. `policy.score_threshold: must be within 0..1, not 2`).
 */

export function refuse(field: string, why: string): NegotiationError {
  return new NegotiationError('invalid', 'VALIDATION_ERROR', `${field}: ${why}`);
}

/** A value for a message: short, never the whole of a long string. */
export function describe(value: unknown): string {
  const text = typeof value === 'string' ? `'${value.slice(0, 64)}${value.length > 64 ? '…' : ''}'` : JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** The numeric fields a preference may move, with their proto names; `integer` fields are whole numbers. */
export type PreferenceField = keyof AgentPreferences;
export const PREFERENCE_FIELDS: readonly { readonly key: PreferenceField; readonly proto: string; readonly integer: boolean; readonly stricter: 'lower' | 'higher' }[] = [
  { key: 'maxRounds', proto: 'max_rounds', integer: true, stricter: 'lower' },
  { key: 'scoreThreshold', proto: 'score_threshold', integer: false, stricter: 'higher' },
  { key: 'diffTolerance', proto: 'diff_tolerance', integer: false, stricter: 'lower' },
  { key: 'roundTimeoutMs', proto: 'round_timeout_ms', integer: true, stricter: 'lower' },
  { key: 'tokenBudgetPerRound', proto: 'token_budget_per_round', integer: true, stricter: 'lower' },
  { key: 'totalTokenBudget', proto: 'total_token_budget', integer: true, stricter: 'lower' },
  { key: 'oscillationLimit', proto: 'oscillation_limit', integer: true, stricter: 'lower' },
];

export const ROOM_FIELDS: readonly { readonly key: Exclude<keyof RoomThresholds, 'autoApprove'>; readonly proto: string; readonly min: number; readonly max: number; readonly integer: boolean }[] = [
  { key: 'minScoreThreshold', proto: 'min_score_threshold', min: 0, max: 10, integer: false },
  { key: 'minConfidenceThreshold', proto: 'min_confidence_threshold', min: 0, max: 1, integer: false },
  { key: 'minPassRatio', proto: 'min_pass_ratio', min: 0, max: 1, integer: false },
  { key: 'maxStdDev', proto: 'max_std_dev', min: 0, max: 10, integer: false },
  { key: 'escalateBelowConfidence', proto: 'escalate_below_confidence', min: 0, max: 1, integer: false },
  { key: 'escalateAboveStdDev', proto: 'escalate_above_std_dev', min: 0, max: 10, integer: false },
  { key: 'voteTimeoutMs', proto: 'vote_timeout_ms', min: MIN_VOTE_TIMEOUT_MS, max: MAX_VOTE_TIMEOUT_MS, integer: true },
];

/** A finite number (an integer when asked) within min..max; refused naming the field otherwise. */
export function checkNumber(field: string, value: unknown, min: number, max: number, integer: boolean, what = ''): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw refuse(field, `must be a number, not ${describe(value)}`);
  if (integer && !Number.isInteger(value)) throw refuse(field, `must be a whole number, not ${value}`);
  if (value < min || value > max) throw refuse(field, `must be within ${min}..${max}${what}, not ${value}`);
  return value;
}

function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw refuse(field, `must be true or false, not ${describe(value)}`);
  return value;
}

/** A whole policy: every field present, within the guardrails (total_token_budget may be 0 = unset). */
export function checkPolicy(field: string, policy: NegotiationPolicy, guardrails: Guardrails): void {
  if (policy === null || typeof policy !== 'object') throw refuse(field, 'must be a policy object');
  for (const f of PREFERENCE_FIELDS) {
    const value = policy[f.key];
    if (f.key === 'totalTokenBudget' && value === 0) continue;
    const g = guardrails[f.key];
    checkNumber(`${field}.${f.proto}`, value, g.min, g.max, f.integer, ' (the guardrails)');
  }
  if (!(HITL_GATES as readonly unknown[]).includes(policy.hitl)) {
    throw refuse(`${field}.hitl.mode`, `must be one of ${HITL_GATES.join(', ')}, not ${describe(policy.hitl)}`);
  }
  const scoring = policy.scoring;
  if (scoring === null || typeof scoring !== 'object') throw refuse(`${field}.scoring`, 'must be an object');
  checkBoolean(`${field}.scoring.require_schema_valid`, scoring.requireSchemaValid);
  checkBoolean(`${field}.scoring.require_examples_pass`, scoring.requireExamplesPass);
  checkNumber(`${field}.scoring.llm_weight`, scoring.llmWeight, 0, 1, false);
}

export function checkGuardrails(field: string, guardrails: Guardrails): void {
  for (const f of PREFERENCE_FIELDS) {
    const g = guardrails[f.key];
    const hard = HARD_BOUNDS[f.key];
    if (g === null || typeof g !== 'object') throw refuse(`${field}.${f.proto}`, 'must be {min, max}');
    checkNumber(`${field}.${f.proto}.min`, g.min, hard.min, hard.max, f.integer);
    checkNumber(`${field}.${f.proto}.max`, g.max, hard.min, hard.max, f.integer);
    if (g.min > g.max) throw refuse(`${field}.${f.proto}`, `min ${g.min} is above max ${g.max}`);
  }
}

export function checkRoom(field: string, room: RoomThresholds): void {
  for (const f of ROOM_FIELDS) checkNumber(`${field}.${f.proto}`, room[f.key], f.min, f.max, f.integer);
  checkBoolean(`${field}.auto_approve`, room.autoApprove);
}

export function checkProfileName(field: string, name: unknown): string {
  if (typeof name !== 'string' || !PROFILE_NAME.test(name)) {
    throw refuse(field, `must be 1..64 characters of A-Z a-z 0-9 _ . : -, not ${describe(name)}`);
  }
  return name;
}

export function checkDebateTimeout(field: string, value: unknown): number {
  return checkNumber(field, value, MIN_DEBATE_TIMEOUT_MS, MAX_DEBATE_TIMEOUT_MS, true);
}

export function checkProposalSchemas(field: string, list: PolicySet['proposalSchemas']): void {
  if (!Array.isArray(list)) throw refuse(field, 'must be a list of {topic, schema}');
  if (list.length > MAX_PROPOSAL_SCHEMAS) throw refuse(field, `holds more than ${MAX_PROPOSAL_SCHEMAS} entries (${list.length})`);
  const ajv = schemaCompiler();
  list.forEach((entry, i) => {
    const at = `${field}[${i}]`;
    if (entry === null || typeof entry !== 'object') throw refuse(at, 'must be {topic, schema}');
    if (typeof entry.topic !== 'string' || entry.topic.trim() === '') throw refuse(`${at}.topic`, 'must be a non-empty topic glob');
    if (entry.topic.length > MAX_TOPIC_GLOB_CHARS) throw refuse(`${at}.topic`, `is longer than ${MAX_TOPIC_GLOB_CHARS} characters`);
    try {
      picomatch(entry.topic);
    } catch (err) {
      throw refuse(`${at}.topic`, `is not a glob: ${(err as Error).message.slice(0, 120)}`);
    }
    if (typeof entry.schema !== 'string') throw refuse(`${at}.schema`, 'must be a JSON Schema (text)');
    const compiled = compileSchemaText(ajv, entry.schema, 'output');
    if (!compiled.ok) throw refuse(`${at}.schema`, `does not compile: ${compiled.why}`);
  });
}

/** The profiles: valid names, no duplicates, each policy within the guardrails, the five intensities present. */
export function checkProfiles(field: string, profiles: readonly PolicyProfile[], guardrails: Guardrails): void {
  if (profiles.length > MAX_PROFILES) throw refuse(field, `holds more than ${MAX_PROFILES} profiles (${profiles.length})`);
  const seen = new Set<string>();
  profiles.forEach((p, i) => {
    const name = checkProfileName(`${field}[${i}].name`, p?.name);
    if (seen.has(name)) throw refuse(`${field}[${i}].name`, `'${name}' is named twice`);
    seen.add(name);
    checkPolicy(`${field}[${i}].policy`, p.policy, guardrails);
  });
}

/** A whole candidate set (content only; version and provenance are the store's). */
export function checkSet(set: PolicySet): void {
  checkGuardrails('guardrails', set.guardrails);
  checkPolicy('policy', set.base, set.guardrails);
  checkProfiles('profiles', set.profiles, set.guardrails);
  const names = new Set(set.profiles.map((p) => p.name));
  for (const intensity of DEBATE_INTENSITIES) if (!names.has(intensity)) throw refuse('profiles', `the intensity profile ${intensity} cannot be removed`);
  for (const [name, ms] of Object.entries(set.debateTimeoutMs)) {
    if (!names.has(name)) throw refuse(`debate_timeout_ms.${name.slice(0, 64)}`, 'names no profile');
    checkDebateTimeout(`debate_timeout_ms.${name}`, ms);
  }
  checkDebateTimeout('base_debate_timeout_ms', set.baseDebateTimeoutMs);
  checkRoom('room', set.room);
  if (!TIE_BREAKS.includes(set.tieBreak)) throw refuse('tie_break', `must be one of ${TIE_BREAKS.join(', ')}, not ${describe(set.tieBreak)}`);
  checkProposalSchemas('proposal_schemas', set.proposalSchemas);
}
