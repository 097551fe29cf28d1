// The approval panel's text, as pure functions (no DOM): countdown, facts, decision summary, payload checks.
import type { DecisionJson, InvocationJson } from './protocol';

/** `4m 05s left`, `1h 02m left`, `overdue by 3s`. */
export function formatRemaining(ms: number): string {
  const overdue = ms < 0;
  const total = Math.floor(Math.abs(ms) / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const text = hours > 0 ? `${hours}h ${pad(minutes)}m` : minutes > 0 ? `${minutes}m ${pad(seconds)}s` : `${seconds}s`;
  return overdue ? `overdue by ${text}` : `${text} left`;
}

/** A fact as shown: scalars on one line, objects and lists as pretty JSON text in a block. */
export interface FactRow {
  readonly key: string;
  readonly text: string;
  readonly block: boolean;
}

export function factRows(facts: Readonly<Record<string, unknown>>): FactRow[] {
  return Object.entries(facts).map(([key, value]) => {
    if (typeof value === 'string') return { key, text: value, block: value.includes('\n') };
    if (value === null || typeof value !== 'object') return { key, text: String(value), block: false };
    return { key, text: JSON.stringify(value, null, 2), block: true };
  });
}

/** Facts a requester may send with the payload it proposes; the first present one prefills Modify. */
export const SUGGESTED_PAYLOAD_FACTS = [
  'suggested_payload',
  'suggestedPayload',
  'proposed_payload',
  'proposedPayload',
  'decision_payload',
  'payload',
] as const;

/** What the Modify editor starts with: the suggested payload as pretty JSON, or `{}`. */
export function suggestedPayloadText(invocation: InvocationJson): string {
  for (const key of SUGGESTED_PAYLOAD_FACTS) {
    const value = invocation.context.facts[key];
    if (value !== undefined) {
      if (typeof value === 'string') {
        try {
          return JSON.stringify(JSON.parse(value), null, 2);
        } catch {
          return JSON.stringify(value);
        }
      }
      return JSON.stringify(value, null, 2);
    }
  }
  return '{}';
}

/** Shown next to the rationale field while it is blank: every decision says why (the coordinator refuses it otherwise). */
export const RATIONALE_REQUIRED_HINT = 'A rationale is required: say why before you approve, deny, modify or defer.';

/** Whether the rationale typed so far is missing: empty, or only white space. */
export function rationaleMissing(text: string): boolean {
  return text.trim() === '';
}

/** Parses the Modify editor's text; the error says where the JSON is wrong. */
export function parsePayloadText(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (text.trim() === '') return { ok: false, error: 'The modified payload is empty; enter a JSON value, e.g. {}.' };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return {
      ok: false,
      error: `The modified payload is not valid JSON: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}

const PAST: Readonly<Record<string, string>> = {
  approve: 'Approved',
  deny: 'Denied',
  modify: 'Modified',
  defer: 'Deferred',
};

/** `Approved by editor:alice`, `Denied automatically by rule 'no-prod'`, `Denied automatically (fallback DENY_BY_DEFAULT, deadline)`. */
export function decisionHeadline(decision: DecisionJson): string {
  const verb = PAST[decision.decision] ?? decision.decision;
  if (decision.state === 'cancelled')
    return `Cancelled by ${decision.decided_by} (the requester was answered ${decision.decision})`;
  if (decision.rule) return `${verb} automatically by rule '${decision.rule}'`;
  if (decision.fallback) {
    const trigger =
      decision.fallback.trigger === 'hitl_unavailable'
        ? 'no operator available'
        : decision.fallback.trigger === 'requested_fallback'
          ? 'the requester asked for deny on timeout'
          : 'deadline passed';
    return `${verb} automatically (fallback ${decision.fallback.policy ?? '?'}: ${trigger})`;
  }
  return `${verb} by ${decision.decided_by}${decision.automatic ? ' (automatic)' : ''}`;
}

/** `repo / worktree / task`, leaving out parts that are empty; empty when all are. */
export function subjectText(subject: InvocationJson['subject']): string {
  return [
    subject.repo_id && `repo ${subject.repo_id}`,
    subject.worktree_id && `worktree ${subject.worktree_id}`,
    subject.task_id && `task ${subject.task_id}`,
  ]
    .filter(Boolean)
    .join(' · ');
}

/** `SECURITY_APPROVAL` → `Security approval`. */
export function reasonLabel(reasonType: string): string {
  const words = reasonType.toLowerCase().split('_').filter(Boolean).join(' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function pad(n: number): string {
  return String(n).padStart(2, '0');
}
