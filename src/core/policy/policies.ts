import picomatch from 'picomatch';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { EventLog } from '../log/eventLog';
import {
  DEFAULT_BASE_DEBATE_TIMEOUT_MS,
  DEFAULT_BASE_POLICY,
  DEFAULT_DEBATE_TIMEOUT_MS,
  DEFAULT_GUARDRAILS,
  DEFAULT_PROFILES,
  DEFAULT_ROOM_THRESHOLDS,
  DEFAULT_TIE_BREAK,
  MAX_DEBATE_TIMEOUT_MS,
} from './defaults';
import type {
  AgentPreferences,
  EffectiveInput,
  EffectivePolicy,
  Guardrails,
  NegotiationPolicy,
  PolicyProfile,
  PolicyReader,
  PolicySet,
  PolicyStorage,
  RoomThresholds,
  TieBreak,
} from './model';
import { NegotiationError } from './speaker';
import {
  checkPolicy,
  checkProfiles,
  checkSet,
  describe,
  MAX_MATCHED_TOPIC_CHARS,
  PREFERENCE_FIELDS,
  refuse,
  ROOM_FIELDS,
  unsafeGlobReason,
} from './validate';

/** Part of a policy: the fields given replace the policy's (scoring field by field). */
export type PolicyPatch = { readonly [K in Exclude<keyof NegotiationPolicy, 'scoring'>]?: NegotiationPolicy[K] } & {
  readonly scoring?: Partial<NegotiationPolicy['scoring']>;
};

/**
 * What the editor's settings (sw4rm.negotiation.*) and the CLI may set; every field optional. At start the settings
 * are laid over the newest stored version (a field they set wins; a field they do not set keeps its stored value);
 * after that, applySettings lays over the newest version only the fields that differ from the settings last applied,
 * so an RPC's change stays until the setting naming that field changes.
 */
export interface PolicySettings {
  readonly base?: PolicyPatch;
  /** The debate time limit when the base policy applies (no intensity, no hint). */
  readonly baseDebateTimeoutMs?: number;
  /** Each named profile's fields laid over that profile (a new name: over the base policy). */
  readonly profiles?: readonly { readonly name: string; readonly policy: PolicyPatch }[];
  readonly debateTimeoutMs?: Readonly<Record<string, number>>;
  readonly guardrails?: { readonly [K in keyof Guardrails]?: Partial<Guardrails[K]> };
  readonly room?: Partial<RoomThresholds>;
  readonly tieBreak?: TieBreak;
  /** Replaces the whole list when given. */
  readonly proposalSchemas?: readonly { readonly topic: string; readonly schema: string }[];
}

export type { EffectiveInput } from './model';

/** The most agents whose preferences one Open may carry, and the longest agent id among them. */
export const MAX_PREFERENCE_AGENTS = 64;
export const MAX_PREFERENCE_AGENT_ID = 256;

const ACTOR = 'policy';
const POLICY_SET = 'negotiation.policy_set';

type Content = Omit<PolicySet, 'version' | 'setBy' | 'setAt'>;

/** The defaults as a set's content (README, "Negotiation policy"). */
export function defaultPolicyContent(): Content {
  return {
    base: DEFAULT_BASE_POLICY,
    profiles: DEFAULT_PROFILES,
    debateTimeoutMs: { ...DEFAULT_DEBATE_TIMEOUT_MS },
    baseDebateTimeoutMs: DEFAULT_BASE_DEBATE_TIMEOUT_MS,
    guardrails: DEFAULT_GUARDRAILS,
    room: DEFAULT_ROOM_THRESHOLDS,
    tieBreak: DEFAULT_TIE_BREAK,
    proposalSchemas: [],
  };
}

/** A record's own value for `key` (never one inherited from Object.prototype, such as `constructor`). */
function own<T>(record: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

/** An object without its undefined fields (so that spreading a patch never writes undefined). */
function defined<T extends object>(patch: T | undefined): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(patch ?? {})) if (v !== undefined) out[k] = v;
  return out as Partial<T>;
}

function policyOf(p: NegotiationPolicy): NegotiationPolicy {
  return {
    maxRounds: p.maxRounds,
    scoreThreshold: p.scoreThreshold,
    diffTolerance: p.diffTolerance,
    roundTimeoutMs: p.roundTimeoutMs,
    tokenBudgetPerRound: p.tokenBudgetPerRound,
    totalTokenBudget: p.totalTokenBudget,
    oscillationLimit: p.oscillationLimit,
    hitl: p.hitl,
    scoring: {
      requireSchemaValid: p.scoring?.requireSchemaValid,
      requireExamplesPass: p.scoring?.requireExamplesPass,
      llmWeight: p.scoring?.llmWeight,
    },
  } as NegotiationPolicy;
}

function patched(policy: NegotiationPolicy, patch: PolicyPatch | undefined): NegotiationPolicy {
  if (!patch) return policy;
  const { scoring, ...rest } = patch;
  return policyOf({
    ...policy,
    ...defined(rest),
    scoring: { ...policy.scoring, ...defined(scoring) },
  } as NegotiationPolicy);
}

/** The content in one fixed shape and key order (so that two equal sets serialise equally). */
function canonical(c: Content): Content {
  const profiles = c.profiles.map((p) => ({ name: p.name, policy: policyOf(p.policy) }));
  const debateTimeoutMs: Record<string, number> = {};
  for (const p of profiles) {
    const ms = own(c.debateTimeoutMs, p.name);
    if (ms !== undefined) debateTimeoutMs[p.name] = ms;
  }
  for (const [k, v] of Object.entries(c.debateTimeoutMs))
    if (!Object.hasOwn(debateTimeoutMs, k)) debateTimeoutMs[k] = v; // refused by checkSet
  const guardrails = {} as Record<keyof Guardrails, { min: number; max: number }>;
  for (const f of PREFERENCE_FIELDS)
    guardrails[f.key] = { min: c.guardrails[f.key]?.min, max: c.guardrails[f.key]?.max };
  const room = {} as Record<string, unknown>;
  for (const f of ROOM_FIELDS) room[f.key] = c.room[f.key];
  room.autoApprove = c.room.autoApprove;
  return {
    base: policyOf(c.base),
    profiles,
    debateTimeoutMs,
    baseDebateTimeoutMs: c.baseDebateTimeoutMs,
    guardrails,
    room: room as unknown as RoomThresholds,
    tieBreak: c.tieBreak,
    proposalSchemas: c.proposalSchemas.map((s) => ({ topic: s.topic, schema: s.schema })),
  };
}

function contentOf(set: PolicySet): Content {
  const { version, setBy, setAt, ...content } = set;
  void version;
  void setBy;
  void setAt;
  return content;
}

/** A stored record read with today's shape: a field an older version lacks takes its default. */
function fromStored(raw: PolicySet): PolicySet {
  const d = defaultPolicyContent();
  const content = canonical({
    ...d,
    ...defined(contentOf(raw)),
    guardrails: { ...d.guardrails, ...defined(raw.guardrails) },
    room: { ...d.room, ...defined(raw.room) },
  } as Content);
  return { version: raw.version, ...content, setBy: raw.setBy, setAt: raw.setAt };
}

function overlay(c: Content, settings: PolicySettings): Content {
  const base = patched(c.base, settings.base);
  const profiles = c.profiles.map((p) => ({ name: p.name, policy: p.policy }));
  for (const s of settings.profiles ?? []) {
    const at = profiles.findIndex((p) => p.name === s.name);
    if (at >= 0) profiles[at] = { name: s.name, policy: patched(profiles[at].policy, s.policy) };
    else profiles.push({ name: s.name, policy: patched(base, s.policy) });
  }
  const guardrails = { ...c.guardrails } as Record<keyof Guardrails, { min: number; max: number }>;
  for (const f of PREFERENCE_FIELDS)
    guardrails[f.key] = { ...c.guardrails[f.key], ...defined(settings.guardrails?.[f.key]) };
  return canonical({
    base,
    profiles,
    debateTimeoutMs: { ...c.debateTimeoutMs, ...defined(settings.debateTimeoutMs) } as Record<string, number>,
    baseDebateTimeoutMs: settings.baseDebateTimeoutMs ?? c.baseDebateTimeoutMs,
    guardrails,
    room: { ...c.room, ...defined(settings.room) },
    tieBreak: settings.tieBreak ?? c.tieBreak,
    proposalSchemas: settings.proposalSchemas ?? c.proposalSchemas,
  });
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The fields of `next` whose value differs from `prev`'s (a field `next` lacks is not in the result). */
function changedFields<T extends object>(prev: T | undefined, next: T | undefined): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(next ?? {})) {
    if (v !== undefined && !same(own(prev as Record<string, unknown> | undefined, k), v)) out[k] = v;
  }
  return out as Partial<T>;
}

function patchChanges(prev: PolicyPatch | undefined, next: PolicyPatch): PolicyPatch {
  const { scoring, ...rest } = next;
  const out: Record<string, unknown> = changedFields(
    prev as Record<string, unknown> | undefined,
    rest as Record<string, unknown>,
  );
  const scoringChanged = changedFields(prev?.scoring, scoring);
  if (Object.keys(scoringChanged).length > 0) out.scoring = scoringChanged;
  return out as PolicyPatch;
}

/**
 * What differs in `next` from the settings last applied (`prev`): only those fields, so that laying the result over
 * the newest version leaves every other field as it is (an RPC's change to a field no changed setting names stays).
 * A field `next` no longer names is not in the result (the stored value stays). A profile `prev` lacked is in it even
 * with no field (it is created).
 */
export function settingsChanges(prev: PolicySettings, next: PolicySettings): PolicySettings {
  const out: { -readonly [K in keyof PolicySettings]: PolicySettings[K] } = {};
  const base = next.base ? patchChanges(prev.base, next.base) : {};
  if (Object.keys(base).length > 0) out.base = base;
  if (next.baseDebateTimeoutMs !== undefined && next.baseDebateTimeoutMs !== prev.baseDebateTimeoutMs)
    out.baseDebateTimeoutMs = next.baseDebateTimeoutMs;
  const profiles: { name: string; policy: PolicyPatch }[] = [];
  for (const p of next.profiles ?? []) {
    const before = prev.profiles?.find((q) => q.name === p.name);
    const policy = patchChanges(before?.policy, p.policy);
    if (!before || Object.keys(policy).length > 0) profiles.push({ name: p.name, policy });
  }
  if (profiles.length > 0) out.profiles = profiles;
  const debateTimeoutMs = changedFields(prev.debateTimeoutMs, next.debateTimeoutMs);
  if (Object.keys(debateTimeoutMs).length > 0) out.debateTimeoutMs = debateTimeoutMs as Record<string, number>;
  const guardrails: Record<string, unknown> = {};
  for (const f of PREFERENCE_FIELDS) {
    const g = changedFields(prev.guardrails?.[f.key], next.guardrails?.[f.key]);
    if (Object.keys(g).length > 0) guardrails[f.key] = g;
  }
  if (Object.keys(guardrails).length > 0) out.guardrails = guardrails as PolicySettings['guardrails'];
  const room = changedFields(prev.room, next.room);
  if (Object.keys(room).length > 0) out.room = room;
  if (next.tieBreak !== undefined && next.tieBreak !== prev.tieBreak) out.tieBreak = next.tieBreak;
  if (next.proposalSchemas !== undefined && !same(next.proposalSchemas, prev.proposalSchemas))
    out.proposalSchemas = next.proposalSchemas;
  return out;
}

function policyChanges(prefix: string, a: NegotiationPolicy, b: NegotiationPolicy): string[] {
  const out: string[] = [];
  for (const f of PREFERENCE_FIELDS) if (a[f.key] !== b[f.key]) out.push(`${prefix}.${f.proto}`);
  if (a.hitl !== b.hitl) out.push(`${prefix}.hitl.mode`);
  if (a.scoring.requireSchemaValid !== b.scoring.requireSchemaValid) out.push(`${prefix}.scoring.require_schema_valid`);
  if (a.scoring.requireExamplesPass !== b.scoring.requireExamplesPass)
    out.push(`${prefix}.scoring.require_examples_pass`);
  if (a.scoring.llmWeight !== b.scoring.llmWeight) out.push(`${prefix}.scoring.llm_weight`);
  return out;
}

/** What differs between two sets, as proto-style paths (`policy.max_rounds`, `profiles.HIGH.score_threshold`, `room.min_pass_ratio`…). */
export function policyChangesBetween(a: Content, b: Content): string[] {
  const out = policyChanges('policy', a.base, b.base);
  const names = [...new Set([...a.profiles.map((p) => p.name), ...b.profiles.map((p) => p.name)])];
  for (const name of names) {
    const pa = a.profiles.find((p) => p.name === name);
    const pb = b.profiles.find((p) => p.name === name);
    if (!pa || !pb) out.push(`profiles.${name}`);
    else out.push(...policyChanges(`profiles.${name}`, pa.policy, pb.policy));
  }
  for (const name of new Set([...Object.keys(a.debateTimeoutMs), ...Object.keys(b.debateTimeoutMs)])) {
    if (own(a.debateTimeoutMs, name) !== own(b.debateTimeoutMs, name)) out.push(`debate_timeout_ms.${name}`);
  }
  if (a.baseDebateTimeoutMs !== b.baseDebateTimeoutMs) out.push('base_debate_timeout_ms');
  for (const f of PREFERENCE_FIELDS)
    if (!same(a.guardrails[f.key], b.guardrails[f.key])) out.push(`guardrails.${f.proto}`);
  for (const f of ROOM_FIELDS) if (a.room[f.key] !== b.room[f.key]) out.push(`room.${f.proto}`);
  if (a.room.autoApprove !== b.room.autoApprove) out.push('room.auto_approve');
  if (a.tieBreak !== b.tieBreak) out.push('tie_break');
  if (!same(a.proposalSchemas, b.proposalSchemas)) out.push('proposal_schemas');
  return out;
}

const MAX_CHANGES_LOGGED = 64;

/**
 * The negotiation policy area (RFC §17.2): the versioned PolicySet (persisted, one version per change, each logged as
 * `negotiation.policy_set`), the five intensity profiles, clamping agent preferences into an EffectivePolicy, the room
 * thresholds, the tie-break rule and the proposal schemas by topic.
 */
export class NegotiationPolicies implements PolicyReader, Disposable {
  private readonly changed = new Emitter<PolicySet>();
  /** Fires after a new version is committed. */
  readonly onDidChange: Event<PolicySet> = this.changed.event;
  private latest: PolicySet;
  /** The settings last applied (at start: those given, when accepted): applySettings lays over only what differs from them. */
  private appliedSettings: PolicySettings = {};
  /** The proposal-schema topic globs of `latest`, compiled once per version. */
  private matchers:
    | {
        readonly set: PolicySet;
        readonly list: readonly { readonly match: (topic: string) => boolean; readonly schema: string }[];
      }
    | undefined;
  /** Why the settings given at construction were not applied (the newest stored version, or the defaults, stayed), or undefined. */
  readonly settingsRefusal: string | undefined;

  constructor(
    protected readonly deps: { readonly store: PolicyStorage; readonly log: EventLog; readonly clock: Clock },
    settings: PolicySettings = {},
  ) {
    const stored = deps.store.policy.latest();
    const ctx: CallContext = { correlationId: 'negotiation-policy' };
    let refusal: string | undefined;
    if (stored === undefined) {
      const defaults = canonical(defaultPolicyContent());
      let content = defaults;
      try {
        content = this.checked(overlay(defaults, settings));
      } catch (err) {
        if (!(err instanceof NegotiationError)) throw err;
        refusal = err.message;
        content = defaults;
      }
      const setBy = same(content, defaults) ? 'default' : 'settings';
      this.latest = { version: 0, ...defaults, setBy: '', setAt: 0 };
      this.write(content, setBy, ctx, setBy === 'default' ? [] : policyChangesBetween(defaults, content));
    } else {
      this.latest = fromStored(stored);
      try {
        this.applyContent(overlay(contentOf(this.latest), settings), 'settings', ctx);
      } catch (err) {
        if (!(err instanceof NegotiationError)) throw err;
        refusal = err.message;
      }
    }
    this.settingsRefusal = refusal;
    if (refusal === undefined) this.appliedSettings = settings;
    if (refusal !== undefined) {
      deps.log.record({
        correlationId: ctx.correlationId,
        actor: ACTOR,
        eventType: 'negotiation.policy_settings_refused',
        level: 'WARN',
        details: { reason: refusal, version: this.latest.version },
      });
    }
  }

  /** The policy set in force (the newest version). */
  current(): PolicySet {
    return this.latest;
  }

  /** An older (or the current) version, for audit: every decision records `v<N>`. */
  version(n: number): PolicySet | undefined {
    if (n === this.latest.version) return this.latest;
    if (!Number.isInteger(n) || n < 1) return undefined;
    const raw = this.deps.store.policy.get(n);
    return raw ? fromStored(raw) : undefined;
  }

  /** SetNegotiationPolicy: a new version with this base policy; NegotiationError 'invalid' naming the field. */
  setBase(policy: NegotiationPolicy, by: string, ctx: CallContext): PolicySet {
    checkPolicy('policy', policy, this.latest.guardrails);
    return this.applyContent(canonical({ ...contentOf(this.latest), base: policy }), by, ctx);
  }

  /** SetPolicyProfiles: replaces the named profiles (others kept, so the five intensities cannot be removed). */
  setProfiles(profiles: readonly PolicyProfile[], by: string, ctx: CallContext): PolicySet {
    if (!Array.isArray(profiles)) throw refuse('profiles', 'must be a list');
    checkProfiles('profiles', profiles, this.latest.guardrails);
    const next = this.latest.profiles.map((p) => ({ name: p.name, policy: p.policy }));
    for (const p of profiles) {
      const at = next.findIndex((q) => q.name === p.name);
      if (at >= 0) next[at] = { name: p.name, policy: p.policy };
      else next.push({ name: p.name, policy: p.policy });
    }
    return this.applyContent(canonical({ ...contentOf(this.latest), profiles: next }), by, ctx);
  }

  /**
   * The editor's settings changed: the fields that differ from the settings last applied are laid over the newest
   * version (a new version when that changes anything). A field whose setting did not change keeps its value, even
   * one an RPC changed since. Refused as a whole (NegotiationError naming the field): nothing changes, and the next
   * call compares with the settings last applied.
   */
  applySettings(settings: PolicySettings, ctx: CallContext): PolicySet {
    const set = this.applyContent(
      overlay(contentOf(this.latest), settingsChanges(this.appliedSettings, settings)),
      'settings',
      ctx,
    );
    this.appliedSettings = settings;
    return set;
  }

  /**
   * On Open: the EffectivePolicy and the proposal schema ('' = none) for a negotiation. The base is the profile the
   * hint names (exact name, else case-insensitive), else the intensity's profile, else the base policy. Each agent's
   * preferences (0 = none) are clamped into the guardrails; for each field some agent stated, the most restrictive
   * stated value wins (the lowest max_rounds, round_timeout_ms, token budgets, oscillation_limit and diff_tolerance;
   * the highest score_threshold) and replaces the profile's value; the result is clamped into the guardrails again.
   */
  effectiveFor(input: EffectiveInput): { readonly effective: EffectivePolicy; readonly schema: string } {
    const set = this.latest;
    const g = set.guardrails;
    const profile =
      this.profileFor(input.profileHint) ??
      (input.intensity ? set.profiles.find((p) => p.name === input.intensity) : undefined);
    const base = profile?.policy ?? set.base;
    const applied: [string, AgentPreferences][] = [];
    const chosen: Partial<Record<keyof AgentPreferences, number>> = {};
    const agents = Object.keys(input.preferences ?? {});
    if (agents.length > MAX_PREFERENCE_AGENTS)
      throw refuse('preferences', `names more than ${MAX_PREFERENCE_AGENTS} agents (${agents.length})`);
    for (const agent of agents) {
      if (agent.length === 0 || agent.length > MAX_PREFERENCE_AGENT_ID)
        throw refuse('preferences', `an agent id must be 1..${MAX_PREFERENCE_AGENT_ID} characters (${agent.length})`);
      const prefs = input.preferences[agent] ?? {};
      if (prefs === null || typeof prefs !== 'object' || Array.isArray(prefs))
        throw refuse(`preferences.${agent.slice(0, 64)}`, 'must be an AgentPreferences object');
      const clamped = {
        maxRounds: 0,
        scoreThreshold: 0,
        diffTolerance: 0,
        roundTimeoutMs: 0,
        tokenBudgetPerRound: 0,
        totalTokenBudget: 0,
        oscillationLimit: 0,
      } as Record<keyof AgentPreferences, number>;
      let stated = false;
      for (const f of PREFERENCE_FIELDS) {
        const value = prefs[f.key];
        if (value === undefined || value === null || value === 0) continue;
        if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
          throw refuse(
            `preferences.${agent.slice(0, 64)}.${f.proto}`,
            `must be a non-negative number (0 = no preference), not ${describe(value)}`,
          );
        }
        const v = clamp(value, g[f.key], f.integer);
        clamped[f.key] = v;
        stated = true;
        const prior = chosen[f.key];
        chosen[f.key] = prior === undefined ? v : f.stricter === 'lower' ? Math.min(prior, v) : Math.max(prior, v);
      }
      if (stated) applied.push([agent, clamped]);
    }
    const merged = { ...base } as Record<string, unknown>;
    for (const f of PREFERENCE_FIELDS) {
      const value = chosen[f.key] ?? base[f.key];
      merged[f.key] = f.key === 'totalTokenBudget' && value === 0 ? 0 : clamp(value, g[f.key], f.integer);
    }
    const policy = policyOf(merged as unknown as NegotiationPolicy);
    const ownTimeout = profile
      ? (own(set.debateTimeoutMs, profile.name) ?? set.baseDebateTimeoutMs)
      : set.baseDebateTimeoutMs;
    const asked =
      Number.isFinite(input.debateTimeoutMs) && input.debateTimeoutMs > 0
        ? Math.min(Math.ceil(input.debateTimeoutMs), MAX_DEBATE_TIMEOUT_MS)
        : 0;
    return {
      effective: {
        policy,
        applied: Object.fromEntries(applied),
        profile: profile?.name ?? '',
        policyVersion: `v${set.version}`,
        debateTimeoutMs: asked > 0 ? asked : ownTimeout,
      },
      schema: input.topic !== undefined ? this.schemaFor(input.topic) : '',
    };
  }

  /**
   * The first proposal schema whose topic glob matches `topic`, '' when none. A topic longer than
   * MAX_MATCHED_TOPIC_CHARS matches no glob; the globs are compiled once per version, and one that is not safe to
   * match (a version stored before the check) matches nothing.
   */
  schemaFor(topic: string): string {
    if (topic.length > MAX_MATCHED_TOPIC_CHARS) return '';
    for (const entry of this.matchersOf(this.latest)) {
      if (entry.match(topic)) return entry.schema;
    }
    return '';
  }

  private matchersOf(
    set: PolicySet,
  ): readonly { readonly match: (topic: string) => boolean; readonly schema: string }[] {
    if (this.matchers?.set === set) return this.matchers.list;
    const list: { match: (topic: string) => boolean; schema: string }[] = [];
    for (const entry of set.proposalSchemas) {
      if (unsafeGlobReason(entry.topic) !== undefined) continue;
      try {
        list.push({ match: picomatch(entry.topic, { dot: true }), schema: entry.schema });
      } catch {
        // Not a glob (refused when set): matches nothing.
      }
    }
    this.matchers = { set, list };
    return list;
  }

  dispose(): void {
    this.changed.dispose();
  }

  /** The profile a hint names (exact, else case-insensitive), or undefined. */
  private profileFor(hint: string): PolicyProfile | undefined {
    if (!hint) return undefined;
    const profiles = this.latest.profiles;
    return profiles.find((p) => p.name === hint) ?? profiles.find((p) => p.name.toLowerCase() === hint.toLowerCase());
  }

  private checked(content: Content): Content {
    checkSet({ version: 0, ...content, setBy: '', setAt: 0 });
    return content;
  }

  /** Writes `content` as the next version when it differs from the newest; the newest otherwise. */
  private applyContent(content: Content, by: string, ctx: CallContext): PolicySet {
    const checked = this.checked(canonical(content));
    const changes = policyChangesBetween(contentOf(this.latest), checked);
    if (changes.length === 0) return this.latest;
    return this.write(checked, by, ctx, changes);
  }

  private write(content: Content, setBy: string, ctx: CallContext, changes: readonly string[]): PolicySet {
    const set: PolicySet = { version: this.latest.version + 1, ...content, setBy, setAt: this.deps.clock.now() };
    this.deps.store.transaction(() => {
      this.deps.store.policy.put(set);
      this.deps.log.record({
        correlationId: ctx.correlationId,
        actor: ACTOR,
        eventType: POLICY_SET,
        details: {
          version: set.version,
          policy_version: `v${set.version}`,
          set_by: setBy,
          ...(ctx.principal ? { principal: ctx.principal } : {}),
          changed: changes.slice(0, MAX_CHANGES_LOGGED),
          ...(changes.length > MAX_CHANGES_LOGGED ? { changed_total: changes.length } : {}),
        },
      });
    });
    this.latest = set;
    this.deps.store.afterCommit(() => this.changed.fire(set));
    return set;
  }
}

function clamp(value: number, bounds: { readonly min: number; readonly max: number }, integer: boolean): number {
  const v = Math.min(bounds.max, Math.max(bounds.min, value));
  return integer ? Math.min(bounds.max, Math.max(bounds.min, Math.round(v))) : v;
}
