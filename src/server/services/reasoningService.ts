import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { isScopeRefusal, parseScope } from '../../core/scheduler/scope';

interface ParallelismCheckRequestMessage { scope_a?: string; scope_b?: string }
interface ParallelismCheckResponseMessage { confidence_score: number; notes: string }

/**
 * sw4rm.reasoning.ReasoningProxy (RFC §9.3): CheckParallelism answers the coordinator's own parallelism check — the
 * scorer the scheduler's gate uses (the built-in, deterministic BuiltInScopeScorer) — for two scopes written as
 * SubmitTask's scope (a JSON object or repo:/worktree:/path:/resource: tokens). EvaluateDebate and Summarize come with
 * the negotiation and tools issues and answer UNIMPLEMENTED until then.
 */
export class ReasoningServiceAdapter {
  static readonly serviceName = 'sw4rm.reasoning.ReasoningProxy';

  constructor(private readonly coordinator: Coordinator) {}

  /** The built handlers; EvaluateDebate and Summarize are left to the server's UNIMPLEMENTED handler. */
  handlers(): grpc.UntypedServiceImplementation {
    const { concurrency } = this.coordinator;
    return {
      CheckParallelism: (call: grpc.ServerUnaryCall<ParallelismCheckRequestMessage, ParallelismCheckResponseMessage>, callback: grpc.sendUnaryData<ParallelismCheckResponseMessage>) => {
        const invalid = (name: string, refusal: string) =>
          callback({ code: grpc.status.INVALID_ARGUMENT, details: `VALIDATION_ERROR: ${name}: ${refusal}`, metadata: new grpc.Metadata() });
        const a = parseScope(call.request.scope_a ?? '');
        if (isScopeRefusal(a)) return invalid('scope_a', a);
        const b = parseScope(call.request.scope_b ?? '');
        if (isScopeRefusal(b)) return invalid('scope_b', b);
        try {
          const verdict = concurrency.checkParallelism(a, b);
          callback(null, { confidence_score: verdict.confidence, notes: verdict.notes });
        } catch (err) {
          callback({ code: grpc.status.UNAVAILABLE, details: `the parallelism check is unavailable: ${err instanceof Error ? err.message : String(err)}`, metadata: new grpc.Metadata() });
        }
      },
    };
  }
}
