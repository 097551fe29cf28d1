import { FIELD_LIMITS } from '../../../core/fieldLimits';
import type { HitlInvocation } from '../../../core/hitl/model';
import { REASON_TYPES } from '../../../core/hitl/model';
import { isoUtc } from '../../../core/clock';
import { parseBody, parseInvocationRequest } from '../../../core/hitl/request';
import type { BridgeTool, BridgeToolContext, BridgeToolOutput } from '../model';
import { refusal, refusing } from './errors';

const L = FIELD_LIMITS.hitl;
/** The longest deadline a caller may ask for here; the HITL policy's maxDeadlineMs cuts it further. */
const MAX_DEADLINE_SECONDS = 7 * 24 * 3600;

/** Who decided, in the words the tool answers: a person in the editor, a policy rule, the deadline's fallback, or a cancellation. */
export function decidedBy(invocation: HitlInvocation): 'person' | 'policy' | 'fallback' | 'cancelled' {
  switch (invocation.decision?.origin.kind) {
    case 'human':
      return 'person';
    case 'rule':
      return 'policy';
    case 'fallback':
      return 'fallback';
    default:
      return 'cancelled';
  }
}

/** The answer of request_decision for a settled invocation. */
export function decisionAnswer(invocation: HitlInvocation, reattached: boolean): BridgeToolOutput {
  const decision = invocation.decision!;
  const origin = decision.origin;
  return {
    invocation_id: invocation.id,
    state: invocation.state,
    action: decision.action,
    decided_by: decidedBy(invocation),
    decider: origin.by,
    rationale: decision.rationale,
    ...(decision.action === 'modify' ? { modified_payload: decision.payload ?? null } : {}),
    ...(origin.rule !== undefined ? { rule: origin.rule } : {}),
    ...(origin.kind === 'fallback' ? { fallback: { policy: origin.policy, trigger: origin.trigger } } : {}),
    decided_at: isoUtc(decision.decidedAt),
    reattached,
  };
}

/**
 * request_decision: a HITL invocation (RFC §15) opened as the caller, exactly as HitlService.Decide opens one
 * (parseInvocationRequest → HitlService.open, origin `rpc`: the requester is blocked on its call), then the call waits
 * for it to settle: a person's decision in the editor, an auto rule, or the deadline's (or no operator's) fallback. If
 * the MCP call ends first (the client cancelled, timed out, or the HTTP request closed), the invocation stays pending
 * (HitlService.requesterDetached, as for a Decide call that broke) and a call with the same `request_id` re-attaches.
 */
export const REQUEST_DECISION: BridgeTool = {
  name: 'request_decision',
  description:
    'Ask the person at the editor to decide (approve / deny / modify / defer) and wait for the answer. Blocks until a person decides, ' +
    'a policy rule decides, or the deadline passes (then the configured fallback answers: decided_by "fallback"). Give a request_id: ' +
    'if your call is interrupted or times out, call again with the same request_id to keep waiting for the same decision.',
  inputSchema: {
    type: 'object',
    properties: {
      reason_type: {
        enum: [...REASON_TYPES],
        description: 'Why a human is asked (RFC §15): TASK_ESCALATION, SECURITY_APPROVAL, MANUAL_OVERRIDE, CONFLICT, …',
      },
      summary: {
        type: 'string',
        minLength: 1,
        maxLength: L.summary,
        description: 'What is to be decided, in one or two sentences.',
      },
      context: { type: 'object', description: 'Facts the person should see (any JSON object).' },
      options: {
        type: 'array',
        items: { type: 'string', minLength: 1, maxLength: L.proposed_action },
        maxItems: L.proposed_actions,
        description: 'The actions you propose.',
      },
      suggested_action: { type: 'string', maxLength: L.requester, description: 'The option you recommend.' },
      diff: { type: 'string', description: 'A unified diff of the proposed change, shown as such.' },
      risk_level: { type: 'string', maxLength: 256 },
      risk_notes: { type: 'array', items: { type: 'string', maxLength: 4096 }, maxItems: 32 },
      task_id: { type: 'string', maxLength: L.subject_field, description: 'The task this is about, if any.' },
      priority: { type: 'integer', minimum: -1000, maximum: 1000 },
      deadline_seconds: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: MAX_DEADLINE_SECONDS,
        description: 'Wait at most this long; the policy default (and its maximum) apply.',
      },
      request_id: {
        type: 'string',
        minLength: 1,
        maxLength: L.invocation_id,
        pattern: '^[A-Za-z0-9._:-]+$',
        description: 'Yours, unique per question: a retry with it re-attaches instead of asking again.',
      },
    },
    required: ['reason_type', 'summary'],
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, tool: BridgeToolContext) {
    const { coordinator, caller, ctx, signal } = tool;
    const { hitl, clock } = coordinator;
    const opened = await refusing(() => {
      const body: Record<string, unknown> = {
        reason_type: args.reason_type,
        summary: args.summary,
        facts: args.context ?? {},
        proposed_actions: args.options ?? [],
        suggested_action: args.suggested_action,
        diff: args.diff,
        risk_level: args.risk_level,
        risk_notes: args.risk_notes,
        priority: args.priority,
        deadline_ms:
          args.deadline_seconds === undefined ? undefined : Math.ceil((args.deadline_seconds as number) * 1000),
        invocation_id: args.request_id,
        subject: args.task_id === undefined ? undefined : { task_id: args.task_id },
      };
      // The same bounds as a Decide call's context: 256 KiB, the JSON depth limit.
      const request = parseInvocationRequest(parseBody(JSON.stringify(body)), {
        requester: caller.agentId,
        correlationId: ctx.correlationId,
        now: clock.now(),
      });
      return hitl.open(request, { kind: 'rpc' }, ctx);
    });
    const { invocation, reattached } = opened;
    await coordinator.store.whenDurable();
    if (invocation.state !== 'pending') return decisionAnswer(invocation, reattached);
    const settled = await new Promise<HitlInvocation>((resolve, reject) => {
      const onAbort = () => {
        hitl.requesterDetached(invocation.id, ctx);
        reject(
          refusal(
            'CANCELLED',
            `stopped waiting for HITL invocation '${invocation.id}'; it stays pending: call request_decision again with request_id '${invocation.id}' to wait for it`,
          ),
        );
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      hitl.whenSettled(invocation.id).then(
        (i) => {
          signal.removeEventListener('abort', onAbort);
          resolve(i);
        },
        (err: Error) => {
          signal.removeEventListener('abort', onAbort);
          reject(
            refusal(
              'AGENT_SHUTDOWN',
              `${err.message}; call request_decision again with request_id '${invocation.id}' to re-attach`,
            ),
          );
        },
      );
    });
    await coordinator.store.whenDurable();
    return decisionAnswer(settled, reattached);
  },
};

export const DECISION_TOOLS: readonly BridgeTool[] = [REQUEST_DECISION];
