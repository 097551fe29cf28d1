import { jsonBoundsBreach, parseBoundedJson } from '../json';
import type { HookAnswer, HookCli, HookVerdict, ToolEdit, ToolKind, ToolUse } from './model';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * Each CLI's hook input read into a ToolUse, and an answer put in the CLI's words (README, "Approvals for CLI agents";
 * the formats and where they are documented are in docs/hook-configs.md):
 *
 * - Claude Code PreToolUse: stdin `{session_id, transcript_path, cwd, permission_mode, hook_event_name, tool_name,
 *   tool_input, tool_use_id}`; stdout `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
 *   "allow"|"deny"|"ask", "permissionDecisionReason": …}}`, exit 0.
 * - Codex CLI PreToolUse: the same wire format (tools `Bash`, `apply_patch` with the patch in `tool_input.command`,
 *   `mcp__server__tool`); only "deny" is enforced by Codex today, so "ask" is answered as a deny (below).
 * - Gemini CLI BeforeTool: stdin `{session_id, transcript_path, cwd, hook_event_name, timestamp, tool_name, tool_input,
 *   mcp_context?}`; stdout `{"decision": "allow"|"deny", "reason": …}`, exit 0. No "ask".
 * - Copilot CLI preToolUse: stdin `{sessionId?, timestamp, cwd, toolName, toolArgs}` (toolArgs a JSON string or an
 *   object; the VS Code compatible `PreToolUse` form `{tool_name, tool_input}` too); stdout `{"permissionDecision":
 *   "allow"|"deny"|"ask", "permissionDecisionReason": …}`, exit 0.
 * - custom: stdin `{tool_name, tool_input}`; stdout `{"decision": "allow"|"deny"|"ask", "reason": …}`, exit 0.
 *
 * Every answer exits 0 with JSON: for Claude Code and Copilot CLI a non-zero exit other than 2 is a "non-blocking
 * error" after which the tool RUNS, so nothing here relies on exit codes.
 */

/** The largest hook input read (Claude Code's Write carries the whole new file). */
export const MAX_HOOK_INPUT_BYTES = 4 * 1024 * 1024;

/** CLIs whose hook cannot answer "ask": their "ask" is a deny whose reason says nobody decided. */
export const CLIS_WITHOUT_ASK: ReadonlySet<HookCli> = new Set<HookCli>(['gemini', 'codex']);

export class HookInputError extends SwarmError {
  readonly code = 'VALIDATION_ERROR';
  constructor(message: string) {
    super(message);
    this.name = 'HookInputError';
  }

  override get errorKind(): ErrorKind {
    return 'invalid';
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}

/** Tool names (lower case) of every CLI and their kinds; `mcp__…` names are `mcp`; anything else `other`. */
const KINDS: Readonly<Record<string, ToolKind>> = {
  // Claude Code
  read: 'read',
  notebookread: 'read',
  glob: 'search',
  grep: 'search',
  ls: 'search',
  write: 'write',
  edit: 'edit',
  multiedit: 'edit',
  notebookedit: 'edit',
  bash: 'shell',
  webfetch: 'web',
  websearch: 'web',
  // Gemini CLI
  read_file: 'read',
  read_many_files: 'read',
  list_directory: 'search',
  search_file_content: 'search',
  write_file: 'write',
  replace: 'edit',
  run_shell_command: 'shell',
  web_fetch: 'web',
  google_web_search: 'web',
  // Copilot CLI
  view: 'read',
  create: 'write',
  powershell: 'shell',
  // Codex CLI
  apply_patch: 'edit',
  shell: 'shell',
  exec_command: 'shell',
};

export function kindOf(toolName: string): ToolKind {
  if (toolName.startsWith('mcp__')) return 'mcp';
  return KINDS[toolName.toLowerCase()] ?? 'other';
}

/** Argument names that name a file or folder, across the CLIs. */
const PATH_KEYS = ['file_path', 'absolute_path', 'notebook_path', 'path', 'dir_path', 'directory'];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function boundedObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value === 'string') {
    const verdict = parseBoundedJson(value, { what, maxBytes: MAX_HOOK_INPUT_BYTES });
    if (!verdict.ok) throw new HookInputError(verdict.reason);
    value = verdict.value;
  } else {
    const text = JSON.stringify(value ?? null);
    const breach = jsonBoundsBreach(text, { what, maxBytes: MAX_HOOK_INPUT_BYTES });
    if (breach) throw new HookInputError(breach.reason);
  }
  if (!isObject(value)) throw new HookInputError(`${what} is not a JSON object`);
  return value;
}

/**
 * The tool use a CLI's hook input describes. `body` is the parsed JSON (or its text); a refusal is a HookInputError
 * (VALIDATION_ERROR) naming what is wrong.
 */
export function parseHookInput(cli: HookCli, body: unknown): ToolUse {
  const hook = boundedObject(body, 'the hook input');
  let toolName: string | undefined;
  let rawInput: unknown;
  if (cli === 'copilot' && (hook.toolName !== undefined || hook.toolArgs !== undefined)) {
    toolName = str(hook.toolName);
    rawInput = hook.toolArgs ?? {};
    if (typeof rawInput === 'string') rawInput = rawInput.trim() === '' ? {} : boundedObject(rawInput, 'toolArgs');
  } else {
    toolName = str(hook.tool_name);
    rawInput = hook.tool_input ?? {};
  }
  if (toolName === undefined || toolName.trim() === '') {
    throw new HookInputError(
      cli === 'copilot' ? 'the hook input has no toolName (a string)' : 'the hook input has no tool_name (a string)',
    );
  }
  if (toolName.length > 256) throw new HookInputError('tool_name is longer than 256 characters');
  if (!isObject(rawInput))
    throw new HookInputError(
      `the tool's arguments (${cli === 'copilot' ? 'toolArgs' : 'tool_input'}) are not a JSON object`,
    );
  const input = rawInput;
  const kind = kindOf(toolName);
  const paths: string[] = [];
  const edits: ToolEdit[] = [];
  let command: string | undefined;
  if (kind !== 'mcp' && kind !== 'web') {
    for (const key of PATH_KEYS) {
      const value = str(input[key]);
      if (value !== undefined && value !== '') paths.push(value);
    }
    if (Array.isArray(input.paths)) for (const p of input.paths) if (typeof p === 'string' && p !== '') paths.push(p);
  }
  if (kind === 'shell') {
    const raw = input.command;
    command = typeof raw === 'string' ? raw : Array.isArray(raw) ? raw.map(String).join(' ') : undefined;
  }
  const target = str(input.file_path) ?? str(input.path) ?? str(input.absolute_path);
  if (kind === 'write' && target !== undefined) {
    const content = str(input.content) ?? str(input.file_text);
    edits.push({ path: target, content: content ?? '' });
  }
  if (kind === 'edit' && target !== undefined) {
    if (Array.isArray(input.edits)) {
      for (const e of input.edits) {
        if (!isObject(e)) continue;
        edits.push({
          path: target,
          oldString: str(e.old_string) ?? '',
          newString: str(e.new_string) ?? '',
          replaceAll: e.replace_all === true,
        });
      }
    } else {
      const oldString = str(input.old_string) ?? str(input.old_str);
      const newString = str(input.new_string) ?? str(input.new_str);
      if (oldString !== undefined || newString !== undefined) {
        const expected = typeof input.expected_replacements === 'number' ? input.expected_replacements : 1;
        edits.push({
          path: target,
          oldString: oldString ?? '',
          newString: newString ?? '',
          replaceAll: input.replace_all === true || expected > 1,
        });
      }
    }
  }
  if (toolName === 'apply_patch') {
    const patch = typeof input.command === 'string' ? input.command : (str(input.patch) ?? str(input.input));
    if (patch !== undefined) {
      for (const file of patchFiles(patch)) {
        paths.push(file);
        edits.push({ path: file, patch });
      }
    }
  }
  const toolUseId = str(hook.tool_use_id);
  return { cli, toolName, kind, paths: [...new Set(paths)], command, input, edits, toolUseId };
}

/** The files a Codex `apply_patch` envelope touches (`*** Add File:`, `*** Update File:`, `*** Delete File:`, `*** Move to:`). */
export function patchFiles(patch: string): string[] {
  const files: string[] = [];
  for (const line of patch.split(/\r?\n/)) {
    const match = /^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$/.exec(line);
    if (match) files.push(match[1]);
  }
  return [...new Set(files)];
}

/** The reason a CLI without "ask" is given instead (never recorded as a person's denial). */
export function askAsDenyReason(reason: string): string {
  return (
    `Not run: nobody approved this tool use in the SW4RM approvals panel, and this CLI cannot ask its own user (${reason}). ` +
    "This is not a person's denial: ask the user to approve it in the editor, then try again."
  );
}

/** The verdict in the CLI's words. */
export function formatAnswer(cli: HookCli, verdict: HookVerdict, decidedBy: string, invocationId?: string): HookAnswer {
  const { decision, reason } = verdict;
  let stdout: Record<string, unknown>;
  switch (cli) {
    case 'claude-code':
      stdout = {
        hookSpecificOutput: {
          hookEventName: 'PreToolUse',
          permissionDecision: decision,
          permissionDecisionReason: reason,
        },
      };
      break;
    case 'codex':
      stdout =
        decision === 'ask'
          ? {
              hookSpecificOutput: {
                hookEventName: 'PreToolUse',
                permissionDecision: 'deny',
                permissionDecisionReason: askAsDenyReason(reason),
              },
            }
          : {
              hookSpecificOutput: {
                hookEventName: 'PreToolUse',
                permissionDecision: decision,
                permissionDecisionReason: reason,
              },
            };
      break;
    case 'gemini':
      stdout = decision === 'ask' ? { decision: 'deny', reason: askAsDenyReason(reason) } : { decision, reason };
      break;
    case 'copilot':
      stdout = { permissionDecision: decision, permissionDecisionReason: reason };
      break;
    case 'custom':
      stdout = { decision, reason };
      break;
  }
  return {
    cli,
    decision,
    reason,
    stdout,
    exitCode: 0,
    decidedBy,
    ...(invocationId !== undefined ? { invocationId } : {}),
  };
}
