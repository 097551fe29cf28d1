import picomatch from 'picomatch';
import {
  TOOL_KINDS,
  type PathPlace,
  type RuleAction,
  type ToolKind,
  type ToolRule,
  type ToolRuleIssue,
  type ToolUse,
} from './model';

/**
 * The tool-use policy, pure (README, "Approvals for CLI agents"): the user's rules (`sw4rm.approvals.toolRules`) in
 * their order, then the built-in ones; the first rule that matches decides allow, ask or deny.
 *
 * Built in, in this order:
 * 1. the coordinator's own MCP tools (`mcp__sw4rm__*`) are allowed;
 * 2. a tool use naming any path outside the agent's worktree is denied;
 * 3. reads and searches whose paths are all inside the worktree are allowed;
 * 4. shell commands matching DEFAULT_ASK_COMMANDS are asked (named, so the question says which);
 * 5. everything else is asked.
 * A path whose place is `unknown` (the agent has no worktree) is neither inside nor outside: no rule with a `path`
 * condition matches it, and rules 2 and 3 do not either, so such tool uses are asked.
 */

/** Shell commands always worth a question (also matched on each part of a `&&` / `;` / `|` chain). */
export const DEFAULT_ASK_COMMANDS: readonly string[] = [
  'rm *',
  'git push*',
  'git reset --hard*',
  'git clean*',
  'curl *',
  'wget *',
  'sudo *',
  'chmod *',
  'chown *',
  'ssh *',
  'scp *',
];

export const MAX_TOOL_RULES = 200;
const MAX_GLOB_LENGTH = 512;

/** A rule as evaluate() uses it: its name, and its globs compiled once. */
export interface CompiledRule {
  readonly name: string;
  readonly rule: ToolRule;
  readonly tool?: (value: string) => boolean;
  readonly command?: (value: string) => boolean;
}

/** The outcome: what to answer and which rule said so. */
export interface RuleOutcome {
  readonly action: RuleAction;
  readonly rule: string;
  readonly reason: string;
}

const BUILTIN: readonly ToolRule[] = [
  { name: 'builtin:coordinator-tools', tool: 'mcp__sw4rm__*', action: 'allow' },
  { name: 'builtin:outside-worktree', path: 'outside', action: 'deny' },
  { name: 'builtin:read-inside', kind: 'read', path: 'inside', action: 'allow' },
  { name: 'builtin:search-inside', kind: 'search', path: 'inside', action: 'allow' },
  ...DEFAULT_ASK_COMMANDS.map((command): ToolRule => ({
    name: `builtin:ask-command ${command}`,
    kind: 'shell',
    command,
    action: 'ask',
  })),
  { name: 'builtin:ask', action: 'ask' },
];

function glob(pattern: string, bash: boolean): (value: string) => boolean {
  return picomatch(pattern, { dot: true, bash, nocase: false });
}

export function compileRules(rules: readonly ToolRule[], prefix = 'toolRules'): CompiledRule[] {
  return rules.map((rule, i) => ({
    name: rule.name ?? `${prefix}[${i}]`,
    rule,
    tool: rule.tool !== undefined ? glob(rule.tool, false) : undefined,
    command: rule.command !== undefined ? glob(rule.command, true) : undefined,
  }));
}

export const BUILTIN_RULES: readonly CompiledRule[] = compileRules(BUILTIN, 'builtin');

/** The parts of a shell command between `&&`, `||`, `;`, `|` and newlines, each trimmed (a heuristic: quotes are not parsed). */
export function commandParts(command: string): string[] {
  const parts = command
    .split(/&&|\|\||[;|\n]/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
  return [command.trim(), ...parts];
}

/**
 * Where the tool use's paths lie as a whole: `outside` when any is, `inside` when every one is (or when it names
 * none: a search without a path searches the worktree), `unknown` when any place is unknown and none outside.
 */
export function placeOfAll(places: readonly PathPlace[]): PathPlace {
  if (places.includes('outside')) return 'outside';
  if (places.includes('unknown')) return 'unknown';
  return 'inside';
}

function matches(compiled: CompiledRule, use: ToolUse, place: PathPlace): boolean {
  const { rule } = compiled;
  // A rule that does not ask about paths never reaches a tool use naming a path outside the worktree.
  if (rule.path === undefined && place === 'outside') return false;
  if (rule.path !== undefined && rule.path !== place) return false;
  if (rule.kind !== undefined && rule.kind !== use.kind) return false;
  if (compiled.tool && !compiled.tool(use.toolName)) return false;
  if (compiled.command) {
    if (use.command === undefined) return false;
    if (!commandParts(use.command).some((part) => compiled.command!(part))) return false;
  }
  return true;
}

function describe(use: ToolUse): string {
  if (use.command !== undefined)
    return `${use.toolName} \`${use.command.length > 200 ? `${use.command.slice(0, 200)}…` : use.command}\``;
  if (use.paths.length > 0)
    return `${use.toolName} ${use.paths.slice(0, 3).join(', ')}${use.paths.length > 3 ? ', …' : ''}`;
  return use.toolName;
}

/** The first rule (the user's, then the built-in ones) that matches decides. */
export function evaluate(use: ToolUse, places: readonly PathPlace[], userRules: readonly CompiledRule[]): RuleOutcome {
  const place = placeOfAll(places);
  for (const compiled of [...userRules, ...BUILTIN_RULES]) {
    if (!matches(compiled, use, place)) continue;
    const what = describe(use);
    const reason =
      compiled.name === 'builtin:outside-worktree'
        ? `${what}: names a path outside the agent's worktree (denied by the SW4RM approval rules)`
        : `${what}: ${compiled.rule.action} by rule ${compiled.name}`;
    return { action: compiled.rule.action, rule: compiled.name, reason };
  }
  // BUILTIN_RULES ends with a rule that matches everything but outside paths, which builtin:outside-worktree takes.
  return { action: 'ask', rule: 'builtin:ask', reason: `${describe(use)}: asked` };
}

const RULE_KEYS = new Set(['tool', 'kind', 'command', 'path', 'action', 'name']);

/**
 * The setting's rules checked: each refused rule is left out and named (`toolRules[2].kind: …`); the others keep
 * their order. A non-array value refuses the whole setting.
 */
export function parseToolRules(value: unknown, source = 'toolRules'): { rules: ToolRule[]; issues: ToolRuleIssue[] } {
  const rules: ToolRule[] = [];
  const issues: ToolRuleIssue[] = [];
  if (value === undefined || value === null) return { rules, issues };
  if (!Array.isArray(value)) return { rules, issues: [{ path: source, message: 'must be a list of rules' }] };
  if (value.length > MAX_TOOL_RULES)
    issues.push({ path: source, message: `at most ${MAX_TOOL_RULES} rules; the rest are left out` });
  value.slice(0, MAX_TOOL_RULES).forEach((raw, i) => {
    const at = `${source}[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      issues.push({
        path: at,
        message: 'must be an object such as {"kind": "shell", "command": "npm test*", "action": "allow"}',
      });
      return;
    }
    const r = raw as Record<string, unknown>;
    const problems: ToolRuleIssue[] = [];
    for (const key of Object.keys(r))
      if (!RULE_KEYS.has(key))
        problems.push({ path: `${at}.${key}`, message: 'unknown field (tool, kind, command, path, action, name)' });
    if (r.action !== 'allow' && r.action !== 'ask' && r.action !== 'deny')
      problems.push({ path: `${at}.action`, message: 'must be "allow", "ask" or "deny"' });
    for (const key of ['tool', 'command', 'name'] as const) {
      if (r[key] === undefined) continue;
      if (typeof r[key] !== 'string' || (r[key] as string).trim() === '')
        problems.push({ path: `${at}.${key}`, message: 'must be a non-empty string' });
      else if ((r[key] as string).length > MAX_GLOB_LENGTH)
        problems.push({ path: `${at}.${key}`, message: `longer than ${MAX_GLOB_LENGTH} characters` });
    }
    if (r.kind !== undefined && !(TOOL_KINDS as readonly unknown[]).includes(r.kind))
      problems.push({ path: `${at}.kind`, message: `must be one of ${TOOL_KINDS.join(', ')}` });
    if (r.path !== undefined && r.path !== 'inside' && r.path !== 'outside')
      problems.push({ path: `${at}.path`, message: 'must be "inside" or "outside"' });
    for (const key of ['tool', 'command'] as const) {
      if (typeof r[key] !== 'string' || problems.some((p) => p.path === `${at}.${key}`)) continue;
      try {
        picomatch.makeRe(r[key] as string);
      } catch (err) {
        problems.push({
          path: `${at}.${key}`,
          message: `not a valid glob: ${err instanceof Error ? err.message : String(err)}`,
        });
      }
    }
    if (problems.length > 0) {
      issues.push(...problems);
      return;
    }
    rules.push({
      ...(r.tool !== undefined ? { tool: r.tool as string } : {}),
      ...(r.kind !== undefined ? { kind: r.kind as ToolKind } : {}),
      ...(r.command !== undefined ? { command: r.command as string } : {}),
      ...(r.path !== undefined ? { path: r.path as 'inside' | 'outside' } : {}),
      action: r.action as RuleAction,
      name: (r.name as string | undefined) ?? at,
    });
  });
  return { rules, issues };
}
