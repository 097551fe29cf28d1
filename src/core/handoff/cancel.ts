import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Speaker } from '../policy/model';
import { cancellerOf, knows, speakerName } from './access';
import type { HandoffChanges } from './changes';
import type { HandoffRecord, HandoffRepository } from './model';
import type { MoveOn } from './moveOn';
import { MAX_GRACE_PERIOD_MS } from './options';
import { denied, identifier, invalid, LIMITS, nonNegative, text } from './refusals';
import { cancelling, draftOf, type HandoffMemory } from './state';

export interface CancelDeps {
  readonly clock: Clock;
  readonly handoffs: Pick<HandoffRepository, 'get'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly moveOn: Pick<MoveOn, 'end'>;
  /** carry.ts. */
  readonly withdrawSwitch: (invocationId: string, requestId: string, why: string, ctx: CallContext) => void;
}

/**
 * CancelDelegation: the open handoffs whose correlation id (or request id) is `correlationId` and that the caller is a
 * party of (its origin or the agent that accepted it; the operator: all of them), and, transitively, the open
 * handoffs made under them (sw4rm-parent-request-id), end CANCELLED in one transition; every party is told (with
 * grace_period_ms). An agent that is a party of none of the matches is refused (another requester's handoffs with the
 * same correlation id neither block nor are cancelled). acknowledged=false when nothing open matched.
 */
export function cancelDelegation(
  deps: CancelDeps,
  correlationId: string,
  reason: string,
  gracePeriodMs: number,
  speaker: Speaker,
  ctx: CallContext,
): { readonly acknowledged: boolean; readonly message: string } {
  const key = identifier('correlation_id', correlationId, LIMITS.correlation_id, true);
  const why = text('reason', reason, LIMITS.cancel_reason).trim();
  const grace = nonNegative('grace_period_ms', gracePeriodMs);
  if (grace > MAX_GRACE_PERIOD_MS) throw invalid(`grace_period_ms is ${grace}; at most ${MAX_GRACE_PERIOD_MS}`);
  const { memory, changes } = deps;
  const matches = [...memory.records()].filter((r) => r.correlationId === key || r.requestId === key);
  if (matches.length === 0) {
    const known = deps.handoffs.get(key);
    return {
      acknowledged: false,
      message:
        known && knows(known, speaker)
          ? `handoff '${key}' is ${known.state}: nothing to cancel`
          : `no open handoff has correlation id or request id '${key}'`,
    };
  }
  const roots = speaker.kind === 'agent' ? matches.filter((r) => cancellerOf(r, speaker) !== undefined) : matches;
  if (roots.length === 0) {
    throw denied(
      `only the origin or the accepting agent of a delegation, or the operator, may cancel it; ${speakerName(speaker)} is neither for any open handoff with correlation id or request id '${key}'`,
    );
  }
  const cancel = delegationTree(roots, memory.records());
  const by =
    speaker.kind === 'operator'
      ? `operator:${speaker.label}`
      : speaker.kind === 'agent'
        ? cancellerOf(roots[0], speaker)!
        : 'coordinator';
  const withdraw = changes.run((tx) => {
    const switches: Array<{ invocationId: string; requestId: string; correlationId: string }> = [];
    for (const { record, parent } of cancel) {
      const draft = draftOf(record);
      const invocationId = cancelling(draft, deps.clock.now());
      if (invocationId !== undefined)
        switches.push({ invocationId, requestId: draft.requestId, correlationId: draft.correlationId });
      const text = `cancelled by ${by}${parent ? ` (cascade: its parent '${parent}' was cancelled)` : ''}${why ? `: ${why}` : ''}`;
      deps.moveOn.end(
        draft,
        'CANCELLED',
        by,
        text,
        { ...ctx, correlationId: draft.correlationId },
        {
          cancelled_by: by,
          delegation: key,
          cascade_of: parent || undefined,
          grace_period_ms: grace,
          principal: ctx.principal,
        },
        [draft.toAgent, draft.acceptedBy],
        { grace_period_ms: grace, delegation: key },
      );
      changes.settle(tx, draft);
    }
    return switches;
  }, 'cancel');
  for (const w of withdraw)
    deps.withdrawSwitch(w.invocationId, w.requestId, 'it was cancelled', { ...ctx, correlationId: w.correlationId });
  return {
    acknowledged: true,
    message: `cancelled ${cancel.length} handoff${cancel.length === 1 ? '' : 's'}: ${cancel
      .map((c) => c.record.requestId)
      .join(', ')
      .slice(0, 2000)}`,
  };
}

/**
 * CancelDelegation's cascade: `roots`, then, breadth first, every record of `open` made under one of them
 * (parentRequestId), transitively, each with the parent it was reached from ('' for a root). Reads `open` once (a
 * parent → children map), so a deep or wide delegation tree costs O(open handoffs).
 */
export function delegationTree(
  roots: readonly HandoffRecord[],
  open: Iterable<HandoffRecord>,
): Array<{ record: HandoffRecord; parent: string }> {
  const children = new Map<string, HandoffRecord[]>();
  for (const record of open) {
    if (record.parentRequestId === '') continue;
    const list = children.get(record.parentRequestId);
    if (list) list.push(record);
    else children.set(record.parentRequestId, [record]);
  }
  const tree: Array<{ record: HandoffRecord; parent: string }> = roots.map((record) => ({ record, parent: '' }));
  const seen = new Set(roots.map((r) => r.requestId));
  for (let i = 0; i < tree.length; i++) {
    const parent = tree[i].record.requestId;
    for (const child of children.get(parent) ?? []) {
      if (seen.has(child.requestId)) continue;
      seen.add(child.requestId);
      tree.push({ record: child, parent });
    }
  }
  return tree;
}
