import picomatch from 'picomatch';
import {
  FALLBACK_POLICIES,
  REASON_TYPES,
  type AutoRule,
  type FallbackPolicyName,
  type FallbackSetting,
  type HitlInvocation,
  type HitlPolicy,
  type ReasonType,
} from './records';

export type { AutoRule, FallbackSetting, HitlPolicy } from './records';

/** The longest settled-approval retention accepted: ten years. */
export const MAX_APPROVAL_RETENTION_DAYS = 3650;

export const DEFAULT_FALLBACK: FallbackSetting = {
  policy: 'DENY_BY_DEFAULT',
  threshold: 0.9,
  extendMs: 0,
  maxExtensions: 3,
};

export const DEFAULT_HITL_POLICY: HitlPolicy = {
  defaultDeadlineMs: 300_000,
  maxDeadlineMs: 24 * 3_600_000,
  fallbacks: Object.fromEntries(REASON_TYPES.map((r) => [r, DEFAULT_FALLBACK])) as Record<ReasonType, FallbackSetting>,
  rules: [],
  paused: false,
  unavailableAfterMs: 5_000,
  maxPendingPerRequester: 100,
  settledRetentionMs: 90 * 86_400_000,
};

/** `repo_id/worktree_id/task_id`: what a rule's subject glob is matched against. */
export function subjectPath(invocation: Pick<HitlInvocation, 'subject'>): string {
  const { repoId, worktreeId, taskId } = invocation.subject;
  return `${repoId}/${worktreeId}/${taskId}`;
}

/** The first rule that matches the invocation, or undefined. */
export function matchRule(
  rules: readonly AutoRule[],
  invocation: Pick<HitlInvocation, 'reasonType' | 'requester' | 'subject'>,
): AutoRule | undefined {
  const subject = subjectPath(invocation);
  return rules.find(
    (rule) =>
      (rule.reasonType === '*' || rule.reasonType === invocation.reasonType) &&
      globMatches(rule.agent, invocation.requester) &&
      globMatches(rule.subject, subject),
  );
}

function globMatches(glob: string, value: string): boolean {
  return picomatch.isMatch(value, glob, { dot: true });
}

/** What a fallback does to a pending invocation. */
export type FallbackOutcome =
  | { readonly kind: 'decide'; readonly action: 'approve' | 'deny'; readonly rationale: string }
  | { readonly kind: 'extend'; readonly deadlineAt: number; readonly extension: number; readonly rationale: string };

/**
 * Applies a fallback policy (pure): DENY_BY_DEFAULT denies; AUTO_DECIDE_THRESHOLD approves when the
 * invocation's score reaches the threshold, else denies; EXTEND_TIMEOUT moves the deadline until the cap,
 * then denies. A requester that asked for `deny` on timeout is denied whatever the policy.
 */
export function applyFallback(
  invocation: HitlInvocation,
  setting: FallbackSetting,
  trigger: 'deadline' | 'hitl_unavailable',
  now: number,
): FallbackOutcome {
  const why = trigger === 'deadline' ? 'the decision deadline passed' : 'no human operator is available';
  if (invocation.requestedFallback === 'deny') {
    return {
      kind: 'decide',
      action: 'deny',
      rationale: `Fallback (requested by ${invocation.requester}): ${why}; denied.`,
    };
  }
  switch (setting.policy) {
    case 'AUTO_DECIDE_THRESHOLD': {
      const score = invocation.context.score;
      if (score !== null && score >= setting.threshold) {
        return {
          kind: 'decide',
          action: 'approve',
          rationale: `Fallback AUTO_DECIDE_THRESHOLD: ${why}; score ${score} ≥ threshold ${setting.threshold}, approved automatically.`,
        };
      }
      const shown = score === null ? 'no score was given' : `score ${score} < threshold ${setting.threshold}`;
      return { kind: 'decide', action: 'deny', rationale: `Fallback AUTO_DECIDE_THRESHOLD: ${why}; ${shown}, denied.` };
    }
    case 'EXTEND_TIMEOUT': {
      if (invocation.extensions < setting.maxExtensions) {
        const step =
          setting.extendMs > 0
            ? setting.extendMs
            : Math.max(1_000, invocation.originalDeadlineAt - invocation.createdAt);
        const deadlineAt = Math.max(invocation.deadlineAt, now) + step;
        const extension = invocation.extensions + 1;
        return {
          kind: 'extend',
          deadlineAt,
          extension,
          rationale: `Fallback EXTEND_TIMEOUT: ${why}; deadline extended by ${step} ms (extension ${extension} of ${setting.maxExtensions}).`,
        };
      }
      return {
        kind: 'decide',
        action: 'deny',
        rationale: `Fallback EXTEND_TIMEOUT: ${why} after ${setting.maxExtensions} extensions (the cap); denied.`,
      };
    }
    default:
      return { kind: 'decide', action: 'deny', rationale: `Fallback DENY_BY_DEFAULT: ${why}; denied.` };
  }
}

/** A policy read from settings or flags, with what was wrong in it (bad entries are skipped, never guessed). */
export interface ParsedPolicy {
  readonly policy: HitlPolicy;
  readonly problems: readonly string[];
}

export interface PolicyInput {
  readonly defaultDeadlineSeconds?: unknown;
  readonly fallbacks?: unknown;
  readonly rules?: unknown;
  readonly paused?: unknown;
  readonly unavailableAfterSeconds?: unknown;
  readonly retentionDays?: unknown;
}

/** Every key a policy file (`--hitl-policy`) may hold: the CLI's help and the README name exactly these. */
export const POLICY_INPUT_KEYS: readonly (keyof PolicyInput)[] = [
  'defaultDeadlineSeconds',
  'fallbacks',
  'rules',
  'paused',
  'retentionDays',
  'unavailableAfterSeconds',
];

/**
 * Builds a policy from loosely typed input (editor settings, CLI flags, a JSON file):
 * `fallbacks` maps reason types (or `*`) to a policy name or {policy, threshold, extendSeconds, maxExtensions};
 * `rules` is a list of {name, reasonType, agent, subject, action}.
 */
export function parsePolicy(input: PolicyInput, base: HitlPolicy = DEFAULT_HITL_POLICY): ParsedPolicy {
  const problems: string[] = [];
  let defaultDeadlineMs = base.defaultDeadlineMs;
  if (input.defaultDeadlineSeconds !== undefined) {
    const seconds = Number(input.defaultDeadlineSeconds);
    if (Number.isFinite(seconds) && seconds > 0) defaultDeadlineMs = Math.min(seconds * 1000, base.maxDeadlineMs);
    else
      problems.push(
        `defaultDeadlineSeconds must be a positive number, not ${JSON.stringify(input.defaultDeadlineSeconds)}`,
      );
  }
  let unavailableAfterMs = base.unavailableAfterMs;
  if (input.unavailableAfterSeconds !== undefined) {
    const seconds = Number(input.unavailableAfterSeconds);
    if (Number.isFinite(seconds) && seconds >= 0 && seconds <= 5) unavailableAfterMs = seconds * 1000;
    else
      problems.push(
        `unavailableAfterSeconds must be between 0 and 5 (RFC §15.4), not ${JSON.stringify(input.unavailableAfterSeconds)}`,
      );
  }
  let settledRetentionMs = base.settledRetentionMs;
  if (input.retentionDays !== undefined) {
    const days = Number(input.retentionDays);
    if (Number.isFinite(days) && days >= 1 && days <= MAX_APPROVAL_RETENTION_DAYS)
      settledRetentionMs = days * 86_400_000;
    else
      problems.push(
        `retentionDays must be a number of days from 1 to ${MAX_APPROVAL_RETENTION_DAYS}, not ${JSON.stringify(input.retentionDays)}`,
      );
  }
  const fallbacks: Record<string, FallbackSetting> = { ...base.fallbacks };
  if (input.fallbacks !== undefined) {
    if (!isRecord(input.fallbacks)) problems.push('fallbacks must be an object keyed by reason type');
    else {
      const entries = Object.entries(input.fallbacks);
      // `*` first, so that named reason types override it.
      entries.sort(([a], [b]) => (a === '*' ? -1 : b === '*' ? 1 : 0));
      for (const [key, value] of entries) {
        const setting = parseFallback(value, problems, key);
        if (!setting) continue;
        if (key === '*') for (const reason of REASON_TYPES) fallbacks[reason] = setting;
        else if ((REASON_TYPES as readonly string[]).includes(key)) fallbacks[key] = setting;
        else problems.push(`fallbacks: unknown reason type '${key}' (one of ${REASON_TYPES.join(', ')}, or *)`);
      }
    }
  }
  let rules = base.rules;
  if (input.rules !== undefined) {
    if (!Array.isArray(input.rules)) problems.push('rules must be a list');
    else rules = input.rules.flatMap((raw, i) => parseRule(raw, i, problems));
  }
  let paused = base.paused;
  if (input.paused !== undefined) {
    if (typeof input.paused === 'boolean') paused = input.paused;
    else problems.push('paused must be true or false');
  }
  return {
    policy: {
      ...base,
      defaultDeadlineMs,
      unavailableAfterMs,
      settledRetentionMs,
      fallbacks: fallbacks as Record<ReasonType, FallbackSetting>,
      rules,
      paused,
    },
    problems,
  };
}

function parseFallback(value: unknown, problems: string[], key: string): FallbackSetting | undefined {
  const raw = typeof value === 'string' ? { policy: value } : value;
  if (!isRecord(raw)) {
    problems.push(`fallbacks.${key}: expected a policy name or an object`);
    return undefined;
  }
  const policy = raw.policy;
  if (typeof policy !== 'string' || !(FALLBACK_POLICIES as readonly string[]).includes(policy)) {
    problems.push(
      `fallbacks.${key}.policy must be one of ${FALLBACK_POLICIES.join(', ')}, not ${JSON.stringify(policy)}`,
    );
    return undefined;
  }
  const threshold = raw.threshold === undefined ? DEFAULT_FALLBACK.threshold : Number(raw.threshold);
  if (!(threshold >= 0 && threshold <= 1)) {
    problems.push(`fallbacks.${key}.threshold must be between 0 and 1`);
    return undefined;
  }
  const extendSeconds = raw.extendSeconds === undefined ? 0 : Number(raw.extendSeconds);
  const maxExtensions = raw.maxExtensions === undefined ? DEFAULT_FALLBACK.maxExtensions : Number(raw.maxExtensions);
  if (!(extendSeconds >= 0) || !Number.isInteger(maxExtensions) || maxExtensions < 0 || maxExtensions > 10) {
    problems.push(`fallbacks.${key}: extendSeconds must be ≥ 0 and maxExtensions an integer from 0 to 10`);
    return undefined;
  }
  return { policy: policy as FallbackPolicyName, threshold, extendMs: extendSeconds * 1000, maxExtensions };
}

function parseRule(raw: unknown, index: number, problems: string[]): AutoRule[] {
  if (!isRecord(raw)) {
    problems.push(`rules[${index}] must be an object`);
    return [];
  }
  const action = raw.action;
  if (action !== 'approve' && action !== 'deny') {
    problems.push(`rules[${index}].action must be "approve" or "deny"`);
    return [];
  }
  const reasonType = raw.reasonType === undefined ? '*' : raw.reasonType;
  if (reasonType !== '*' && !(REASON_TYPES as readonly unknown[]).includes(reasonType)) {
    problems.push(`rules[${index}].reasonType must be one of ${REASON_TYPES.join(', ')} or *`);
    return [];
  }
  const agent = raw.agent === undefined ? '*' : raw.agent;
  const subject = raw.subject === undefined ? '**' : raw.subject;
  if (typeof agent !== 'string' || typeof subject !== 'string' || agent === '' || subject === '') {
    problems.push(`rules[${index}]: agent and subject must be non-empty glob patterns`);
    return [];
  }
  const name = typeof raw.name === 'string' && raw.name.trim() !== '' ? raw.name.trim() : `rules[${index}]`;
  return [{ name, reasonType: reasonType as ReasonType | '*', agent, subject, action }];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
