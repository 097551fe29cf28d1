import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { DisposableStore, type Disposable } from '../events';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory, RegistryChange } from '../registry/model';
import type { Envelope, Refusal } from '../router/envelope';
import type { CoordinatorMailbox, CoordinatorOutbox, OutboxUpdate } from '../router/model';
import {
  RawToolResult,
  ToolCallError,
  type ToolDescriptor,
  type ToolErrorKind,
  type ToolProvider,
  type ToolRequest,
} from './model';

/**
 * Calls to agents over the messaging plane (README, "Write a tool provider"): a TOOL_CALL envelope from `coordinator`
 * to the agent (correlation_id = call_id), TOOL_RESULT frames / a TOOL_ERROR back to `coordinator`, a CONTROL
 * `cancel_tool_call` on abort; the agent leaving or going unavailable fails its calls AGENT_UNAVAILABLE.
 * Owner: the engine part.
 */
export interface AgentToolTransport {
  /** Runs one call on `agentId` as `providerId`; frames through request.emit; answers the final result (JSON or Buffer). */
  callAgent(agentId: string, providerId: string, request: ToolRequest): Promise<unknown>;
  /** Whether the agent can take calls (registered, online, not shutting down). */
  agentAvailable(agentId: string): boolean;
}

export interface ToolTransportDeps {
  readonly outbox: CoordinatorOutbox;
  readonly mailbox: CoordinatorMailbox;
  readonly agents: AgentDirectory;
  readonly log: EventLog;
  readonly clock: Clock;
}

/** Frames a provider may send ahead of the one awaited (a gap waits); beyond, the call fails INTERNAL_ERROR. */
export const MAX_FRAMES_AHEAD = 64;

/** The TTL of a TOOL_CALL with neither a timeout nor a wall budget: one that waits longer in the inbox expires. */
export const TOOL_CALL_TTL_MS = 60 * 60 * 1000;

/**
 * A TOOL_CALL's TTL (ms): the call's timeout or wall budget (the smaller set one), else TOOL_CALL_TTL_MS, so that a
 * call never waits for ever in an offline provider's inbox. It bounds the wait before the provider ACKs RECEIVED.
 */
export function toolCallTtlMs(timeoutMs: number, budgetWallMs: number): number {
  const bounds = [timeoutMs, budgetWallMs].filter((ms) => ms > 0);
  return bounds.length > 0 ? Math.min(...bounds) : TOOL_CALL_TTL_MS;
}

/** Agent states in which calls are not sent (and running ones fail). */
const GONE_STATES = new Set(['SHUTTING_DOWN', 'FAILED_STATE', 'TERMINATED']);

/** TOOL_ERROR codes that keep their meaning (gRPC status) when a provider answers them; any other is `internal`. */
const KIND_OF_CODE: Readonly<Record<string, ToolErrorKind>> = {
  VALIDATION_ERROR: 'invalid_argument',
  unknown_tool: 'not_found',
  NOT_FOUND: 'not_found',
  PERMISSION_DENIED: 'permission_denied',
  worktree_not_bound: 'failed_precondition',
  BUFFER_FULL: 'resource_exhausted',
  OVERSIZE_PAYLOAD: 'resource_exhausted',
  TOOL_TIMEOUT: 'deadline_exceeded',
  WALL_TIMEOUT: 'deadline_exceeded',
  CPU_BUDGET_EXCEEDED: 'resource_exhausted',
  AGENT_UNAVAILABLE: 'unavailable',
  INTERRUPTED: 'unavailable',
  CANCELLED: 'cancelled',
};

/** The kind (gRPC status) of a TOOL_ERROR code. */
export function kindOfCode(code: string): ToolErrorKind {
  return KIND_OF_CODE[code] ?? 'internal';
}

interface Frame {
  readonly final: boolean;
  readonly contentType: string;
  readonly data: Buffer;
  readonly value: unknown;
  readonly json: boolean;
  readonly summary: Buffer | undefined;
}

/** One call on its way to an agent and back. */
interface AgentCall {
  readonly callId: string;
  readonly agentId: string;
  readonly request: ToolRequest;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: ToolCallError) => void;
  messageId: string;
  next: number;
  readonly ahead: Map<number, Frame>;
  done: boolean;
  abortListener: (() => void) | undefined;
}

export class ToolTransport implements AgentToolTransport, Disposable {
  private readonly calls = new Map<string, AgentCall>();
  private readonly byMessage = new Map<string, string>();
  private readonly subscriptions = new DisposableStore();

  constructor(readonly deps: ToolTransportDeps) {
    this.subscriptions.add(
      deps.mailbox.handleAtCoordinator('TOOL_RESULT', (envelope, json, ctx) => this.take(envelope, json, ctx)),
    );
    this.subscriptions.add(
      deps.mailbox.handleAtCoordinator('TOOL_ERROR', (envelope, json, ctx) => this.take(envelope, json, ctx)),
    );
    this.subscriptions.add(deps.outbox.onDidUpdateOutbox((update) => this.outboxMoved(update)));
    this.subscriptions.add(deps.agents.onDidChange((change) => this.agentChanged(change)));
  }

  agentAvailable(agentId: string): boolean {
    const agent = this.deps.agents.get(agentId);
    return agent !== undefined && agent.presence === 'online' && !GONE_STATES.has(agent.state);
  }

  /** The ToolProvider of a registered agent provider (provider_id = agent id). */
  providerFor(providerId: string, tools: readonly ToolDescriptor[]): ToolProvider {
    return {
      id: providerId,
      describe: () => tools,
      call: (request) => this.callAgent(providerId, providerId, request),
      available: () => this.agentAvailable(providerId),
      unavailableReason: () => {
        const agent = this.deps.agents.get(providerId);
        if (!agent) return `agent '${providerId}' is not registered`;
        return GONE_STATES.has(agent.state)
          ? `agent '${providerId}' is ${agent.state}`
          : `agent '${providerId}' is ${agent.presence}`;
      },
    } as ToolProvider;
  }

  callAgent(agentId: string, providerId: string, request: ToolRequest): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      if (request.signal.aborted) {
        reject(new ToolCallError('cancelled', 'CANCELLED', 'the call was cancelled before it was sent'));
        return;
      }
      if (!this.agentAvailable(agentId)) {
        reject(new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', `provider agent '${agentId}' is not online`));
        return;
      }
      if (this.calls.has(request.callId)) {
        reject(
          new ToolCallError(
            'already_exists',
            'ALREADY_EXISTS',
            `call '${request.callId}' is already on its way to an agent`,
          ),
        );
        return;
      }
      const call: AgentCall = {
        callId: request.callId,
        agentId,
        request,
        resolve,
        reject,
        messageId: '',
        next: 0,
        ahead: new Map(),
        done: false,
        abortListener: undefined,
      };
      this.calls.set(call.callId, call);
      const p = request.policy;
      const payload = {
        call_id: request.callId,
        provider_id: providerId,
        tool_name: request.toolName,
        content_type: 'application/json',
        args: request.args,
        stream: request.stream,
        caller_agent_id: request.callerAgentId,
        worktree_path: request.worktreePath ?? null,
        attempt: request.attempt,
        execution_policy: {
          timeout_ms: p.timeoutMs,
          max_retries: p.maxRetries,
          backoff: p.backoff,
          worktree_required: p.worktreeRequired,
          network_policy: p.networkPolicy,
          privilege_level: p.privilegeLevel,
          budget_cpu_ms: p.budgetCpuMs,
          budget_wall_ms: p.budgetWallMs,
        },
      };
      const sent = this.deps.outbox.sendToAgent(
        {
          to: agentId,
          messageType: 'TOOL_CALL',
          contentType: 'application/json',
          payload: Buffer.from(JSON.stringify(payload), 'utf8'),
          correlationId: request.callId,
          ackTimeout: false,
          ttlMs: toolCallTtlMs(p.timeoutMs, p.budgetWallMs),
        },
        request.ctx,
      );
      if (!sent.accepted) {
        this.end(call);
        const kind: ToolErrorKind =
          sent.code === 'BUFFER_FULL' || sent.code === 'OVERSIZE_PAYLOAD' ? 'resource_exhausted' : 'unavailable';
        reject(
          new ToolCallError(
            kind,
            kind === 'unavailable' ? 'AGENT_UNAVAILABLE' : sent.code,
            `the TOOL_CALL to '${agentId}' was refused: ${sent.code}: ${sent.reason}`,
          ),
        );
        return;
      }
      if (call.done) return; // the router ended it already (in the same transaction)
      call.messageId = sent.messageId;
      this.byMessage.set(sent.messageId, call.callId);
      call.abortListener = () => this.cancelled(call);
      request.signal.addEventListener('abort', call.abortListener, { once: true });
    });
  }

  dispose(): void {
    for (const call of [...this.calls.values()])
      this.fail(call, new ToolCallError('unavailable', 'INTERRUPTED', 'the coordinator is stopping'));
    this.subscriptions.dispose();
  }

  // ---------------------------------------------------------------- answers

  /** A TOOL_RESULT / TOOL_ERROR to `coordinator`: refused unless it belongs to a running call of its producer. */
  private take(envelope: Envelope, json: Record<string, unknown> | undefined, ctx: CallContext): Refusal | undefined {
    if (!json)
      return {
        code: 'VALIDATION_ERROR',
        detail: `a ${envelope.messageType} to the coordinator carries a JSON object payload (content_type application/json)`,
      };
    const callId = json.call_id;
    if (typeof callId !== 'string' || callId === '')
      return { code: 'VALIDATION_ERROR', detail: `a ${envelope.messageType} names its call_id` };
    const call = this.calls.get(callId);
    if (!call)
      return {
        code: 'VALIDATION_ERROR',
        detail: `NOT_FOUND: no running tool call '${callId.slice(0, 256)}' (it ended, or never was)`,
      };
    if (call.agentId !== envelope.producerId)
      return { code: 'PERMISSION_DENIED', detail: `call '${callId.slice(0, 256)}' was sent to another provider agent` };
    // A retry reuses the call_id: a provider that echoes `attempt` has an earlier attempt's late answer refused.
    if (json.attempt !== undefined && json.attempt !== null) {
      if (typeof json.attempt !== 'number' || !Number.isInteger(json.attempt) || json.attempt < 1)
        return { code: 'VALIDATION_ERROR', detail: 'attempt must be a positive integer' };
      if (json.attempt !== call.request.attempt) {
        return {
          code: 'VALIDATION_ERROR',
          detail: `NOT_FOUND: attempt ${json.attempt} of call '${callId.slice(0, 256)}' has ended (attempt ${call.request.attempt} runs)`,
        };
      }
    }
    if (envelope.messageType === 'TOOL_ERROR') {
      const code =
        typeof json.error_code === 'string' && json.error_code !== '' ? json.error_code.slice(0, 64) : 'INTERNAL_ERROR';
      const note = typeof json.note === 'string' ? json.note : typeof json.message === 'string' ? json.message : '';
      if (json.retryable !== undefined && json.retryable !== null && typeof json.retryable !== 'boolean')
        return { code: 'VALIDATION_ERROR', detail: 'retryable must be true or false' };
      this.deps.mailbox.settleAtCoordinator(envelope.messageId, ctx);
      const error = new ToolCallError(
        kindOfCode(code),
        code,
        note.slice(0, 4096) || `provider '${call.agentId}' answered ${code}`,
      );
      // `"retryable": true`: the engine may retry it like a transient code (an idempotent tool, retries left, no frame out).
      if (json.retryable === true) Object.assign(error, { retryable: true });
      this.fail(call, error);
      return undefined;
    }
    const frame = frameOf(json);
    if ('refused' in frame) return { code: 'VALIDATION_ERROR', detail: frame.refused };
    const frameNo = json.frame_no === undefined || json.frame_no === null ? call.next : json.frame_no;
    if (typeof frameNo !== 'number' || !Number.isInteger(frameNo) || frameNo < 0)
      return { code: 'VALIDATION_ERROR', detail: 'frame_no must be a non-negative integer' };
    this.deps.mailbox.settleAtCoordinator(envelope.messageId, ctx);
    if (frameNo < call.next || call.ahead.has(frameNo)) return undefined; // a repeated frame (a retry): ignored
    if (frameNo > call.next + MAX_FRAMES_AHEAD) {
      this.fail(
        call,
        new ToolCallError(
          'internal',
          'INTERNAL_ERROR',
          `provider '${call.agentId}' sent frame ${frameNo} while frame ${call.next} is still missing (at most ${MAX_FRAMES_AHEAD} ahead)`,
        ),
      );
      return undefined;
    }
    call.ahead.set(frameNo, frame);
    this.relay(call);
    return undefined;
  }

  /** Relays the frames that are next in order; the final one answers the call. */
  private relay(call: AgentCall): void {
    for (let frame = call.ahead.get(call.next); frame && !call.done; frame = call.ahead.get(call.next)) {
      call.ahead.delete(call.next);
      call.next += 1;
      if (!frame.final) {
        call.request.emit(frame.data, frame.contentType);
        continue;
      }
      this.end(call);
      call.resolve(
        frame.json && !frame.summary ? frame.value : new RawToolResult(frame.data, frame.contentType, frame.summary),
      );
    }
  }

  // ---------------------------------------------------------------- what ends a call early

  private cancelled(call: AgentCall): void {
    if (call.done) return;
    const reason =
      call.request.signal.reason instanceof ToolCallError
        ? call.request.signal.reason
        : new ToolCallError('cancelled', 'CANCELLED', 'cancelled');
    this.fail(call, reason);
    this.sendCancel(call, reason);
  }

  /**
   * Tells the provider agent to stop a call (CONTROL cancel_tool_call). When it is offline the command waits in its
   * inbox behind the TOOL_CALL, so that a provider reconnecting does not run a call that already failed.
   */
  private sendCancel(call: AgentCall, reason: ToolCallError): void {
    const sent = this.deps.outbox.sendToAgent(
      {
        to: call.agentId,
        messageType: 'CONTROL',
        contentType: 'application/json',
        correlationId: call.callId,
        ackTimeout: false,
        payload: Buffer.from(
          JSON.stringify({
            command: 'cancel_tool_call',
            call_id: call.callId,
            reason: `${reason.code}: ${reason.message}`,
          }),
          'utf8',
        ),
      },
      { correlationId: call.callId },
    );
    if (!sent.accepted) {
      this.deps.log.record({
        correlationId: call.callId,
        actor: 'coordinator',
        eventType: 'tool.cancel_not_sent',
        level: 'WARN',
        details: { call_id: call.callId, agent_id: call.agentId, error_code: sent.code, reason: sent.reason },
      });
    }
  }

  /** Fails a call AGENT_UNAVAILABLE and, while its agent is still registered (offline, ended TOOL_CALL), tells it to cancel. */
  private unavailable(call: AgentCall, message: string): void {
    if (call.done) return;
    const error = new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', message);
    this.fail(call, error);
    if (this.deps.agents.get(call.agentId)) this.sendCancel(call, error);
  }

  /** The router ended the TOOL_CALL (the agent left, TTL, a NACK): the call fails at once. */
  private outboxMoved(update: OutboxUpdate): void {
    const callId = this.byMessage.get(update.messageId);
    if (callId === undefined) return;
    const call = this.calls.get(callId);
    if (!call || !['FAILED', 'TIMED_OUT', 'REJECTED'].includes(update.state)) return;
    const why = `${update.errorCode || update.state}${update.note ? `: ${update.note}` : ''}`;
    if (update.byAck && update.errorCode !== '' && update.errorCode !== 'AGENT_UNAVAILABLE') {
      this.fail(
        call,
        new ToolCallError(
          kindOfCode(update.errorCode),
          update.errorCode,
          `provider '${call.agentId}' refused the TOOL_CALL (${why})`,
        ),
      );
    } else if (update.byAck) {
      this.fail(
        call,
        new ToolCallError(
          'unavailable',
          'AGENT_UNAVAILABLE',
          `provider '${call.agentId}' refused the TOOL_CALL (${why})`,
        ),
      );
    } else {
      this.unavailable(call, `the TOOL_CALL to '${call.agentId}' ended ${update.state} (${why})`);
    }
  }

  private agentChanged(change: RegistryChange): void {
    const agentId = change.kind === 'left' ? change.agentId : change.agent.descriptor.agentId;
    if (change.kind !== 'left' && this.agentAvailable(agentId)) return;
    if (change.kind !== 'left' && change.kind !== 'presence' && change.kind !== 'state') return;
    for (const call of [...this.calls.values()]) {
      if (call.agentId !== agentId) continue;
      const what =
        change.kind === 'left'
          ? `left (${change.reason})`
          : `went ${change.agent.presence === 'online' ? change.agent.state : change.agent.presence}`;
      if (change.kind === 'left')
        this.fail(
          call,
          new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', `provider agent '${agentId}' ${what} during the call`),
        );
      else this.unavailable(call, `provider agent '${agentId}' ${what} during the call`);
    }
  }

  private fail(call: AgentCall, error: ToolCallError): void {
    if (call.done) return;
    this.end(call);
    call.reject(error);
  }

  private end(call: AgentCall): void {
    call.done = true;
    this.calls.delete(call.callId);
    if (call.messageId) this.byMessage.delete(call.messageId);
    if (call.abortListener) call.request.signal.removeEventListener('abort', call.abortListener);
  }
}

/** A TOOL_RESULT's content: `result` (JSON) or `result_b64` (any content_type); `final` absent = true. */
function frameOf(json: Record<string, unknown>): Frame | { refused: string } {
  const contentType =
    typeof json.content_type === 'string' && json.content_type !== ''
      ? json.content_type.slice(0, 256)
      : 'application/json';
  const final = json.final === undefined || json.final === null ? true : json.final;
  if (typeof final !== 'boolean') return { refused: 'final must be true or false' };
  let summary: Buffer | undefined;
  if (json.summary !== undefined && json.summary !== null) summary = Buffer.from(JSON.stringify(json.summary), 'utf8');
  if (typeof json.result_b64 === 'string') {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(json.result_b64)) return { refused: 'result_b64 is not base64' };
    const data = Buffer.from(json.result_b64, 'base64');
    if (contentType.split(';')[0].trim().toLowerCase() === 'application/json') {
      try {
        return { final, contentType, data, value: JSON.parse(data.toString('utf8')), json: true, summary };
      } catch {
        return { refused: 'result_b64 with content_type application/json is not JSON' };
      }
    }
    return { final, contentType, data, value: undefined, json: false, summary };
  }
  if (!('result' in json)) return { refused: 'a TOOL_RESULT carries result (JSON) or result_b64' };
  return {
    final,
    contentType: 'application/json',
    data: Buffer.from(JSON.stringify(json.result ?? null), 'utf8'),
    value: json.result ?? null,
    json: true,
    summary,
  };
}
