/**
 * Tool approvals for CLI agents (README, "Approvals for CLI agents"): a CLI coding agent launched from the editor
 * asks the coordinator before it runs a tool (Claude Code PreToolUse, Gemini CLI BeforeTool, Copilot CLI preToolUse,
 * Codex PreToolUse command hooks). Each tool use is decided by the rules (rules.ts) or becomes a HITL invocation
 * decided in the editor's approval panel (toolApprovals.ts). No table of its own: the HITL area persists the
 * invocations, the log the automatic answers.
 */

/** The hook dialects the endpoint speaks (`?cli=`); `custom` is our own plain format for any other program. */
export const HOOK_CLIS = ['claude-code', 'gemini', 'copilot', 'codex', 'custom'] as const;
export type HookCli = (typeof HOOK_CLIS)[number];

export function isHookCli(value: unknown): value is HookCli {
  return typeof value === 'string' && (HOOK_CLIS as readonly string[]).includes(value);
}

export const TOOL_KINDS = ['read', 'search', 'write', 'edit', 'shell', 'web', 'mcp', 'other'] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

/** A file change a tool use proposes (what the diff in the HITL invocation is made from). */
export interface ToolEdit {
  /** As the CLI gave it (absolute or relative to the worktree). */
  readonly path: string;
  /** Write: the whole new content. */
  readonly content?: string;
  /** Edit: replace `oldString` with `newString` in the current content (every occurrence when `replaceAll`). */
  readonly oldString?: string;
  readonly newString?: string;
  readonly replaceAll?: boolean;
  /** A ready-made patch (Codex apply_patch), shown as it is. */
  readonly patch?: string;
}

/** One tool use as every CLI's hook input reads. */
export interface ToolUse {
  readonly cli: HookCli;
  readonly toolName: string;
  readonly kind: ToolKind;
  /** Every file or folder the tool names, as given. */
  readonly paths: readonly string[];
  /** The shell command (kind `shell`). */
  readonly command?: string;
  /** The tool's arguments, as the CLI sent them (a JSON object). */
  readonly input: Readonly<Record<string, unknown>>;
  /** For writes and edits: the change, one per file. */
  readonly edits: readonly ToolEdit[];
  /** The CLI's own id of this tool use (Claude Code / Codex `tool_use_id`), when it sent one. */
  readonly toolUseId?: string;
}

export type HookDecision = 'allow' | 'deny' | 'ask';

/** What the coordinator answers, before it is put in the CLI's words (cliHooks.ts formatAnswer). */
export interface HookVerdict {
  readonly decision: HookDecision;
  readonly reason: string;
}

/** The answer in the CLI's words: the JSON it reads on stdout and the exit code it expects. */
export interface HookAnswer extends HookVerdict {
  readonly cli: HookCli;
  readonly stdout: Readonly<Record<string, unknown>>;
  readonly exitCode: number;
  /** Who decided: a rule's name, `person:<operator>`, or why nobody did (`timeout`, `fallback`, `invalid_input`…). */
  readonly decidedBy: string;
  /** The HITL invocation, when one was opened. */
  readonly invocationId?: string;
}

/** Where a path a tool names lies, relative to the agent's worktree. */
export type PathPlace = 'inside' | 'outside' | 'unknown';

export type RuleAction = 'allow' | 'ask' | 'deny';

/**
 * One rule of the setting `sw4rm.approvals.toolRules` (ordered; the first that matches decides; the built-in rules
 * follow the user's). Every condition given must hold.
 */
export interface ToolRule {
  /** picomatch glob on the tool's name (`Bash`, `mcp__github__*`). */
  readonly tool?: string;
  readonly kind?: ToolKind;
  /** picomatch glob (bash mode: `*` crosses `/`) on the shell command or any part of it between `&&`, `||`, `;`, `|`. */
  readonly command?: string;
  /**
   * `inside`: every path the tool names is inside the worktree (and it names at least one, or none at all for a
   * search). `outside`: at least one is outside. A rule WITHOUT `path` never matches a tool use naming a path outside
   * the worktree: to allow those, a rule has to say `path: 'outside'`.
   */
  readonly path?: 'inside' | 'outside';
  readonly action: RuleAction;
  /** Shown in the log and the invocation; default `toolRules[<i>]`. */
  readonly name?: string;
}

/** A rule the setting gave that was refused: where and why (shown, never silently dropped). */
export interface ToolRuleIssue {
  readonly path: string;
  readonly message: string;
}

/** An ACP permission request's answer (ToolApprovals.decidePermission): the option chosen, and who decided. */
export interface PermissionAnswer {
  /** `{ outcome: 'selected', optionId }` or `{ outcome: 'cancelled' }` (ACP's RequestPermissionOutcome). */
  readonly outcome: { readonly outcome: 'cancelled' } | { readonly outcome: 'selected'; readonly optionId: string };
  /** A rule's name, `person:<operator>`, or why nobody did. */
  readonly decidedBy: string;
  readonly invocationId?: string;
}
