import { parsePolicy, parseToolRules, type HitlPolicy, type ToolRule } from '../core/api';
import { SETTINGS_SECTION, Settings } from './contributions';

/** The sw4rm.approvals.* settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface ApprovalSettingValues {
  readonly defaultDeadlineSeconds: unknown;
  readonly fallbacks: unknown;
  readonly rules: unknown;
  readonly pauseAll: unknown;
  readonly retentionDays: unknown;
  /** sw4rm.approvals.toolRules: the tool-use rules of CLI agents' approval hooks. */
  readonly toolRules?: unknown;
}

export interface ApprovalSettings {
  readonly policy: HitlPolicy;
  /** The tool-use rules that passed their checks, in their order (src/core/toolApproval/rules.ts). */
  readonly toolRules: readonly ToolRule[];
  /** What was wrong and skipped, one sentence each, naming the setting. */
  readonly problems: readonly string[];
}

/** parsePolicy's input names → the setting that carries them. */
const SETTING_OF: Readonly<Record<string, string>> = {
  defaultDeadlineSeconds: Settings.approvalsDefaultDeadlineSeconds,
  fallbacks: Settings.approvalsFallbacks,
  rules: Settings.approvalsRules,
  paused: Settings.approvalsPauseAll,
  retentionDays: Settings.approvalsRetentionDays,
};

/**
 * Turns the approval settings into the coordinator's HITL policy (src/core/hitl/policy.ts `parsePolicy`):
 * bad entries are skipped, never guessed, and named in `problems` with the setting they came from.
 */
export function approvalSettings(values: ApprovalSettingValues): ApprovalSettings {
  const { policy, problems } = parsePolicy({
    defaultDeadlineSeconds: values.defaultDeadlineSeconds,
    fallbacks: values.fallbacks,
    rules: values.rules,
    paused: values.pauseAll,
    retentionDays: values.retentionDays,
  });
  const tools = parseToolRules(values.toolRules, `${SETTINGS_SECTION}.${Settings.approvalsToolRules}`);
  return {
    policy,
    toolRules: tools.rules,
    problems: [...problems.map(nameSetting), ...tools.issues.map((i) => `${i.path}: ${i.message}`)],
  };
}

function nameSetting(problem: string): string {
  const match = /^(defaultDeadlineSeconds|fallbacks|rules|paused|retentionDays)\b/.exec(problem);
  if (!match) return `${SETTINGS_SECTION}.approvals: ${problem}`;
  return `${SETTINGS_SECTION}.${SETTING_OF[match[1]]}${problem.slice(match[1].length)}`;
}

/** Problems not reported before; remembers them, so that each is reported once per window. */
export class ProblemMemory {
  private readonly seen = new Set<string>();

  fresh(problems: readonly string[]): string[] {
    const fresh = problems.filter((problem) => !this.seen.has(problem));
    for (const problem of fresh) this.seen.add(problem);
    return fresh;
  }
}
