import { parseBoundedJson } from '../json';
import type { AgentPreferences } from './model';
import { MAX_PREFERENCE_AGENT_ID, MAX_PREFERENCE_AGENTS } from './policies';
import { describe, PREFERENCE_FIELDS, refuse } from './validate';

/** The largest `sw4rm-negotiation-preferences` metadata value read (64 agents of seven numbers fit many times over). */
export const MAX_PREFERENCES_JSON_BYTES = 64 * 1024;

/**
 * Open's `sw4rm-negotiation-preferences` metadata (README, "Negotiation policy"): a JSON object, agent id →
 * AgentPreferences with proto field names (`max_rounds`, `score_threshold`, …; 0 or absent = no preference). Unknown
 * fields are ignored (RFC §17.1: receivers ignore unknown fields). '' = none. A value that is not a non-negative
 * number, too many agents, or text that is not such an object is NegotiationError('invalid', 'VALIDATION_ERROR',
 * 'preferences…: …'). Clamping is effectiveFor's.
 */
export function parseAgentPreferences(text: string): Record<string, Partial<AgentPreferences>> {
  if (text.trim() === '') return {};
  const parsed = parseBoundedJson(text, {
    what: 'sw4rm-negotiation-preferences',
    maxBytes: MAX_PREFERENCES_JSON_BYTES,
    maxDepth: 4,
  });
  if (!parsed.ok) throw refuse('preferences', parsed.reason);
  const value = parsed.value;
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw refuse('preferences', 'must be a JSON object of agent id → AgentPreferences');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_PREFERENCE_AGENTS)
    throw refuse('preferences', `names more than ${MAX_PREFERENCE_AGENTS} agents (${entries.length})`);
  const out: [string, Partial<AgentPreferences>][] = [];
  for (const [agent, raw] of entries) {
    if (agent.length === 0 || agent.length > MAX_PREFERENCE_AGENT_ID)
      throw refuse('preferences', `an agent id must be 1..${MAX_PREFERENCE_AGENT_ID} characters (${agent.length})`);
    const at = `preferences.${agent.slice(0, 64)}`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
      throw refuse(at, 'must be an AgentPreferences object');
    const prefs: Partial<Record<keyof AgentPreferences, number>> = {};
    for (const f of PREFERENCE_FIELDS) {
      const v = (raw as Record<string, unknown>)[f.proto];
      if (v === undefined || v === null) continue;
      // uint64 fields may come as decimal strings, as proto's JSON mapping writes them.
      const n = typeof v === 'string' && /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isFinite(n) || n < 0)
        throw refuse(`${at}.${f.proto}`, `must be a non-negative number (0 = no preference), not ${describe(v)}`);
      if (n !== 0) prefs[f.key] = n;
    }
    out.push([agent, prefs]);
  }
  return Object.fromEntries(out);
}
