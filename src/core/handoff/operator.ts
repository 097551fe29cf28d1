import type { CallContext } from '../context';
import type { Speaker } from '../policy/model';
import type { Acceptance } from './accept';
import type { HandoffChanges } from './changes';
import type { HandoffRecord, HandoffRepository } from './model';
import type { MoveOn } from './moveOn';
import { invalid, LIMITS, notFound, precondition, text } from './refusals';
import type { HandoffMemory, OpenRecord } from './state';

export interface OperatorDeps {
  readonly handoffs: Pick<HandoffRepository, 'get'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly acceptance: Pick<Acceptance, 'commit'>;
  readonly moveOn: Pick<MoveOn, 'end'>;
  readonly catchUp: (requestId: string) => void;
}

/** The operator's answers (CoordinatorApi) to a handoff that waits for a person (no agent could take it). */
export class OperatorAnswers {
  constructor(private readonly deps: OperatorDeps) {}

  /** The operator takes a handoff that waits for a person: ACCEPTED by `operator:<by>`. */
  accept(requestId: string, by: string, ctx: CallContext): HandoffRecord {
    const record = this.awaitingOperator(requestId);
    const speaker: Speaker = { kind: 'operator', label: by };
    const { changes } = this.deps;
    return changes.full(
      changes.change(
        record,
        (draft) =>
          this.deps.acceptance.commit(
            draft,
            `operator:${by}`,
            'operator',
            speaker,
            { ...ctx, correlationId: record.correlationId },
            null,
          ),
        'operator_accept',
      ),
    );
  }

  /** The operator declines a handoff that waits for a person: REJECTED with the reason (required). */
  reject(requestId: string, reason: string, by: string, ctx: CallContext): HandoffRecord {
    const why = text('reason', reason, LIMITS.cancel_reason).trim();
    if (why === '') throw invalid('a reason is required: the requester is told why');
    const record = this.awaitingOperator(requestId);
    const { changes } = this.deps;
    return changes.full(
      changes.change(
        record,
        (draft) => {
          draft.rejectionReason = why;
          draft.rejectionCode = '';
          this.deps.moveOn.end(
            draft,
            'REJECTED',
            `operator:${by}`,
            `rejected by the operator ${by}: ${why}`,
            { ...ctx, correlationId: draft.correlationId },
            { rejected_by: `operator:${by}` },
          );
        },
        'operator_reject',
      ),
    );
  }

  private awaitingOperator(requestId: string): OpenRecord {
    this.deps.catchUp(requestId);
    const record = this.deps.memory.get(requestId);
    if (!record) {
      const stored = this.deps.handoffs.get(requestId);
      if (!stored) throw notFound(requestId);
      throw precondition(`handoff '${requestId}' is ${stored.state}: it does not wait for a person`);
    }
    if (record.state !== 'PENDING' || !record.awaitingOperator) {
      throw precondition(
        `handoff '${requestId}' is ${record.state}${record.state === 'PENDING' ? `, offered to '${record.toAgent}'` : ''}: it does not wait for a person`,
      );
    }
    return record;
  }
}
