import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import { randomIds, type IdSource } from '../ids';
import { parseBoundedJson } from '../json';
import { KIB, MIB } from '../limits';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory, AgentRecord } from '../registry/model';
import type { ParallelismScorer, ParallelismVerdict, TaskScope } from '../scheduler/model';
import { verdictRefusal } from '../scheduler/concurrency';
import { toWire } from '../scheduler/scope';
import { BuiltInScopeScorer } from '../scheduler/scorer';
import type { AgentToolTransport } from '../tools/externalProvider';
import {
  DEFAULT_EXECUTION_POLICY,
  ToolCallError,
  type CallInput,
  type JsonSchema,
  type ToolDescriptor,
  type ToolProvider,
  type ToolRequest,
  type ToolResult,
} from '../tools/model';
import { scoreDebateOffThread } from './debateThread';

/**
 * The inference engine (RFC §9.3): an agent whose descriptor declares reasoning_connectors and that takes TOOL_CALL
 * envelopes of provider `reasoning` (tools check_parallelism, evaluate_debate, summarize; README, "Connect an
 * inference engine"). ReasoningProvider is the built-in provider `reasoning` that forwards to it; InferenceEngine is
 * what the ReasoningProxy service and the scheduler's scorer ask — the engine when one is online, else the
 * deterministic built-in scorers (marked in notes), and Summarize FAILED_PRECONDITION. Owner: the reasoning part.
 */

export const REASONING_PROVIDER_ID = 'reasoning';

/** The version of the request shapes below, logged with every engine request (RFC §24: version and log them). */
export const REASONING_PROTOCOL_VERSION = 1;

/** Bounds of what the ReasoningProxy takes (INVALID_ARGUMENT beyond them). */
export const REASONING_LIMITS = {
  /** Summarize: segments per request. */
  maxSegments: 1000,
  /** Summarize: the segments' content and fields together, UTF-8 bytes. */
  maxSegmentBytes: 1 * MIB,
  /** EvaluateDebate: each proposal, UTF-8 bytes. */
  maxProposalBytes: 1 * MIB,
  /** Ids, kinds, modes, intensities, timestamps: characters. */
  maxShortText: 256,
  /** The engine's answer, UTF-8 bytes. */
  maxAnswerBytes: 1 * MIB,
} as const;

/** The first words of every built-in answer's notes. */
export const BUILT_IN_NOTE = 'built-in scorer (no inference engine registered): ';

const shortText: JsonSchema = { type: 'string', maxLength: REASONING_LIMITS.maxShortText };
const confidenceAnswer: JsonSchema = {
  type: 'object',
  required: ['confidence_score'],
  properties: { confidence_score: { type: 'number', minimum: 0, maximum: 1 }, notes: { type: 'string' } },
};

/** The three tools of provider `reasoning` (README, "Connect an inference engine"). */
export const REASONING_TOOLS: readonly ToolDescriptor[] = [
  {
    name: 'check_parallelism',
    description:
      'How safe it is to run two tasks with these scopes in parallel (RFC §9.3): confidence_score in [0, 1], higher = safer. Scopes are JSON objects {"repo_id","worktree_id","paths","resources"} as text.',
    inputSchema: {
      type: 'object',
      required: ['scope_a', 'scope_b'],
      additionalProperties: false,
      properties: { scope_a: { type: 'string', minLength: 1 }, scope_b: { type: 'string', minLength: 1 } },
    },
    outputSchema: confidenceAnswer,
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 10,
    maxConcurrency: 8,
    sideEffects: 'none',
  },
  {
    name: 'evaluate_debate',
    description:
      'How much two proposals of a negotiation agree: confidence_score in [0, 1] (1 = the same), with notes.',
    inputSchema: {
      type: 'object',
      required: ['negotiation_id', 'proposal_a', 'proposal_b'],
      additionalProperties: false,
      properties: {
        negotiation_id: shortText,
        proposal_a: { type: 'string' },
        proposal_b: { type: 'string' },
        intensity: shortText,
      },
    },
    outputSchema: confidenceAnswer,
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 10,
    maxConcurrency: 8,
    sideEffects: 'none',
  },
  {
    name: 'summarize',
    description: "A summary of a session's text segments, within max_tokens (0 = the engine's default).",
    inputSchema: {
      type: 'object',
      required: ['session_id', 'segments'],
      additionalProperties: false,
      properties: {
        session_id: shortText,
        segments: {
          type: 'array',
          maxItems: REASONING_LIMITS.maxSegments,
          items: {
            type: 'object',
            required: ['content'],
            additionalProperties: false,
            properties: { kind: shortText, content: { type: 'string' }, seq: { type: 'integer' }, at: shortText },
          },
        },
        max_tokens: { type: 'integer', minimum: 0 },
        mode: shortText,
      },
    },
    outputSchema: {
      type: 'object',
      required: ['summary'],
      properties: {
        summary: { type: 'string' },
        tokens: { type: 'integer', minimum: 0 },
        cost_cents: { type: 'number', minimum: 0 },
        model: { type: 'string' },
      },
    },
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 10,
    maxConcurrency: 8,
    sideEffects: 'none',
  },
];

/** Agent states in which an engine takes no requests. */
const NOT_SERVING = new Set(['SHUTTING_DOWN', 'FAILED_STATE']);

/**
 * The reasoning connector an inference engine agent declares: it takes the coordinator's `reasoning` tool calls through
 * its inbox. Not any connector: RFC §14 asks every agent to declare one (the examples declare `sw4rm://reasoning/none`),
 * so a non-empty list alone would send the coordinator's questions to agents that never answer them.
 */
export const INFERENCE_ENGINE_CONNECTOR = 'sw4rm://reasoning/tools';

const NO_ENGINE = `no inference engine registered (an online agent declaring the reasoning connector ${INFERENCE_ENGINE_CONNECTOR})`;

/** Whether `agent` is an inference engine that can answer now: INFERENCE_ENGINE_CONNECTOR declared, online, not shutting down or failed. */
export function servesReasoning(agent: AgentRecord): boolean {
  return (
    agent.descriptor.reasoningConnectors.includes(INFERENCE_ENGINE_CONNECTOR) &&
    agent.presence === 'online' &&
    !NOT_SERVING.has(agent.state)
  );
}

/** The inference engine agent: of those that serve (servesReasoning), the lowest agent id; undefined when none. */
export function inferenceEngineAgent(agents: AgentDirectory): string | undefined {
  let found: string | undefined;
  for (const agent of agents.list()) {
    const id = agent.descriptor.agentId;
    if (servesReasoning(agent) && (found === undefined || id < found)) found = id;
  }
  return found;
}

/** The built-in provider `reasoning`: its tools are answered by the inference engine agent, through the agent transport. */
export class ReasoningProvider implements ToolProvider {
  readonly id = REASONING_PROVIDER_ID;

  constructor(
    readonly agents: AgentDirectory,
    readonly transport: () => AgentToolTransport,
  ) {}

  describe(): readonly ToolDescriptor[] {
    return REASONING_TOOLS;
  }

  available(): boolean {
    return inferenceEngineAgent(this.agents) !== undefined;
  }

  unavailableReason(): string {
    return NO_ENGINE;
  }

  call(request: ToolRequest): Promise<unknown> {
    const engineId = inferenceEngineAgent(this.agents);
    if (engineId === undefined) {
      return Promise.reject(new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', NO_ENGINE));
    }
    return this.transport().callAgent(engineId, REASONING_PROVIDER_ID, request);
  }
}

/** How the coordinator calls a tool as itself (Tools.call with caller `coordinator`). */
export type CoordinatorToolCall = (input: CallInput, ctx: CallContext) => Promise<ToolResult>;

export interface InferenceEngineDeps {
  readonly agents: AgentDirectory;
  readonly call: CoordinatorToolCall;
  /**
   * Ends a call nobody waits for any more (Tools.abandon): an engine request that timed out here is abandoned, so it
   * gives back its slot of the tool's max_concurrency (or leaves the queue) and the engine is not asked later.
   */
  readonly abandon: (callId: string) => void;
  /** Where each engine request's call id comes from (default: random UUIDs). */
  readonly ids?: IdSource;
  readonly clock: Clock;
  readonly log: EventLog;
}

export interface InferenceEngineOptions {
  /** How long one engine request may take (the call's policy timeout, and a guard on the Clock). */
  readonly timeoutMs: number;
}

export const DEFAULT_INFERENCE_ENGINE_OPTIONS: InferenceEngineOptions = { timeoutMs: 10_000 };

export interface DebateRequest {
  readonly negotiationId: string;
  readonly proposalA: string;
  readonly proposalB: string;
  readonly intensity: string;
}

export interface TextSegment {
  readonly kind: string;
  readonly content: string;
  readonly seq: number;
  readonly at: string;
}

export interface SummarizeRequest {
  readonly sessionId: string;
  readonly segments: readonly TextSegment[];
  /** 0 = the engine's default. */
  readonly maxTokens: number;
  readonly mode: string;
}

export interface Summary {
  readonly summary: string;
  readonly tokens: number;
  readonly costCents: number;
  readonly model: string;
}

/**
 * What the coordinator asks of an inference engine (RFC §9.3): the ReasoningProxy service and the scheduler's gate (it
 * is the gate's ParallelismScorer). With an engine online, a `reasoning` tool call as `coordinator`, bounded by
 * `timeoutMs`, its answer checked; an answer out of bounds, an error or a timeout is a failure (checkParallelism: the
 * gate's unavailable-engine policy applies; the others reject UNAVAILABLE). Without one: the built-in scorers (notes say
 * so), answered at once; summarize refuses (FAILED_PRECONDITION), never a made-up summary. A request that times out
 * here is abandoned (its tool call ends, giving back its place); dispose answers those under way UNAVAILABLE.
 */
export class InferenceEngine implements ParallelismScorer, Disposable {
  private readonly builtIn = new BuiltInScopeScorer();
  /** The engine requests under way: their timeout timers, and how to end them at dispose. */
  private readonly pending = new Set<{ readonly timer: Disposable; readonly reject: (err: Error) => void }>();
  private disposed = false;

  constructor(
    private readonly deps: InferenceEngineDeps,
    private readonly options: InferenceEngineOptions = DEFAULT_INFERENCE_ENGINE_OPTIONS,
  ) {}

  /** The inference engine agent now, if any. */
  engineAgent(): string | undefined {
    return inferenceEngineAgent(this.deps.agents);
  }

  /** ParallelismScorer: the built-in verdict at once without an engine, else a Promise of the engine's. */
  check(
    a: TaskScope,
    b: TaskScope,
    ctx: CallContext = { correlationId: 'scheduler' },
  ): ParallelismVerdict | Promise<ParallelismVerdict> {
    const engineId = this.engineAgent();
    if (engineId === undefined) {
      const verdict = this.builtIn.check(a, b);
      return { confidence: verdict.confidence, notes: BUILT_IN_NOTE + verdict.notes };
    }
    return this.ask(
      engineId,
      'check_parallelism',
      { scope_a: JSON.stringify(toWire(a)), scope_b: JSON.stringify(toWire(b)) },
      ctx,
    ).then(confidenceOf);
  }

  async checkParallelism(a: TaskScope, b: TaskScope, ctx: CallContext): Promise<ParallelismVerdict> {
    return this.check(a, b, ctx);
  }

  async evaluateDebate(request: DebateRequest, ctx: CallContext): Promise<ParallelismVerdict> {
    checkShort('negotiation_id', request.negotiationId);
    checkShort('intensity', request.intensity);
    for (const [name, text] of [
      ['proposal_a', request.proposalA],
      ['proposal_b', request.proposalB],
    ] as const) {
      const size = Buffer.byteLength(text);
      if (size > REASONING_LIMITS.maxProposalBytes)
        throw invalid(`${name} is larger than ${REASONING_LIMITS.maxProposalBytes} bytes (${size})`);
    }
    const engineId = this.engineAgent();
    if (engineId === undefined) {
      // On a worker thread for long proposals (debateThread.ts): it took up to seconds for two of 1 MiB.
      const answer = await scoreDebateOffThread(request.proposalA, request.proposalB, request.intensity);
      if (!answer.ok) throw new ToolCallError('unavailable', 'UNAVAILABLE', answer.why);
      return { confidence: answer.verdict.confidence, notes: BUILT_IN_NOTE + answer.verdict.notes };
    }
    const answer = await this.ask(
      engineId,
      'evaluate_debate',
      {
        negotiation_id: request.negotiationId,
        proposal_a: request.proposalA,
        proposal_b: request.proposalB,
        intensity: request.intensity,
      },
      ctx,
    );
    return confidenceOf(answer);
  }

  async summarize(request: SummarizeRequest, ctx: CallContext): Promise<Summary> {
    checkShort('session_id', request.sessionId);
    checkShort('mode', request.mode);
    if (request.segments.length > REASONING_LIMITS.maxSegments)
      throw invalid(`more than ${REASONING_LIMITS.maxSegments} segments (${request.segments.length})`);
    let bytes = 0;
    request.segments.forEach((s, i) => {
      checkShort(`segments[${i}].kind`, s.kind);
      checkShort(`segments[${i}].at`, s.at);
      if (!Number.isSafeInteger(s.seq)) throw invalid(`segments[${i}].seq is not a whole number`);
      bytes += Buffer.byteLength(s.content) + Buffer.byteLength(s.kind) + Buffer.byteLength(s.at);
    });
    if (bytes > REASONING_LIMITS.maxSegmentBytes)
      throw invalid(`the segments are larger than ${REASONING_LIMITS.maxSegmentBytes} bytes together (${bytes})`);
    if (!Number.isSafeInteger(request.maxTokens) || request.maxTokens < 0)
      throw invalid("max_tokens must be a whole number ≥ 0 (0 = the engine's default)");
    const engineId = this.engineAgent();
    if (engineId === undefined)
      throw new ToolCallError('failed_precondition', 'FAILED_PRECONDITION', 'no inference engine registered');
    const answer = await this.ask(
      engineId,
      'summarize',
      {
        session_id: request.sessionId,
        segments: request.segments.map((s) => ({ kind: s.kind, content: s.content, seq: s.seq, at: s.at })),
        max_tokens: request.maxTokens,
        mode: request.mode,
      },
      ctx,
    );
    const { summary, tokens = 0, cost_cents: costCents = 0, model = '' } = answer;
    if (typeof summary !== 'string') throw failed('its summary is not text');
    if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0 || tokens > 0xffffffff)
      throw failed(`tokens is not a whole number ≥ 0: ${String(tokens)}`);
    if (typeof costCents !== 'number' || !(costCents >= 0) || !Number.isFinite(costCents))
      throw failed(`cost_cents is not a number ≥ 0: ${String(costCents)}`);
    if (typeof model !== 'string') throw failed('model is not text');
    return { summary, tokens, costCents, model };
  }

  /** Requests under way are answered UNAVAILABLE (`the coordinator is stopping`): an RPC waiting on one gets its answer. */
  dispose(): void {
    this.disposed = true;
    const pending = [...this.pending];
    this.pending.clear();
    for (const { timer, reject } of pending) {
      timer.dispose();
      reject(stopping());
    }
  }

  /** One engine request: logged, bounded by the timeout, its answer a JSON object (else a failure, UNAVAILABLE). */
  private async ask(
    engineId: string,
    toolName: string,
    args: Record<string, unknown>,
    ctx: CallContext,
  ): Promise<Record<string, unknown>> {
    if (this.disposed) throw stopping();
    const started = this.deps.clock.now();
    const text = JSON.stringify(args);
    this.deps.log.record({
      correlationId: ctx.correlationId,
      actor: 'reasoning',
      eventType: 'reasoning.request',
      details: {
        engine_id: engineId,
        tool_name: toolName,
        version: REASONING_PROTOCOL_VERSION,
        timeout_ms: this.options.timeoutMs,
        args_bytes: Buffer.byteLength(text),
        args: excerpt(text),
      },
    });
    const respond = (outcome: 'ok' | 'error', details: Record<string, unknown>) =>
      this.deps.log.record({
        correlationId: ctx.correlationId,
        actor: 'reasoning',
        eventType: 'reasoning.response',
        level: outcome === 'ok' ? 'INFO' : 'WARN',
        details: {
          engine_id: engineId,
          tool_name: toolName,
          version: REASONING_PROTOCOL_VERSION,
          outcome,
          duration_ms: this.deps.clock.now() - started,
          ...details,
        },
      });
    let result: ToolResult;
    const callId = (this.deps.ids ?? randomIds).uuid();
    try {
      result = await this.bounded(
        callId,
        this.deps.call(
          {
            callId,
            providerId: REASONING_PROVIDER_ID,
            toolName,
            contentType: 'application/json',
            args: Buffer.from(text, 'utf8'),
            policy: { ...DEFAULT_EXECUTION_POLICY, timeoutMs: this.options.timeoutMs },
            stream: false,
            via: 'internal',
          },
          ctx,
        ),
      );
    } catch (err) {
      const why = err instanceof ToolCallError ? err.details : message(err);
      respond('error', { call_id: callId, error: why });
      throw this.disposed ? stopping() : failed(why);
    }
    const answerText = result.data.toString('utf8');
    const parsed = parseBoundedJson(answerText, { what: 'the answer', maxBytes: REASONING_LIMITS.maxAnswerBytes });
    if (!parsed.ok || parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
      const why = parsed.ok ? 'the answer is not a JSON object' : parsed.reason;
      respond('error', { error: why, answer: excerpt(answerText) });
      throw failed(why);
    }
    const answer = parsed.value as Record<string, unknown>;
    const refusal = toolName === 'summarize' ? undefined : verdictRefusal(confidenceOf(answer));
    respond(refusal === undefined ? 'ok' : 'error', {
      call_id: result.callId,
      answer: excerpt(answerText),
      ...(refusal === undefined ? {} : { error: refusal }),
    });
    if (refusal !== undefined) throw failed(refusal);
    return answer;
  }

  /**
   * `work` (the call `callId`), or a failure once `timeoutMs` has passed on the Clock. The call's own policy timeout
   * starts only when it runs, so a call still queued behind others would outlive this one: it is abandoned then.
   */
  private bounded<T>(callId: string, work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = this.deps.clock.setTimer(this.options.timeoutMs, () => {
        this.pending.delete(entry);
        try {
          this.deps.abandon(callId);
        } catch {
          // Abandoning is best effort; the answer below is what matters.
        }
        reject(new Error(`no answer within ${this.options.timeoutMs} ms`));
      });
      const entry = { timer, reject };
      this.pending.add(entry);
      work.then(
        (value) => {
          timer.dispose();
          this.pending.delete(entry);
          resolve(value);
        },
        (err: unknown) => {
          timer.dispose();
          this.pending.delete(entry);
          reject(err);
        },
      );
    });
  }
}

/** A confidence answer as a verdict (notes may be left out); verdictRefusal (the gate's check) says whether it is usable. */
function confidenceOf(answer: Record<string, unknown>): ParallelismVerdict {
  return {
    confidence: answer.confidence_score as number,
    notes: answer.notes === undefined ? '' : (answer.notes as string),
  };
}

function checkShort(name: string, value: string): void {
  if (typeof value !== 'string') throw invalid(`${name} is not text`);
  if (value.length > REASONING_LIMITS.maxShortText)
    throw invalid(`${name} is longer than ${REASONING_LIMITS.maxShortText} characters (${value.length})`);
}

function invalid(why: string): ToolCallError {
  return new ToolCallError('invalid_argument', 'VALIDATION_ERROR', why);
}

/** The engine failed (an error, a timeout, an answer out of bounds): UNAVAILABLE. */
function failed(why: string): ToolCallError {
  return new ToolCallError('unavailable', 'UNAVAILABLE', `the inference engine failed: ${why}`);
}

/** The coordinator stopped while a request was under way (or before it began): UNAVAILABLE. */
function stopping(): ToolCallError {
  return new ToolCallError('unavailable', 'UNAVAILABLE', 'the coordinator is stopping');
}

/** What a log event keeps of arguments and answers: the first 4 KiB (UTF-8; README, "Connect an inference engine"). */
export const EXCERPT_BYTES = 4 * KIB;

/** The first EXCERPT_BYTES of `text` (UTF-8, cut between characters), `…` when cut. */
export function excerpt(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= EXCERPT_BYTES) return text;
  let end = EXCERPT_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--; // bytes[end] continues a character begun before it
  return `${bytes.subarray(0, end).toString('utf8')}…`;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
