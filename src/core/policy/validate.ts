import { createHash } from 'node:crypto';
import picomatch from 'picomatch';
import { compileSchemaText } from '../tools/descriptors';
import {
  HARD_BOUNDS,
  MAX_DEBATE_TIMEOUT_MS,
  MAX_PROFILES,
  MAX_PROPOSAL_SCHEMAS,
  MAX_TOPIC_GLOB_CHARS,
  MAX_VOTE_TIMEOUT_MS,
  MIN_DEBATE_TIMEOUT_MS,
  MIN_VOTE_TIMEOUT_MS,
  PROFILE_NAME,
  TIE_BREAKS,
} from './defaults';
import {
  DEBATE_INTENSITIES,
  HITL_GATES,
  type Guardrails,
  type PreferenceField,
  type NegotiationPolicy,
  type PolicyProfile,
  type PolicySet,
  type RoomThresholds,
} from './model';
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
  const text =
    typeof value === 'string'
      ? `'${value.slice(0, 64)}${value.length > 64 ? '…' : ''}'`
      : (JSON.stringify(value) ?? String(value));
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** The numeric fields a preference may move (model.ts PreferenceField), with their proto names; `integer` fields are whole numbers. */
export const PREFERENCE_FIELDS: readonly {
  readonly key: PreferenceField;
  readonly proto: string;
  readonly integer: boolean;
  readonly stricter: 'lower' | 'higher';
}[] = [
  { key: 'maxRounds', proto: 'max_rounds', integer: true, stricter: 'lower' },
  { key: 'scoreThreshold', proto: 'score_threshold', integer: false, stricter: 'higher' },
  { key: 'diffTolerance', proto: 'diff_tolerance', integer: false, stricter: 'lower' },
  { key: 'roundTimeoutMs', proto: 'round_timeout_ms', integer: true, stricter: 'lower' },
  { key: 'tokenBudgetPerRound', proto: 'token_budget_per_round', integer: true, stricter: 'lower' },
  { key: 'totalTokenBudget', proto: 'total_token_budget', integer: true, stricter: 'lower' },
  { key: 'oscillationLimit', proto: 'oscillation_limit', integer: true, stricter: 'lower' },
];

export const ROOM_FIELDS: readonly {
  readonly key: Exclude<keyof RoomThresholds, 'autoApprove'>;
  readonly proto: string;
  readonly min: number;
  readonly max: number;
  readonly integer: boolean;
  readonly what?: string;
}[] = [
  { key: 'minScoreThreshold', proto: 'min_score_threshold', min: 0, max: 10, integer: false },
  { key: 'minConfidenceThreshold', proto: 'min_confidence_threshold', min: 0, max: 1, integer: false },
  { key: 'minPassRatio', proto: 'min_pass_ratio', min: 0, max: 1, integer: false },
  { key: 'maxStdDev', proto: 'max_std_dev', min: 0, max: 10, integer: false },
  {
    key: 'escalateBelowConfidence',
    proto: 'escalate_below_confidence',
    min: 0.3,
    max: 1,
    integer: false,
    what: ' (RFC §17.5 MUST: a vote below confidence 0.3 escalates; it may only be made stricter)',
  },
  {
    key: 'escalateAboveStdDev',
    proto: 'escalate_above_std_dev',
    min: 0,
    max: 3,
    integer: false,
    what: ' (RFC §17.5 MUST: a std_dev above 3.0 escalates; it may only be made stricter)',
  },
  { key: 'voteTimeoutMs', proto: 'vote_timeout_ms', min: MIN_VOTE_TIMEOUT_MS, max: MAX_VOTE_TIMEOUT_MS, integer: true },
];

/** A finite number (an integer when asked) within min..max; refused naming the field otherwise. */
export function checkNumber(
  field: string,
  value: unknown,
  min: number,
  max: number,
  integer: boolean,
  what = '',
): number {
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw refuse(field, `must be a number, not ${describe(value)}`);
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
  for (const f of ROOM_FIELDS) checkNumber(`${field}.${f.proto}`, room[f.key], f.min, f.max, f.integer, f.what);
  checkBoolean(`${field}.auto_approve`, room.autoApprove);
}

export function checkProfileName(field: string, name: unknown): string {
  if (typeof name !== 'string' || !PROFILE_NAME.test(name)) {
    throw refuse(field, `must be 1..64 characters of A-Z a-z 0-9 _ . : - (not __proto__), not ${describe(name)}`);
  }
  return name;
}

export function checkDebateTimeout(field: string, value: unknown): number {
  return checkNumber(field, value, MIN_DEBATE_TIMEOUT_MS, MAX_DEBATE_TIMEOUT_MS, true);
}

/** Wildcards (`*`, a run of `*` such as `**` counting once, and `?`) a topic glob may hold: in one path segment, in all. */
export const MAX_GLOB_WILDCARDS_PER_SEGMENT = 3;
export const MAX_GLOB_WILDCARDS = 4;
/** Brace groups `{a,b}` a topic glob may hold (not nested, no `{1..9}` ranges), and alternatives in each. */
export const MAX_GLOB_BRACE_GROUPS = 2;
export const MAX_GLOB_BRACE_ALTERNATIVES = 8;
/** The longest topic a proposal-schema glob is matched against: a longer topic gets no policy schema. */
export const MAX_MATCHED_TOPIC_CHARS = 256;
/** All proposal schemas' text together (each is also bounded by the schema's own limit). */
export const MAX_PROPOSAL_SCHEMAS_TOTAL_BYTES = 256 * 1024;

/**
 * Why a topic glob could make matching slow (picomatch compiles a glob to a backtracking regex: many wildcards, or an
 * extglob, against a long topic take seconds to minutes), or undefined when it is safe.
 */
export function unsafeGlobReason(glob: string): string | undefined {
  if (/[+*@?!]\(/.test(glob)) return 'may not use extglobs (+( *( @( ?( !( )';
  let total = 0;
  let groups = 0;
  for (const segment of glob.split('/')) {
    const count = (segment.match(/\*+|\?/g) ?? []).length;
    if (count > MAX_GLOB_WILDCARDS_PER_SEGMENT)
      return `holds ${count} wildcards (* or ?) in one path segment; at most ${MAX_GLOB_WILDCARDS_PER_SEGMENT}`;
    total += count;
  }
  if (total > MAX_GLOB_WILDCARDS) return `holds ${total} wildcards (* or ?); at most ${MAX_GLOB_WILDCARDS}`;
  let depth = 0;
  let alternatives = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '{') {
      if (depth > 0) return 'may not nest braces';
      depth = 1;
      groups++;
      alternatives = 1;
      if (groups > MAX_GLOB_BRACE_GROUPS) return `holds more than ${MAX_GLOB_BRACE_GROUPS} brace groups`;
    } else if (c === '}' && depth > 0) {
      depth = 0;
    } else if (c === ',' && depth > 0) {
      if (++alternatives > MAX_GLOB_BRACE_ALTERNATIVES)
        return `holds a brace group of more than ${MAX_GLOB_BRACE_ALTERNATIVES} alternatives`;
    } else if (c === '.' && depth > 0 && glob[i + 1] === '.') {
      return 'may not use brace ranges ({a..z})';
    }
  }
  return undefined;
}

/** A topic glob: non-empty, bounded, safe to match (unsafeGlobReason), and one picomatch compiles. */
export function checkTopicGlob(field: string, topic: unknown): string {
  if (typeof topic !== 'string' || topic.trim() === '') throw refuse(field, 'must be a non-empty topic glob');
  if (topic.length > MAX_TOPIC_GLOB_CHARS) throw refuse(field, `is longer than ${MAX_TOPIC_GLOB_CHARS} characters`);
  const unsafe = unsafeGlobReason(topic);
  if (unsafe !== undefined) throw refuse(field, unsafe);
  try {
    picomatch(topic);
  } catch (err) {
    throw refuse(field, `is not a glob: ${(err as Error).message.slice(0, 120)}`);
  }
  return topic;
}

/** The verdicts on schema texts already compiled, by sha256 of the text (most recently used last; bounded). */
const schemaVerdicts = new Map<string, string | undefined>();
const MAX_SCHEMA_VERDICTS = 256;
let schemaCompilations = 0;

/** How many proposal schemas were compiled since the process started (a cached verdict does not count). */
export function proposalSchemaCompilations(): number {
  return schemaCompilations;
}

/** Why a proposal schema's text does not compile, or undefined; each distinct text is compiled once (cached by digest). */
function proposalSchemaRefusal(text: string): string | undefined {
  const key = createHash('sha256').update(text).digest('hex');
  if (schemaVerdicts.has(key)) {
    const verdict = schemaVerdicts.get(key);
    schemaVerdicts.delete(key);
    schemaVerdicts.set(key, verdict);
    return verdict;
  }
  schemaCompilations++;
  const compiled = compileSchemaText(text, 'output');
  const verdict = compiled.ok ? undefined : compiled.why;
  schemaVerdicts.set(key, verdict);
  if (schemaVerdicts.size > MAX_SCHEMA_VERDICTS) schemaVerdicts.delete(schemaVerdicts.keys().next().value as string);
  return verdict;
}

export function checkProposalSchemas(field: string, list: PolicySet['proposalSchemas']): void {
  if (!Array.isArray(list)) throw refuse(field, 'must be a list of {topic, schema}');
  if (list.length > MAX_PROPOSAL_SCHEMAS)
    throw refuse(field, `holds more than ${MAX_PROPOSAL_SCHEMAS} entries (${list.length})`);
  let bytes = 0;
  list.forEach((entry, i) => {
    const at = `${field}[${i}]`;
    if (entry === null || typeof entry !== 'object') throw refuse(at, 'must be {topic, schema}');
    checkTopicGlob(`${at}.topic`, entry.topic);
    if (typeof entry.schema !== 'string') throw refuse(`${at}.schema`, 'must be a JSON Schema (text)');
    bytes += Buffer.byteLength(entry.schema);
    if (bytes > MAX_PROPOSAL_SCHEMAS_TOTAL_BYTES)
      throw refuse(field, `holds more than ${MAX_PROPOSAL_SCHEMAS_TOTAL_BYTES / 1024} KiB of schemas in all`);
  });
  list.forEach((entry, i) => {
    const why = proposalSchemaRefusal(entry.schema);
    if (why !== undefined) throw refuse(`${field}[${i}].schema`, `does not compile: ${why}`);
  });
}

/** The profiles: valid names, no duplicates, each policy within the guardrails, the five intensities present. */
export function checkProfiles(field: string, profiles: readonly PolicyProfile[], guardrails: Guardrails): void {
  if (profiles.length > MAX_PROFILES)
    throw refuse(field, `holds more than ${MAX_PROFILES} profiles (${profiles.length})`);
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
  for (const intensity of DEBATE_INTENSITIES)
    if (!names.has(intensity)) throw refuse('profiles', `the intensity profile ${intensity} cannot be removed`);
  for (const [name, ms] of Object.entries(set.debateTimeoutMs)) {
    if (!names.has(name)) throw refuse(`debate_timeout_ms.${name.slice(0, 64)}`, 'names no profile');
    checkDebateTimeout(`debate_timeout_ms.${name}`, ms);
  }
  checkDebateTimeout('base_debate_timeout_ms', set.baseDebateTimeoutMs);
  checkRoom('room', set.room);
  if (!TIE_BREAKS.includes(set.tieBreak))
    throw refuse('tie_break', `must be one of ${TIE_BREAKS.join(', ')}, not ${describe(set.tieBreak)}`);
  checkProposalSchemas('proposal_schemas', set.proposalSchemas);
}
