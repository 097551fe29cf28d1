import type { PermissionOption, RequestPermissionOutcome, ToolCallUpdate } from '@agentclientprotocol/sdk' with {
  'resolution-mode': 'import',
};
import { parseHookInput } from './cliHooks';
import type { HookDecision, ToolEdit, ToolKind, ToolUse } from './model';

/**
 * An ACP permission request (`session/request_permission`) read as the tool use the CLI hooks read, so that the same
 * tool-approval rules decide it (README, "Approvals for CLI agents"); and the verdict put back as the option the
 * agent offered. Pure.
 */

/** ACP's tool kinds in the approval rules' words. */
const KIND_OF: Readonly<Record<string, ToolKind>> = {
  read: 'read',
  search: 'search',
  edit: 'edit',
  delete: 'write',
  move: 'write',
  execute: 'shell',
  fetch: 'web',
  think: 'other',
  switch_mode: 'other',
  other: 'other',
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The tool's own name, where the agent says it: Claude Code's adapter puts it in `_meta.claudeCode.toolName`; the
 * protocol's optional `name` otherwise.
 */
export function agentToolName(toolCall: ToolCallUpdate): string | undefined {
  const meta = toolCall._meta;
  const claude = isObject(meta) && isObject(meta.claudeCode) ? meta.claudeCode : undefined;
  const named = claude !== undefined && typeof claude.toolName === 'string' ? claude.toolName : undefined;
  if (named !== undefined && named !== '') return named;
  return typeof toolCall.name === 'string' && toolCall.name !== '' ? toolCall.name : undefined;
}

/**
 * The tool use a permission request names. With the agent's own tool name (Claude Code's `Write`, `Bash`,
 * `mcp__sw4rm__send_message`…) and a JSON object of arguments, it is read exactly as that CLI's hook input is
 * (cliHooks.ts), so the rules see what they see from the hook. Otherwise from ACP's fields: the kind, every location
 * as a path, `rawInput.command` for execute, the diffs of its content as edits.
 */
export function toolUseOfPermission(toolCall: ToolCallUpdate): ToolUse {
  const name = agentToolName(toolCall);
  const rawInput = toolCall.rawInput;
  if (name !== undefined && isObject(rawInput)) {
    const use = parseHookInput('claude-code', {
      tool_name: name,
      tool_input: rawInput,
      tool_use_id: toolCall.toolCallId,
    });
    const located = (toolCall.locations ?? []).map((l) => l.path).filter((p) => typeof p === 'string' && p !== '');
    return { ...use, paths: [...new Set([...use.paths, ...located])] };
  }
  const kind: ToolKind = KIND_OF[toolCall.kind ?? 'other'] ?? 'other';
  const input = isObject(rawInput) ? rawInput : {};
  const paths = (toolCall.locations ?? []).map((l) => l.path).filter((p) => typeof p === 'string' && p !== '');
  const edits: ToolEdit[] = [];
  for (const item of toolCall.content ?? []) {
    if (item.type !== 'diff') continue;
    paths.push(item.path);
    edits.push(
      item.oldText === undefined || item.oldText === null
        ? { path: item.path, content: item.newText }
        : { path: item.path, oldString: item.oldText, newString: item.newText },
    );
  }
  const raw = input.command;
  const command =
    kind === 'shell'
      ? typeof raw === 'string'
        ? raw
        : Array.isArray(raw)
          ? raw.map(String).join(' ')
          : undefined
      : undefined;
  return {
    cli: 'custom',
    toolName: (toolCall.title ?? '').trim().slice(0, 256) || toolCall.kind || 'tool',
    kind,
    paths: [...new Set(paths)],
    command,
    input,
    edits,
    toolUseId: toolCall.toolCallId,
  };
}

/**
 * The option that answers `decision` for this one use: allow → `allow_once` (a person approved this use, not every
 * later one; `allow_always` only when the agent offers no other allow); deny and ask (nobody decided: an ACP agent has
 * no other user to ask) → `reject_once`, else `reject_always`; with no such option, `cancelled`. Never an allow for
 * anything but an allow.
 */
export function permissionOutcome(
  decision: HookDecision,
  options: readonly PermissionOption[],
): RequestPermissionOutcome {
  const pick = (...kinds: string[]): PermissionOption | undefined => {
    for (const kind of kinds) {
      const found = options.find((o) => o.kind === kind);
      if (found) return found;
    }
    return undefined;
  };
  const chosen = decision === 'allow' ? pick('allow_once', 'allow_always') : pick('reject_once', 'reject_always');
  return chosen === undefined ? { outcome: 'cancelled' } : { outcome: 'selected', optionId: chosen.optionId };
}
