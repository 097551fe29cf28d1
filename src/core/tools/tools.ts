import type { ValidateFunction } from 'ajv';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { HitlInvocation } from '../hitl/model';
import { parseInvocationRequest } from '../hitl/request';
import type { IdSource } from '../ids';
import { parseBoundedJson } from '../json';
import { Guard } from '../kernel/guard';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../limits';
import type { EventLog } from '../log/eventLog';
import { schedulePruning } from '../retention';
import type { WorktreeLocator } from '../worktree/model';
import {
  RawToolResult,
  ToolCallError,
  type CallInput,
  type ExecutionPolicy,
  type FrameSink,
  type ProviderInfo,
  type ToolCallRecord,
  type ToolDescriptor,
  type ToolErrorKind,
  type ToolFrame,
  type ToolProvider,
  type ToolResult,
  type ToolsChange,
  type ToolsQueries,
  type ToolsStorage,
} from './model';
import { escalationReason } from './policy';
import type { ProviderCatalog } from './providers';

/** The largest `args` a call may carry (a write_file of MAX_WRITE_BYTES in base64, with room for the rest). */
export const MAX_TOOL_ARGS_BYTES = 6 * 1024 * 1024;
/** The longest call_id, tool_name and provider_id. */
export const MAX_TOOL_ID_CHARS = 256;
/** The largest JSON result a call answers: it must fit one ToolFrame within the transport's message size. */
export const MAX_TOOL_RESULT_BYTES = TRANSPORT_MAX_MESSAGE_BYTES - 64 * 1024;
/** What a kept frame or the args excerpt keeps of its text (the call's details document). */
const EXCERPT_BYTES = 4096;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A caller's sink (its stream) that throws must not take the call's bookkeeping down with it: the fault is printed. */
const sinks = new Guard((_during, err) => console.error('[sw4rm] a tool call sink failed:', err));

export interface ToolsOptions {
  /** Calls kept (store and memory) for the Tools view and Cancel; older ones are pruned. */
  readonly recentCalls: number;
  /** Calls of one tool waiting for a free slot (max_concurrency); more are refused BUFFER_FULL. */
  readonly maxQueuedPerTool: number;
  /** Retry backoff: `exponential` waits base × 2^n (≤ max), `linear` base × (n + 1) (≤ max), `fixed` base. */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  /** Frames kept per call for its details (the newest). */
  readonly keptFrames: number;
  /**
   * How long a privilege escalation waits for its HITL decision (the invocation's deadline; its fallback then decides,
   * deny by default). 0 = the approvals' default deadline (HitlPolicy.defaultDeadlineMs, 5 minutes unless the approval
   * settings change it).
   */
  readonly escalationTimeoutMs: number;
  /** How often old calls are pruned (bounded batches, retention.ts). */
  readonly pruneIntervalMs: number;
}

export const DEFAULT_TOOLS_OPTIONS: ToolsOptions = {
  recentCalls: 1_000,
  maxQueuedPerTool: 1_000,
  backoffBaseMs: 200,
  backoffMaxMs: 10_000,
  keptFrames: 20,
  escalationTimeoutMs: 0,
  pruneIntervalMs: 60_000,
};

/** Codes a retry may cure (RFC §18.3 "transient"); a provider's TOOL_ERROR may add its own with `"retryable": true` (externalProvider take). */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set(['TOOL_TIMEOUT', 'AGENT_UNAVAILABLE', 'INTERNAL_ERROR']);

/** What the engine needs of the providers (ProviderCatalog implements it). */
export type ToolCatalogView = Pick<ProviderCatalog, 'get' | 'validators' | 'infos' | 'onDidChange'>;

export interface ToolsDeps {
  readonly store: ToolsStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly locator: WorktreeLocator;
  readonly hitl: Pick<HitlService, 'open' | 'whenSettled' | 'cancel'>;
  readonly catalog: ToolCatalogView;
}

/** One call the engine is running (queued, awaiting approval, running, or waiting to retry). */
interface ActiveCall {
  record: ToolCallRecord;
  readonly key: string;
  readonly toolKey: string;
  readonly provider: ToolProvider;
  readonly tool: ToolDescriptor;
  readonly args: Record<string, unknown>;
  readonly output: ValidateFunction | undefined;
  readonly worktreePath: string | undefined;
  readonly policy: ExecutionPolicy;
  readonly stream: boolean;
  readonly ctx: CallContext;
  readonly sink: FrameSink;
  /** The current attempt's abort controller (a new one per attempt). */
  controller: AbortController | undefined;
  attempt: number;
  frames: number;
  bytes: number;
  ended: boolean;
  /** Holds a max_concurrency slot of its tool. */
  holdsSlot: boolean;
  readonly timers: Disposable[];
  /** The timeout of the current attempt. */
  attemptTimer: Disposable | undefined;
  /** A HITL escalation is open and undecided. */
  awaitingDecision: boolean;
}

interface KeptFrame {
  readonly frameNo: number;
  readonly final: boolean;
  readonly contentType: string;
  readonly text: string;
}

/**
 * The one call engine (RFC §18): every call, whoever asks (ToolService, a TOOL_CALL envelope, the coordinator), is
 * checked (ids, provider, tool, content type, args bounded and valid against the input schema, the worktree),
 * escalated to a human when its policy asks for privilege or full network access, queued FIFO at its tool's
 * max_concurrency, run with its timeout and wall budget on the Clock, retried (idempotent tools only), and relayed to
 * its caller as numbered frames and exactly one terminal (end or fail). Each call is one ToolCallRecord (written at
 * start, at each state change and at the end) and two log events (`tool.call.started`, `tool.call`).
 */
export class Tools implements ToolsQueries, Disposable {
  private readonly active = new Map<string, ActiveCall>();
  /** Calls of each tool holding a slot, and those waiting for one (FIFO). */
  private readonly running = new Map<string, number>();
  private readonly queues = new Map<string, ActiveCall[]>();
  /** The newest frames of recent calls, by call_id (insertion order = age). */
  private readonly kept = new Map<string, KeptFrame[]>();
  private readonly changed = new Emitter<ToolsChange>();
  private readonly interrupted = new Emitter<ToolCallRecord>();
  private readonly pruning: Disposable;
  private readonly catalogSubscription: Disposable;
  private disposed = false;

  readonly onDidChange: Event<ToolsChange> = this.changed.event;
  /** A call left running by a crash, ended INTERRUPTED by restore() (the envelope bridge answers its caller). */
  readonly onDidInterrupt: Event<ToolCallRecord> = this.interrupted.event;

  constructor(
    private readonly deps: ToolsDeps,
    private readonly options: ToolsOptions = DEFAULT_TOOLS_OPTIONS,
  ) {
    this.catalogSubscription = deps.catalog.onDidChange((change) => this.changed.fire(change));
    this.pruning = schedulePruning(deps.clock, options.pruneIntervalMs, () => {
      const batch = 500;
      try {
        return (
          this.deps.store.transaction(() => this.deps.store.tools.pruneCalls(this.options.recentCalls, batch)) >= batch
        );
      } catch (err) {
        this.deps.log.internalError('tools', 'prune', err);
        return false;
      }
    });
  }

  // ---------------------------------------------------------------- queries

  providers(): ProviderInfo[] {
    return this.deps.catalog.infos();
  }

  /** The ids of the providers (built in and registered). */
  providerIds(): string[] {
    return this.providers().map((p) => p.providerId);
  }

  /** The tools of `providerId`; NOT_FOUND for an unknown provider. */
  describe(providerId: string): readonly ToolDescriptor[] {
    const provider = this.deps.catalog.get(providerId);
    if (!provider) throw unknownProvider(providerId, this.providerIds());
    return provider.describe();
  }

  recentCalls(limit: number): ToolCallRecord[] {
    return this.deps.store.tools.recentCalls(Math.max(0, Math.min(limit, this.options.recentCalls)));
  }

  callRecord(callId: string): ToolCallRecord | undefined {
    return this.deps.store.tools.call(callId);
  }

  callFrames(callId: string): readonly KeptFrame[] {
    return this.kept.get(callId) ?? [];
  }

  // ---------------------------------------------------------------- calls

  /** Runs one call whose answer is its final frame (earlier frames are counted, not returned). */
  call(
    callerAgentId: string,
    input: Omit<CallInput, 'policy' | 'stream' | 'via'> & Partial<Pick<CallInput, 'policy' | 'stream' | 'via'>>,
    ctx: CallContext,
  ): Promise<ToolResult> {
    return new Promise<ToolResult>((resolve, reject) => {
      try {
        this.start(callerAgentId, { policy: DEFAULT_POLICY, stream: false, via: 'internal', ...input }, ctx, {
          frame: () => undefined,
          end: (frame) => resolve({ callId: frame.callId, contentType: frame.contentType, data: frame.data }),
          fail: reject,
        });
      } catch (err) {
        reject(err);
      }
    });
  }

  /**
   * Starts one call. What can be checked at once is (a ToolCallError is thrown, nothing is kept); anything later
   * reaches `sink`, never before start() has returned: frames in order from 0, then exactly one of end / fail.
   */
  start(callerAgentId: string, input: CallInput, ctx: CallContext, sink: FrameSink): { readonly callId: string } {
    if (this.disposed) throw new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', 'the coordinator is stopping');
    const callId = input.callId || this.deps.ids.uuid();
    try {
      return this.admitted(callerAgentId, callId, input, ctx, sink);
    } catch (err) {
      // A refused call is not kept, but logged like any other (one `tool.call` event), its ids cut to their bound.
      const refusal = asToolError(err);
      try {
        const cut = (value: string) => value.slice(0, MAX_TOOL_ID_CHARS);
        this.deps.log.record({
          correlationId: cut(callId),
          actor: cut(callerAgentId) || 'unknown',
          eventType: 'tool.call',
          level: ['PERMISSION_DENIED', 'INTERNAL_ERROR'].includes(refusal.code.toUpperCase()) ? 'WARN' : 'INFO',
          details: {
            call_id: cut(callId),
            provider_id: cut(input.providerId),
            tool_name: cut(input.toolName),
            outcome: 'error',
            error_code: refusal.code,
            error: refusal.message.slice(0, 1024),
            frames: 0,
            bytes: 0,
            duration_ms: 0,
            attempts: 0,
            via: input.via,
            args_bytes: input.args.length,
          },
        });
      } catch {
        // The store refused the event (it has failed, and the host reports that): the refusal stands.
      }
      throw refusal;
    }
  }

  private admitted(
    callerAgentId: string,
    callId: string,
    input: CallInput,
    ctx: CallContext,
    sink: FrameSink,
  ): { readonly callId: string } {
    checkIdentifiers(callerAgentId, callId, input);
    const provider = this.deps.catalog.get(input.providerId);
    if (!provider) throw unknownProvider(input.providerId, this.providerIds());
    const tool = provider.describe().find((t) => t.name === input.toolName);
    if (!tool) {
      throw new ToolCallError(
        'not_found',
        'unknown_tool',
        `provider '${provider.id}' has no tool '${input.toolName}' (its tools: ${provider
          .describe()
          .map((t) => t.name)
          .join(', ')})`,
      );
    }
    if (provider.available && !provider.available()) {
      throw new ToolCallError(
        'unavailable',
        'AGENT_UNAVAILABLE',
        `provider '${provider.id}' is not available now: ${provider.unavailableReason?.() ?? 'its agent is offline'}`,
      );
    }
    if (input.contentType !== '' && input.contentType.split(';')[0].trim().toLowerCase() !== 'application/json') {
      throw new ToolCallError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `content_type must be application/json (or empty), not '${input.contentType.slice(0, 100)}'`,
      );
    }
    if (input.args.length > MAX_TOOL_ARGS_BYTES) {
      throw new ToolCallError(
        'resource_exhausted',
        'VALIDATION_ERROR',
        `args are larger than ${MAX_TOOL_ARGS_BYTES} bytes (${input.args.length})`,
      );
    }
    let text = '{}';
    if (input.args.length > 0) {
      try {
        text = UTF8.decode(input.args);
      } catch {
        throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', 'args are not valid UTF-8');
      }
    }
    const parsed = parseBoundedJson(text, { what: 'args' }); // its size was checked above
    if (!parsed.ok) throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', parsed.reason);
    const validators = this.deps.catalog.validators(provider.id, tool.name);
    if (!validators)
      throw new ToolCallError('internal', 'INTERNAL_ERROR', `no schema is compiled for ${provider.id}/${tool.name}`);
    if (!validators.input(parsed.value)) {
      throw new ToolCallError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `args do not match the input schema of ${tool.name}: ${schemaErrors(validators.input)}`,
      );
    }
    let worktreePath: string | undefined;
    if (tool.needsWorktree || input.policy.worktreeRequired) {
      worktreePath = this.deps.locator.worktreePathOf(callerAgentId);
      if (worktreePath === undefined) {
        throw new ToolCallError(
          'failed_precondition',
          'worktree_not_bound',
          `agent '${callerAgentId}' is not bound to a worktree: Bind it first (WorktreeService.Bind)`,
        );
      }
    }
    const key = callKey(callerAgentId, callId);
    if (this.active.has(key) || this.deps.store.tools.call(callId) !== undefined) {
      throw new ToolCallError(
        'already_exists',
        'ALREADY_EXISTS',
        `call_id '${callId}' is already taken: choose another (or leave it empty and one is assigned)`,
      );
    }

    const now = this.deps.clock.now();
    const escalation = escalationReason(input.policy);
    const call: ActiveCall = {
      record: {
        callId,
        callerAgentId,
        providerId: provider.id,
        toolName: tool.name,
        via: input.via,
        stream: input.stream,
        outcome: escalation ? 'awaiting_approval' : 'queued',
        errorCode: '',
        errorMessage: '',
        startedAt: now,
        endedAt: 0,
        frames: 0,
        bytes: 0,
        attempts: 0,
        argsExcerpt: excerpt(text),
        policy: input.policy,
        invocationId: '',
        messageId: input.messageId ?? '',
      },
      key,
      toolKey: `${provider.id}/${tool.name}`,
      provider,
      tool,
      args: parsed.value as Record<string, unknown>,
      output: validators.output,
      worktreePath,
      policy: input.policy,
      stream: input.stream,
      ctx,
      sink,
      controller: undefined,
      attempt: 0,
      frames: 0,
      bytes: 0,
      ended: false,
      holdsSlot: false,
      timers: [],
      attemptTimer: undefined,
      awaitingDecision: false,
    };
    this.active.set(key, call);
    this.keep(callId, []);
    this.save(call);
    this.deps.log.record({
      correlationId: callId,
      actor: callerAgentId,
      eventType: 'tool.call.started',
      details: {
        call_id: callId,
        provider_id: provider.id,
        tool_name: tool.name,
        via: input.via,
        stream: input.stream,
        args_bytes: input.args.length,
        policy: policyDetails(input.policy),
      },
    });
    if (escalation) this.escalate(call, escalation);
    else queueMicrotask(() => this.admit(call));
    return { callId };
  }

  /** Cancel (RFC §18.6, best effort): a running call ends CANCELLED with a terminal frame saying how far it got. */
  cancel(
    callerAgentId: string,
    providerId: string,
    callId: string,
    _ctx?: CallContext,
  ): { readonly errorCode: 'CANCELLED' | 'NOT_FOUND' | 'ALREADY_COMPLETED'; readonly message: string } {
    const notFound = {
      errorCode: 'NOT_FOUND' as const,
      message: `no call '${callId.slice(0, MAX_TOOL_ID_CHARS)}' of agent '${callerAgentId.slice(0, MAX_TOOL_ID_CHARS)}'${providerId ? ` to provider '${providerId.slice(0, MAX_TOOL_ID_CHARS)}'` : ''} is known (the newest ${this.options.recentCalls} calls are)`,
    };
    const call = this.active.get(callKey(callerAgentId, callId));
    if (call && (providerId === '' || providerId === call.provider.id)) {
      const summary = { cancelled: true, partial_result: call.frames > 0, frames: call.frames };
      call.controller?.abort(new ToolCallError('cancelled', 'CANCELLED', `cancelled by ${callerAgentId}`));
      this.finish(call, 'cancelled', undefined, {
        callId,
        frameNo: call.frames,
        final: true,
        contentType: 'application/json',
        data: Buffer.alloc(0),
        summary: Buffer.from(JSON.stringify(summary)),
      });
      return {
        errorCode: 'CANCELLED',
        message: `cancelled after ${call.frames} frame${call.frames === 1 ? '' : 's'}; the provider was told to stop`,
      };
    }
    const record = this.deps.store.tools.call(callId);
    if (!record || record.callerAgentId !== callerAgentId || (providerId !== '' && providerId !== record.providerId))
      return notFound;
    return {
      errorCode: 'ALREADY_COMPLETED',
      message: `the call has already completed (${record.outcome}${record.errorCode ? ` ${record.errorCode}` : ''})`,
    };
  }

  /** The caller's stream went away: the call is aborted and nothing more is sent (it ends CANCELLED). */
  abandon(callId: string): void {
    for (const call of this.active.values()) {
      if (call.record.callId !== callId) continue;
      call.controller?.abort(new ToolCallError('cancelled', 'CANCELLED', 'the caller went away'));
      this.finish(
        call,
        'cancelled',
        new ToolCallError('cancelled', 'CANCELLED', 'the caller went away'),
        undefined,
        true,
      );
    }
  }

  /**
   * At start: calls a crash left unfinished (running, queued, awaiting approval) end as error INTERRUPTED, one
   * `tool.call` event each; onDidInterrupt lets the envelope bridge answer their callers.
   */
  restore(ctx: CallContext): void {
    const now = this.deps.clock.now();
    for (const stale of this.deps.store.tools.unfinishedCalls()) {
      const record: ToolCallRecord = {
        ...stale,
        outcome: 'error',
        errorCode: 'INTERRUPTED',
        errorMessage: 'the coordinator stopped while the call ran: call again',
        endedAt: now,
      };
      this.deps.store.transaction(() => {
        this.deps.store.tools.upsertCall(record);
        this.deps.log.record({
          correlationId: record.callId,
          actor: record.callerAgentId,
          eventType: 'tool.call',
          level: 'WARN',
          details: { ...endDetails(record), restored_by: ctx.correlationId },
        });
      });
      this.interrupted.fire(record);
      this.changed.fire({ kind: 'call', id: record.callId });
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const call of [...this.active.values()]) {
      call.controller?.abort(new ToolCallError('unavailable', 'INTERRUPTED', 'the coordinator is stopping'));
      this.finish(
        call,
        'error',
        new ToolCallError('unavailable', 'INTERRUPTED', 'the coordinator stopped while the call ran: call again'),
      );
    }
    this.pruning.dispose();
    this.catalogSubscription.dispose();
    this.changed.dispose();
    this.interrupted.dispose();
  }

  // ---------------------------------------------------------------- the life of a call

  /** ELEVATED / PRIVILEGED / FULL_ACCESS: a HITL TOOL_PRIVILEGE_ESCALATION (an auto rule is the policy pre-approval). */
  private escalate(call: ActiveCall, reason: string): void {
    const r = call.record;
    const place = this.deps.locator.placeOf(r.callerAgentId);
    const warn = call.policy.privilegeLevel === 'PRIVILEGED';
    this.deps.log.record({
      correlationId: r.callId,
      actor: r.callerAgentId,
      eventType: 'tool.privilege',
      level: warn ? 'WARN' : 'INFO',
      details: {
        call_id: r.callId,
        provider_id: r.providerId,
        tool_name: r.toolName,
        privilege_level: call.policy.privilegeLevel,
        network_policy: call.policy.networkPolicy,
        reason,
      },
    });
    let invocation: HitlInvocation;
    try {
      const now = this.deps.clock.now();
      invocation = this.deps.hitl.open(
        parseInvocationRequest(
          {
            reason_type: 'TOOL_PRIVILEGE_ESCALATION',
            subject: {
              repo_id: place?.repoId ?? '',
              worktree_id: place?.worktreeId ?? '',
              task_id: `tool:${r.providerId}:${r.toolName}`,
            },
            summary: `${r.callerAgentId} calls ${r.providerId}/${r.toolName} with ${reason.replace(/^the call asks for /, '')}`,
            facts: {
              call_id: r.callId,
              provider_id: r.providerId,
              tool_name: r.toolName,
              caller: r.callerAgentId,
              args: r.argsExcerpt,
              policy: policyDetails(call.policy),
              side_effects: call.tool.sideEffects,
            },
            risk_notes: reason,
            proposed_actions: ['approve', 'deny'],
            ...(this.options.escalationTimeoutMs > 0 ? { deadline_ms: this.options.escalationTimeoutMs } : {}),
          },
          { requester: r.callerAgentId, correlationId: r.callId, now },
        ),
        { kind: 'internal', component: 'tools' },
        { correlationId: r.callId },
      ).invocation;
    } catch (err) {
      queueMicrotask(() =>
        this.finish(
          call,
          'error',
          new ToolCallError(
            'permission_denied',
            'PERMISSION_DENIED',
            `the escalation could not be asked: ${err instanceof Error ? err.message : String(err)}`,
          ),
        ),
      );
      return;
    }
    call.awaitingDecision = true;
    this.update(call, { invocationId: invocation.id });
    this.deps.hitl.whenSettled(invocation.id).then(
      (settled) => {
        call.awaitingDecision = false;
        if (call.ended) return;
        if (settled.decision?.action === 'approve') this.admit(call);
        else {
          const why = settled.decision
            ? `${settled.decision.action} by ${settled.decision.origin.by}${settled.decision.rationale ? `: ${settled.decision.rationale}` : ''}`
            : settled.state;
          this.finish(
            call,
            'error',
            new ToolCallError(
              'permission_denied',
              'PERMISSION_DENIED',
              `the escalation (${reason}) was not approved (${why})`,
            ),
          );
        }
      },
      (err: unknown) => {
        call.awaitingDecision = false;
        if (!call.ended)
          this.finish(
            call,
            'error',
            new ToolCallError(
              'permission_denied',
              'PERMISSION_DENIED',
              `the escalation was not decided: ${String(err)}`,
            ),
          );
      },
    );
  }

  /** Takes a slot of the tool's max_concurrency, or waits in its FIFO (bounded). */
  private admit(call: ActiveCall): void {
    if (call.ended) return;
    const running = this.running.get(call.toolKey) ?? 0;
    if (running < Math.max(1, call.tool.maxConcurrency)) {
      this.running.set(call.toolKey, running + 1);
      call.holdsSlot = true;
      this.begin(call);
      return;
    }
    const queue = this.queues.get(call.toolKey) ?? [];
    if (queue.length >= this.options.maxQueuedPerTool) {
      this.finish(
        call,
        'error',
        new ToolCallError(
          'resource_exhausted',
          'BUFFER_FULL',
          `${call.tool.name} runs ${running} calls (its max_concurrency) and ${queue.length} wait: retry later`,
        ),
      );
      return;
    }
    queue.push(call);
    this.queues.set(call.toolKey, queue);
    if (call.record.outcome !== 'queued') this.update(call, { outcome: 'queued' });
  }

  /** The call starts running: its wall budget starts now (timers start when the call starts running). */
  private begin(call: ActiveCall): void {
    if (call.policy.budgetWallMs > 0) {
      call.timers.push(
        this.deps.clock.setTimer(call.policy.budgetWallMs, () => {
          if (call.ended) return;
          const error = new ToolCallError(
            'deadline_exceeded',
            'WALL_TIMEOUT',
            `the call ran longer than its budget_wall_ms (${call.policy.budgetWallMs} ms)`,
          );
          call.controller?.abort(error);
          this.finish(call, 'error', error);
        }),
      );
    }
    this.attempt(call);
  }

  private attempt(call: ActiveCall): void {
    if (call.ended) return;
    call.attempt += 1;
    const attempt = call.attempt;
    const controller = new AbortController();
    call.controller = controller;
    this.update(call, { outcome: 'running', attempts: attempt });
    const timeoutMs = call.policy.timeoutMs > 0 ? call.policy.timeoutMs : call.tool.defaultTimeoutS * 1000;
    const current = (): boolean => !call.ended && call.attempt === attempt && !controller.signal.aborted;
    if (timeoutMs > 0) {
      call.attemptTimer = this.deps.clock.setTimer(timeoutMs, () => {
        if (!current()) return;
        const error = new ToolCallError(
          'deadline_exceeded',
          'TOOL_TIMEOUT',
          `the call took longer than its timeout (${timeoutMs} ms)`,
        );
        controller.abort(error);
        this.failed(call, error);
      });
    }
    let promise: Promise<unknown>;
    try {
      promise = call.provider.call({
        callId: call.record.callId,
        toolName: call.tool.name,
        args: call.args,
        callerAgentId: call.record.callerAgentId,
        worktreePath: call.worktreePath,
        policy: call.policy,
        stream: call.stream,
        attempt,
        signal: controller.signal,
        ctx: call.ctx,
        emit: (data, contentType) => {
          if (!current()) return;
          const frame: ToolFrame = {
            callId: call.record.callId,
            frameNo: call.frames,
            final: false,
            contentType: contentType || 'application/json',
            data,
            summary: Buffer.alloc(0),
          };
          call.frames += 1;
          call.bytes += data.length;
          this.keepFrame(frame);
          sinks.run('frame', () => call.sink.frame(frame));
        },
      });
    } catch (err) {
      promise = Promise.reject(err);
    }
    promise.then(
      (value) => {
        if (!current()) return;
        call.attemptTimer?.dispose();
        let frame: ToolFrame;
        try {
          frame = this.finalFrame(call, value);
        } catch (err) {
          this.finish(call, 'error', asToolError(err));
          return;
        }
        this.finish(call, 'ok', undefined, frame);
      },
      (err: unknown) => {
        if (!current()) return;
        call.attemptTimer?.dispose();
        this.failed(call, asToolError(err));
      },
    );
  }

  /** An attempt failed: retried when the tool is idempotent, the code transient, retries are left and no frame went out. */
  private failed(call: ActiveCall, error: ToolCallError): void {
    const retryable =
      RETRYABLE_CODES.has(error.code) || (error as ToolCallError & { retryable?: boolean }).retryable === true;
    if (retryable && call.tool.idempotent && call.attempt <= call.policy.maxRetries && call.frames === 0) {
      const delay = backoffMs(
        call.policy.backoff,
        call.attempt - 1,
        this.options.backoffBaseMs,
        this.options.backoffMaxMs,
      );
      this.deps.log.record({
        correlationId: call.record.callId,
        actor: call.record.callerAgentId,
        eventType: 'tool.call.retry',
        details: {
          call_id: call.record.callId,
          attempt: call.attempt,
          error_code: error.code,
          error: error.message,
          backoff_ms: delay,
        },
      });
      call.controller = undefined;
      call.timers.push(this.deps.clock.setTimer(delay, () => this.attempt(call)));
      return;
    }
    this.finish(call, 'error', error);
  }

  private finalFrame(call: ActiveCall, value: unknown): ToolFrame {
    const callId = call.record.callId;
    if (value instanceof RawToolResult) {
      if (value.data.length > MAX_TOOL_RESULT_BYTES) throw oversize(call, value.data.length);
      // JSON content (a provider's final frame with a summary, say) is checked against the output schema like a value.
      if (call.output && isJsonContentType(value.contentType)) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(value.data.toString('utf8'));
        } catch {
          throw new ToolCallError(
            'invalid_argument',
            'VALIDATION_ERROR',
            'result does not match the output schema: it is not JSON',
          );
        }
        if (!call.output(parsed)) {
          throw new ToolCallError(
            'invalid_argument',
            'VALIDATION_ERROR',
            `result does not match the output schema: ${schemaErrors(call.output)}`,
          );
        }
      }
      return {
        callId,
        frameNo: call.frames,
        final: true,
        contentType: value.contentType,
        data: value.data,
        summary: value.summary ?? Buffer.alloc(0),
      };
    }
    if (Buffer.isBuffer(value)) {
      if (value.length > MAX_TOOL_RESULT_BYTES) throw oversize(call, value.length);
      return {
        callId,
        frameNo: call.frames,
        final: true,
        contentType: 'application/octet-stream',
        data: value,
        summary: Buffer.alloc(0),
      };
    }
    const data = Buffer.from(JSON.stringify(value ?? null), 'utf8');
    // JSON may be larger than what was read (a control character is six bytes in a string): beyond one frame, the
    // caller gets this code rather than the transport's "message larger than max".
    if (data.length > MAX_TOOL_RESULT_BYTES) throw oversize(call, data.length);
    if (call.output && !call.output(value ?? null)) {
      throw new ToolCallError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `result does not match the output schema: ${schemaErrors(call.output)}`,
      );
    }
    return {
      callId,
      frameNo: call.frames,
      final: true,
      contentType: 'application/json',
      data,
      summary: Buffer.alloc(0),
    };
  }

  /** Ends a call once: the terminal reaches the sink (unless silent), its slot passes on, the record and `tool.call` are written. */
  private finish(
    call: ActiveCall,
    outcome: 'ok' | 'cancelled' | 'error',
    error?: ToolCallError,
    frame?: ToolFrame,
    silent = false,
  ): void {
    if (call.ended) return;
    call.ended = true;
    call.attemptTimer?.dispose();
    for (const timer of call.timers) timer.dispose();
    this.active.delete(call.key);
    const queue = this.queues.get(call.toolKey);
    if (queue) {
      const at = queue.indexOf(call);
      if (at >= 0) queue.splice(at, 1);
      if (queue.length === 0) this.queues.delete(call.toolKey);
    }
    if (call.holdsSlot) {
      call.holdsSlot = false;
      const left = (this.running.get(call.toolKey) ?? 1) - 1;
      if (left <= 0) this.running.delete(call.toolKey);
      else this.running.set(call.toolKey, left);
      const next = this.queues.get(call.toolKey)?.shift();
      if (this.queues.get(call.toolKey)?.length === 0) this.queues.delete(call.toolKey);
      if (next) queueMicrotask(() => this.admit(next));
    }
    if (call.awaitingDecision) {
      call.awaitingDecision = false;
      sinks.run('cancel-escalation', () =>
        this.deps.hitl.cancel(
          call.record.invocationId,
          'coordinator',
          'the tool call ended before its escalation was decided',
          call.ctx,
        ),
      );
    }
    if (frame) {
      call.bytes += frame.data.length;
      this.keepFrame(frame);
    }
    const framesCount = call.frames + (frame ? 1 : 0);
    const record: ToolCallRecord = {
      ...call.record,
      outcome,
      errorCode: error?.code ?? '',
      errorMessage: error?.message ?? '',
      endedAt: this.deps.clock.now(),
      frames: framesCount,
      bytes: call.bytes,
      attempts: call.attempt,
    };
    call.record = record;
    try {
      this.deps.store.transaction(() => {
        this.deps.store.tools.upsertCall(record);
        this.deps.log.record({
          correlationId: record.callId,
          actor: record.callerAgentId,
          eventType: 'tool.call',
          level:
            outcome === 'error' && ['PERMISSION_DENIED', 'INTERNAL_ERROR'].includes(record.errorCode.toUpperCase())
              ? 'WARN'
              : 'INFO',
          details: endDetails(record),
        });
      });
    } catch (err) {
      // The store refused (it has failed, and the host reports that): the call's answer stands.
      this.deps.log.internalError('tools', record.callId, err);
    }
    this.changed.fire({ kind: 'call', id: record.callId });
    if (silent) return;
    if (frame) sinks.run('end', () => call.sink.end(frame));
    else if (error) sinks.run('fail', () => call.sink.fail(error));
  }

  /** A state change of a call in progress (not per frame). */
  private update(call: ActiveCall, change: Partial<ToolCallRecord>): void {
    call.record = { ...call.record, ...change, frames: call.frames, bytes: call.bytes };
    this.save(call);
  }

  private save(call: ActiveCall): void {
    try {
      this.deps.store.transaction(() => this.deps.store.tools.upsertCall(call.record));
    } catch (err) {
      this.deps.log.internalError('tools', call.record.callId, err);
    }
    this.changed.fire({ kind: 'call', id: call.record.callId });
  }

  private keep(callId: string, frames: KeptFrame[]): void {
    this.kept.delete(callId);
    this.kept.set(callId, frames);
    while (this.kept.size > this.options.recentCalls) this.kept.delete(this.kept.keys().next().value as string);
  }

  private keepFrame(frame: ToolFrame): void {
    const frames = this.kept.get(frame.callId);
    if (!frames) return;
    const text =
      frame.data.subarray(0, EXCERPT_BYTES).toString('utf8') + (frame.data.length > EXCERPT_BYTES ? '…' : '');
    frames.push({ frameNo: frame.frameNo, final: frame.final, contentType: frame.contentType, text });
    while (frames.length > this.options.keptFrames) frames.shift();
  }
}

const DEFAULT_POLICY: ExecutionPolicy = {
  timeoutMs: 0,
  maxRetries: 0,
  backoff: 'exponential',
  worktreeRequired: false,
  networkPolicy: 'DENY_ALL',
  privilegeLevel: 'MINIMAL',
  budgetCpuMs: 0,
  budgetWallMs: 0,
};

/** The wait before retry `n` (0-based). */
export function backoffMs(kind: ExecutionPolicy['backoff'], n: number, baseMs: number, maxMs: number): number {
  if (kind === 'fixed') return Math.min(baseMs, maxMs);
  if (kind === 'linear') return Math.min(baseMs * (n + 1), maxMs);
  return Math.min(baseMs * 2 ** Math.min(n, 30), maxMs);
}

function oversize(call: ActiveCall, bytes: number): ToolCallError {
  return new ToolCallError(
    'resource_exhausted',
    'OVERSIZE_PAYLOAD',
    `the result of ${call.tool.name} is ${bytes} bytes, more than the ${MAX_TOOL_RESULT_BYTES} a frame may carry: ask for less (a smaller max_bytes, a narrower path)`,
  );
}

function unknownProvider(providerId: string, known: readonly string[]): ToolCallError {
  return new ToolCallError(
    'not_found',
    'NOT_FOUND',
    `no tool provider '${providerId.slice(0, MAX_TOOL_ID_CHARS)}' is registered (known: ${known.join(', ') || 'none'})`,
  );
}

function asToolError(err: unknown): ToolCallError {
  if (err instanceof ToolCallError) return err;
  return new ToolCallError('internal', 'INTERNAL_ERROR', err instanceof Error ? err.message : String(err));
}

function excerpt(text: string): string {
  return text.length > EXCERPT_BYTES ? `${text.slice(0, EXCERPT_BYTES)}…` : text;
}

function policyDetails(policy: ExecutionPolicy): Record<string, unknown> {
  return {
    timeout_ms: policy.timeoutMs,
    max_retries: policy.maxRetries,
    backoff: policy.backoff,
    worktree_required: policy.worktreeRequired,
    network_policy: policy.networkPolicy,
    privilege_level: policy.privilegeLevel,
    budget_cpu_ms: policy.budgetCpuMs,
    budget_wall_ms: policy.budgetWallMs,
  };
}

function endDetails(record: ToolCallRecord): Record<string, unknown> {
  return {
    call_id: record.callId,
    provider_id: record.providerId,
    tool_name: record.toolName,
    outcome: record.outcome,
    error_code: record.errorCode,
    error: record.errorMessage || undefined,
    frames: record.frames,
    bytes: record.bytes,
    duration_ms: Math.max(0, record.endedAt - record.startedAt),
    attempts: record.attempts,
    via: record.via,
    invocation_id: record.invocationId || undefined,
  };
}

/** Readable ajv errors (ajv stops at the first: allErrors is off, so a huge args object costs one error). */
export function schemaErrors(validate: ValidateFunction): string {
  return (validate.errors ?? [])
    .map(
      (e) =>
        `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${e.keyword === 'additionalProperties' ? ` ('${String((e.params as { additionalProperty?: string }).additionalProperty)}')` : ''}`,
    )
    .join('; ');
}

/** The key of a call: the agent and its call_id (an agent's call_id never reaches another agent's call). */
function callKey(agentId: string, callId: string): string {
  return `${agentId}\u0000${callId}`;
}

/** The caller must be named, and call_id, tool_name and provider_id short and without control characters. */
function checkIdentifiers(
  callerAgentId: string,
  callId: string,
  input: { readonly toolName: string; readonly providerId: string },
): void {
  if (callerAgentId.trim() === '')
    throw new ToolCallError(
      'invalid_argument',
      'VALIDATION_ERROR',
      'the calling agent is unknown: name it in metadata sw4rm-agent-id (or call with its agent credential)',
    );
  for (const [name, value] of [
    ['call_id', callId],
    ['tool_name', input.toolName],
    ['provider_id', input.providerId],
  ] as const) {
    if (value.length > MAX_TOOL_ID_CHARS || /[\u0000-\u001f\u007f]/.test(value)) {
      throw new ToolCallError(
        'invalid_argument',
        'VALIDATION_ERROR',
        `${name} must be at most ${MAX_TOOL_ID_CHARS} characters without control characters`,
      );
    }
  }
}

export type { ToolErrorKind };

/** Whether a content type is JSON (`application/json`, any parameters; empty counts as JSON). */
function isJsonContentType(contentType: string): boolean {
  const base = contentType.split(';')[0].trim().toLowerCase();
  return base === '' || base === 'application/json';
}
