import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { isScopeRefusal, parseScope } from '../../core/scheduler/scope';
import { ToolCallError } from '../../core/tools/model';
import { toolErrorStatus } from './toolService';

interface ParallelismCheckRequestMessage {
  scope_a?: string;
  scope_b?: string;
}
interface ConfidenceResponseMessage {
  confidence_score: number;
  notes: string;
}
interface DebateEvaluateRequestMessage {
  negotiation_id?: string;
  proposal_a?: string;
  proposal_b?: string;
  intensity?: string;
}
interface TextSegmentMessage {
  kind?: string;
  content?: string;
  seq?: string | number;
  at?: string;
}
interface SummarizeRequestMessage {
  session_id?: string;
  segments?: TextSegmentMessage[];
  max_tokens?: number;
  mode?: string;
}
interface SummarizeResponseMessage {
  summary: string;
  tokens: number;
  cost_cents: number;
  model: string;
}

/**
 * sw4rm.reasoning.ReasoningProxy (RFC §9.3) over the coordinator's InferenceEngine (README, "Connect an inference
 * engine"): the inference engine agent answers when one is online; without one CheckParallelism and EvaluateDebate
 * answer the built-in deterministic scorers (notes start `built-in scorer (no inference engine registered): `) and
 * Summarize is FAILED_PRECONDITION. An engine that fails, times out or answers out of bounds: UNAVAILABLE. Scopes are
 * written as SubmitTask's scope (a JSON object or repo:/worktree:/path:/resource: tokens).
 */
export class ReasoningServiceAdapter {
  static readonly serviceName = 'sw4rm.reasoning.ReasoningProxy';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { inference } = this.coordinator;
    const ctx = (call: grpc.ServerUnaryCall<unknown, unknown>) => ({ correlationId: call.getPath() });
    return {
      CheckParallelism: (
        call: grpc.ServerUnaryCall<ParallelismCheckRequestMessage, ConfidenceResponseMessage>,
        callback: grpc.sendUnaryData<ConfidenceResponseMessage>,
      ) => {
        const a = parseScope(call.request.scope_a ?? '');
        if (isScopeRefusal(a)) return callback(invalid(`scope_a: ${a}`));
        const b = parseScope(call.request.scope_b ?? '');
        if (isScopeRefusal(b)) return callback(invalid(`scope_b: ${b}`));
        answer(
          inference.checkParallelism(a, b, ctx(call)).then((v) => ({ confidence_score: v.confidence, notes: v.notes })),
          callback,
        );
      },
      EvaluateDebate: (
        call: grpc.ServerUnaryCall<DebateEvaluateRequestMessage, ConfidenceResponseMessage>,
        callback: grpc.sendUnaryData<ConfidenceResponseMessage>,
      ) => {
        const r = call.request;
        answer(
          inference
            .evaluateDebate(
              {
                negotiationId: r.negotiation_id ?? '',
                proposalA: r.proposal_a ?? '',
                proposalB: r.proposal_b ?? '',
                intensity: r.intensity ?? '',
              },
              ctx(call),
            )
            .then((v) => ({ confidence_score: v.confidence, notes: v.notes })),
          callback,
        );
      },
      Summarize: (
        call: grpc.ServerUnaryCall<SummarizeRequestMessage, SummarizeResponseMessage>,
        callback: grpc.sendUnaryData<SummarizeResponseMessage>,
      ) => {
        const r = call.request;
        const segments = (r.segments ?? []).map((s) => ({
          kind: s.kind ?? '',
          content: s.content ?? '',
          seq: Number(s.seq ?? 0),
          at: s.at ?? '',
        }));
        answer(
          inference
            .summarize(
              { sessionId: r.session_id ?? '', segments, maxTokens: r.max_tokens ?? 0, mode: r.mode ?? '' },
              ctx(call),
            )
            .then((s) => ({ summary: s.summary, tokens: s.tokens, cost_cents: s.costCents, model: s.model })),
          callback,
        );
      },
    };
  }
}

/** The answer, or its failure as every tool answer's status (toolErrorStatus: `<code>: <detail>`). */
function answer<T>(work: Promise<T>, callback: grpc.sendUnaryData<T>): void {
  work.then(
    (value) => callback(null, value),
    (err: unknown) => callback(toolErrorStatus(err)),
  );
}

function invalid(why: string): Partial<grpc.StatusObject> {
  return toolErrorStatus(new ToolCallError('invalid_argument', 'VALIDATION_ERROR', why));
}
