import type { ProviderInfo, ToolCallDetails, ToolCallRecord, ToolDescriptor } from '../core/api';

/** The Tools view's groups, in the order they are shown. */
export const TOOL_GROUPS = ['providers', 'calls'] as const;
export type ToolGroup = (typeof TOOL_GROUPS)[number];

export const TOOL_GROUP_LABELS: Readonly<Record<ToolGroup, string>> = { providers: 'Providers', calls: 'Recent calls' };

/** The calls the Recent calls group lists (newest first). */
export const RECENT_CALLS_LISTED = 100;

/** Outcomes of a call that has not ended yet: the row is marked running and Cancel Tool Call is offered. */
const OPEN_OUTCOMES: ReadonlySet<ToolCallRecord['outcome']> = new Set(['running', 'queued', 'awaiting_approval']);

export function isOpenCall(call: Pick<ToolCallRecord, 'outcome'>): boolean {
  return OPEN_OUTCOMES.has(call.outcome);
}

/** A row's text: label, description, plain-text tooltip (ids, names and schemas come from agents). */
export interface ToolsRow {
  readonly label: string;
  readonly description: string;
  readonly tooltip: string;
}

/** A group's count: providers `3 (1 unavailable)`, calls `12` or `newest 100`. */
export function toolGroupDescription(
  group: ToolGroup,
  providers: readonly ProviderInfo[],
  calls: readonly ToolCallRecord[],
): string {
  if (group === 'providers') {
    const unavailable = providers.filter((p) => !p.available).length;
    return unavailable ? `${providers.length} (${unavailable} unavailable)` : String(providers.length);
  }
  const running = calls.filter(isOpenCall).length;
  const listed = calls.length >= RECENT_CALLS_LISTED ? `newest ${calls.length}` : String(calls.length);
  return running ? `${listed} · ${running} running` : listed;
}

/** A provider's row: its id, then kind · available (or why not) · how many tools. */
export function providerRow(provider: ProviderInfo): ToolsRow {
  const availability = provider.available
    ? 'available'
    : `unavailable${provider.unavailableReason ? `: ${provider.unavailableReason}` : ''}`;
  const tools = `${provider.tools.length} tool${provider.tools.length === 1 ? '' : 's'}`;
  const kind = provider.kind === 'builtin' ? 'built in' : 'agent';
  return {
    label: provider.providerId,
    description: [kind, provider.available ? 'available' : 'unavailable', tools].join(' · '),
    tooltip: [
      `provider ${provider.providerId} (${provider.kind === 'builtin' ? 'built into the coordinator' : 'an agent registered with RegisterProvider'})`,
      availability,
      ...(provider.registeredAt ? [`registered ${new Date(provider.registeredAt).toISOString()}`] : []),
      tools + (provider.tools.length ? `: ${provider.tools.map((t) => t.name).join(', ')}` : ''),
    ].join('\n'),
  };
}

/** Seconds, or `no timeout` for 0. */
function timeoutText(seconds: number): string {
  return seconds > 0 ? `timeout ${seconds} s` : 'no timeout';
}

/** A tool's row: its name, then side effects · idempotent or not · max concurrency · timeout; tooltip the input schema. */
export function toolRow(tool: ToolDescriptor): ToolsRow {
  const facts = [
    `side effects: ${tool.sideEffects}`,
    tool.idempotent ? 'idempotent' : 'not idempotent',
    `max ${tool.maxConcurrency} at once`,
    timeoutText(tool.defaultTimeoutS),
    ...(tool.needsWorktree ? ['needs a worktree'] : []),
  ];
  return {
    label: tool.name,
    description: facts.join(' · '),
    tooltip: [
      tool.name,
      ...(tool.description ? [tool.description] : []),
      facts.join(' · '),
      '',
      'Input schema:',
      schemaText(tool.inputSchema),
    ].join('\n'),
  };
}

/** A JSON Schema as indented text, cut at `max` characters. */
export function schemaText(schema: unknown, max = 4_000): string {
  const text = JSON.stringify(schema ?? {}, null, 2) ?? '{}';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A duration in ms as `850 ms`, `12.4 s`, `3 min 5 s`. */
export function durationText(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.round(ms / 1_000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Bytes as `512 B`, `4.0 KiB`, `1.5 MiB`. */
export function bytesText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** What a call's outcome reads as: `ok`, `error TOOL_TIMEOUT`, `running`, `awaiting approval`. */
export function outcomeText(call: Pick<ToolCallRecord, 'outcome' | 'errorCode'>): string {
  if (call.outcome === 'error') return call.errorCode ? `error ${call.errorCode}` : 'error';
  return call.outcome.replace('_', ' ');
}

/** How long the call has taken: its duration when it ended, else the time since it started (`now`). */
export function callDuration(call: Pick<ToolCallRecord, 'startedAt' | 'endedAt'>, now: number): number {
  return (call.endedAt || now) - call.startedAt;
}

/** A time of day as `HH:MM:SS`, local time. */
export function clockTimeText(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/**
 * A call's row: provider/tool, then caller · outcome · duration · frames/bytes. A call still open says when it started
 * (`since HH:MM:SS`), not for how long: the view is redrawn when calls change, not as time passes, so a running time
 * would go stale.
 */
export function callRow(call: ToolCallRecord): ToolsRow {
  const open = isOpenCall(call);
  const duration = open ? `since ${clockTimeText(call.startedAt)}` : durationText(callDuration(call, call.endedAt));
  // The engine counts a call's frames and bytes into its record when the call ends: a running call's zeros would mislead.
  const counted = !open || call.frames > 0;
  const description = [
    call.callerAgentId,
    outcomeText(call),
    duration,
    ...(counted ? [`${call.frames} frame${call.frames === 1 ? '' : 's'} / ${bytesText(call.bytes)}`] : []),
  ].join(' · ');
  return {
    label: `${call.providerId}/${call.toolName}`,
    description,
    tooltip: [
      `call ${call.callId}`,
      `${call.providerId}/${call.toolName} called by ${call.callerAgentId} (via ${call.via}${call.stream ? ', streaming' : ''})`,
      `${outcomeText(call)} · ${open ? '' : 'took '}${duration} · ${call.attempts} attempt${call.attempts === 1 ? '' : 's'}`,
      counted
        ? `${call.frames} frames, ${call.bytes} bytes`
        : 'frames and bytes are counted when the call ends (the details show the frames so far)',
      ...(call.errorMessage ? [`error: ${call.errorMessage}`] : []),
    ].join('\n'),
  };
}

/** contextValue of a call row: `toolCall+<outcome>` (menus offer Cancel Tool Call on open ones). */
export function callContextValue(call: Pick<ToolCallRecord, 'outcome'>): string {
  return `toolCall+${call.outcome}`;
}

/** contextValue of a provider row: `toolProvider+available` or `toolProvider+unavailable`. */
export function providerContextValue(provider: Pick<ProviderInfo, 'available'>): string {
  return `toolProvider+${provider.available ? 'available' : 'unavailable'}`;
}

/** The document title of a call's details. */
export function callTitle(call: Pick<ToolCallRecord, 'providerId' | 'toolName' | 'callId'>): string {
  return `Tool call ${call.providerId}.${call.toolName} ${call.callId.slice(0, 8)}`;
}

/** Show Tool Call Details: the record, its execution policy, the args excerpt, the frames kept, the error (plain text). */
export function callDetailText(details: ToolCallDetails, now: number): string {
  const { record: call, frames } = details;
  const time = (ms: number) => (ms ? new Date(ms).toISOString() : '—');
  const p = call.policy;
  const lines = [
    `Tool call ${call.callId}`,
    '',
    `tool            ${call.providerId}/${call.toolName}`,
    `caller          ${call.callerAgentId}`,
    `via             ${call.via}${call.stream ? ' (streaming)' : ''}`,
    `outcome         ${outcomeText(call)}`,
    `started         ${time(call.startedAt)}`,
    `ended           ${time(call.endedAt)}`,
    `duration        ${durationText(callDuration(call, now))}${isOpenCall(call) ? ' (still running)' : ''}`,
    `attempts        ${call.attempts}`,
    `frames          ${call.frames}`,
    `bytes           ${call.bytes}`,
    ...(call.invocationId ? [`approval        ${call.invocationId}`] : []),
    ...(call.messageId ? [`envelope        ${call.messageId}`] : []),
    '',
    'Execution policy:',
    `timeout_ms         ${p.timeoutMs}`,
    `max_retries        ${p.maxRetries}`,
    `backoff            ${p.backoff}`,
    `worktree_required  ${p.worktreeRequired}`,
    `network_policy     ${p.networkPolicy}`,
    `privilege_level    ${p.privilegeLevel}`,
    `budget_cpu_ms      ${p.budgetCpuMs}`,
    `budget_wall_ms     ${p.budgetWallMs}`,
    '',
    'Arguments (the first 4 KiB):',
    argsText(call.argsExcerpt),
    '',
    ...(call.outcome === 'error' ? ['Error:', `${call.errorCode || 'error'}: ${call.errorMessage}`, ''] : []),
    `Frames kept (the newest ${frames.length} of ${call.frames}; none after a restart):`,
    ...frames.map((f) => `#${f.frameNo}${f.final ? ' final' : ''} ${f.contentType || 'application/json'}\n${f.text}`),
  ];
  return lines.join('\n') + '\n';
}

/** The args as indented JSON when they parse, else as they are (an excerpt cut at 4 KiB does not parse). */
function argsText(text: string): string {
  if (!text) return '(none)';
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** What Cancel Tool Call answered, in words. */
export function cancelResultText(
  callId: string,
  result: { readonly errorCode: string; readonly message: string },
): { readonly ok: boolean; readonly text: string } {
  switch (result.errorCode) {
    case 'CANCELLED':
      return { ok: true, text: `Tool call ${callId} was cancelled: its caller got a terminal frame.` };
    case 'ALREADY_COMPLETED':
      return { ok: false, text: `Tool call ${callId} had already completed.` };
    case 'NOT_FOUND':
      return { ok: false, text: `Tool call ${callId} is not known: ${result.message}` };
    default:
      return { ok: false, text: `Tool call ${callId} was not cancelled (${result.errorCode}): ${result.message}` };
  }
}
