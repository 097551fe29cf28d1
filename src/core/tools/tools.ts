import { Ajv, type ValidateFunction } from 'ajv';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { IdSource } from '../ids';
import { parseBoundedJson } from '../json';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../limits';
import type { EventLog } from '../log/eventLog';
import type { WorktreeLocator } from '../worktree/model';
import { DEFAULT_EXECUTION_POLICY, ToolCallError, type ToolDescriptor, type ToolInvocation, type ToolProvider, type ToolResult } from './model';

/** The largest `args` a call may carry (a write_file of MAX_WRITE_BYTES in base64, with room for the rest). */
export const MAX_TOOL_ARGS_BYTES = 6 * 1024 * 1024;
/** The longest call_id, tool_name and provider_id. */
export const MAX_TOOL_ID_CHARS = 256;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Calls remembered for Cancel. */
const RECENT_CALLS = 1024;

/** The largest JSON result a call answers: it must fit one ToolFrame within the transport's message size. */
export const MAX_TOOL_RESULT_BYTES = TRANSPORT_MAX_MESSAGE_BYTES - 64 * 1024;

export const EXTERNAL_PROVIDERS_NOT_IMPLEMENTED = 'not implemented yet: external tool providers';

/** Readable ajv errors (ajv stops at the first: allErrors is off, so a huge args object costs one error). */
function schemaErrors(validate: ValidateFunction): string {
  return (validate.errors ?? [])
    .map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${e.keyword === 'additionalProperties' ? ` ('${String((e.params as { additionalProperty?: string }).additionalProperty)}')` : ''}`)
    .join('; ');
}

/**
 * The tools of every provider (RFC §18): describe a provider's tools, and run a call for the agent it acts as —
 * the arguments parsed (bounded) and checked against the tool's input JSON Schema (ajv), the caller's worktree
 * located for tools that need one (else `worktree_not_bound`), at most `maxConcurrency` calls of a tool at once,
 * and one `tool.call` event per call (outcome, bytes, time). Providers other than the built-in ones answer
 * `unimplemented` until external providers come (ConnectorService.RegisterProvider).
 */
export class Tools {
  private readonly providers = new Map<string, ToolProvider>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly running = new Map<string, number>();
  /**
   * The newest accepted calls (running or finished), by agent and call_id (an agent's call_id never replaces another
   * agent's): whether they run, for Cancel. A refused call is not remembered.
   */
  private readonly calls = new Map<string, { running: boolean }>();

  constructor(
    providers: readonly ToolProvider[],
    private readonly locator: WorktreeLocator,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly ids: IdSource,
  ) {
    const ajv = new Ajv({ allErrors: false, strict: true });
    for (const provider of providers) {
      this.providers.set(provider.id, provider);
      for (const tool of provider.describe()) this.validators.set(`${provider.id}/${tool.name}`, ajv.compile(tool.inputSchema));
    }
  }

  /** The providers built in (DescribeTools answers them). */
  providerIds(): string[] {
    return [...this.providers.keys()];
  }

  /** The tools of `providerId`; `unimplemented` for a provider that is not built in. */
  describe(providerId: string): readonly ToolDescriptor[] {
    return this.provider(providerId).describe();
  }

  /** Runs one call for `callerAgentId`; answers its result or throws a ToolCallError. */
  async call(callerAgentId: string, invocation: Omit<ToolInvocation, 'callId'> & { readonly callId?: string }, ctx: CallContext): Promise<ToolResult> {
    const callId = invocation.callId || this.ids.uuid();
    const started = this.clock.now();
    let entry: { running: boolean } | undefined;
    let outcome = 'ok';
    let resultBytes = 0;
    try {
      // The caller and the ids are checked before the call is remembered: what is kept for Cancel is bounded.
      checkIdentifiers(callerAgentId, callId, invocation);
      entry = { running: true };
      const key = callKey(callerAgentId, callId);
      this.calls.delete(key);
      this.calls.set(key, entry);
      if (this.calls.size > RECENT_CALLS) this.calls.delete(this.calls.keys().next().value as string);
      const result = await this.run(callerAgentId, { ...invocation, callId }, ctx);
      resultBytes = result.data.length;
      return result;
    } catch (err) {
      const failure = err instanceof ToolCallError ? err : new ToolCallError('internal', 'INTERNAL_ERROR', err instanceof Error ? err.message : String(err));
      outcome = failure.code;
      throw failure;
    } finally {
      if (entry) entry.running = false;
      try {
        this.log.record({
          correlationId: ctx.correlationId, actor: callerAgentId.slice(0, MAX_TOOL_ID_CHARS) || 'unknown', eventType: 'tool.call',
          level: outcome === 'permission_denied' ? 'WARN' : 'INFO',
          details: {
            call_id: callId.slice(0, MAX_TOOL_ID_CHARS), provider_id: invocation.providerId.slice(0, MAX_TOOL_ID_CHARS),
            tool_name: invocation.toolName.slice(0, MAX_TOOL_ID_CHARS), outcome, args_bytes: invocation.args.length,
            result_bytes: resultBytes, duration_ms: this.clock.now() - started,
          },
        });
      } catch {
        // The store refused the event (it has failed, and the host reports that): the call's answer stands, so that a
        // change already made (a commit, a delete) is not answered as an error and retried.
      }
    }
  }

  /**
   * Cancel (RFC §18.6, best effort). The built-in tools are short and bounded and run to completion, so nothing is
   * ever cancelled: a running call answers `NOT_CANCELLABLE` (it finishes and answers normally), a finished one
   * `ALREADY_COMPLETED`, an unknown one (or another agent's) `NOT_FOUND`.
   */
  cancel(callerAgentId: string, providerId: string, callId: string): { readonly errorCode: string; readonly message: string } {
    if (providerId !== '') this.provider(providerId);
    const entry = this.calls.get(callKey(callerAgentId, callId));
    if (!entry) return { errorCode: 'NOT_FOUND', message: `no call '${callId.slice(0, MAX_TOOL_ID_CHARS)}' of agent '${callerAgentId}' is known (the newest ${RECENT_CALLS} calls are)` };
    if (entry.running) return { errorCode: 'NOT_CANCELLABLE', message: 'built-in workspace calls are not cancelled: this one finishes and answers normally' };
    return { errorCode: 'ALREADY_COMPLETED', message: 'the call has already completed' };
  }

  private async run(callerAgentId: string, invocation: ToolInvocation, ctx: CallContext): Promise<ToolResult> {
    const provider = this.provider(invocation.providerId);
    const tool = provider.describe().find((t) => t.name === invocation.toolName);
    if (!tool) {
      throw new ToolCallError('not_found', 'unknown_tool', `provider '${provider.id}' has no tool '${invocation.toolName}' (its tools: ${provider.describe().map((t) => t.name).join(', ')})`);
    }
    if (invocation.contentType !== '' && invocation.contentType.split(';')[0].trim().toLowerCase() !== 'application/json') {
      throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', `content_type must be application/json (or empty), not '${invocation.contentType.slice(0, 100)}'`);
    }
    if (invocation.args.length > MAX_TOOL_ARGS_BYTES) {
      throw new ToolCallError('resource_exhausted', 'VALIDATION_ERROR', `args are larger than ${MAX_TOOL_ARGS_BYTES} bytes (${invocation.args.length})`);
    }
    let text = '{}';
    if (invocation.args.length > 0) {
      try {
        text = UTF8.decode(invocation.args);
      } catch {
        throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', 'args are not valid UTF-8');
      }
    }
    const parsed = parseBoundedJson(text, { what: 'args' }); // its size was checked above
    if (!parsed.ok) throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', parsed.reason);
    const validate = this.validators.get(`${provider.id}/${tool.name}`)!;
    if (!validate(parsed.value)) {
      throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', `args do not match the input schema of ${tool.name}: ${schemaErrors(validate)}`);
    }
    let worktreePath: string | undefined;
    if (tool.needsWorktree) {
      worktreePath = this.locator.worktreePathOf(callerAgentId);
      if (worktreePath === undefined) {
        throw new ToolCallError('failed_precondition', 'worktree_not_bound', `agent '${callerAgentId}' is not bound to a worktree: Bind it first (WorktreeService.Bind)`);
      }
    }
    const key = `${provider.id}/${tool.name}`;
    const running = this.running.get(key) ?? 0;
    if (running >= tool.maxConcurrency) {
      throw new ToolCallError('resource_exhausted', 'BUFFER_FULL', `${tool.name} already runs ${running} calls (its max_concurrency): retry later`);
    }
    this.running.set(key, running + 1);
    try {
      const value = await provider.call({
        callId: invocation.callId, toolName: tool.name, args: parsed.value as Record<string, unknown>, callerAgentId, worktreePath, ctx,
        policy: DEFAULT_EXECUTION_POLICY, stream: false, attempt: 1, signal: new AbortController().signal, emit: () => undefined,
      });
      const data = Buffer.from(JSON.stringify(value), 'utf8');
      // JSON may be larger than what was read (a control character is six bytes in a string): beyond one frame, the
      // agent gets this code rather than the transport's "message larger than max".
      if (data.length > MAX_TOOL_RESULT_BYTES) {
        throw new ToolCallError('resource_exhausted', 'OVERSIZE_PAYLOAD', `the result of ${tool.name} is ${data.length} bytes as JSON, more than the ${MAX_TOOL_RESULT_BYTES} a frame may carry: ask for less (a smaller max_bytes, a narrower path)`);
      }
      return { callId: invocation.callId, contentType: 'application/json', data };
    } finally {
      const left = (this.running.get(key) ?? 1) - 1;
      if (left === 0) this.running.delete(key);
      else this.running.set(key, left);
    }
  }

  private provider(providerId: string): ToolProvider {
    const provider = this.providers.get(providerId);
    if (!provider) throw new ToolCallError('unimplemented', 'UNIMPLEMENTED', `${EXTERNAL_PROVIDERS_NOT_IMPLEMENTED} (provider '${providerId.slice(0, MAX_TOOL_ID_CHARS)}'; built in: ${this.providerIds().join(', ')})`);
    return provider;
  }
}

/** The key of a call remembered for Cancel: the agent and its call_id. */
function callKey(agentId: string, callId: string): string {
  return `${agentId}\u0000${callId}`;
}

/** The caller must be named, and call_id, tool_name and provider_id short and without control characters. */
function checkIdentifiers(callerAgentId: string, callId: string, invocation: { readonly toolName: string; readonly providerId: string }): void {
  if (callerAgentId.trim() === '') throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', 'the calling agent is unknown: name it in metadata sw4rm-agent-id (or call with its agent credential)');
  for (const [name, value] of [['call_id', callId], ['tool_name', invocation.toolName], ['provider_id', invocation.providerId]] as const) {
    if (value.length > MAX_TOOL_ID_CHARS || /[\u0000-\u001f\u007f]/.test(value)) {
      throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', `${name} must be at most ${MAX_TOOL_ID_CHARS} characters without control characters`);
    }
  }
}
