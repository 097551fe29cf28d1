import type { Disposable } from '../events';
import type { CoordinatorMailbox, Refusal } from '../router/model';

/**
 * The EVENT trigger's filter (README, "Workflows: triggers"): a NOTIFICATION envelope addressed to `coordinator`, with
 * `correlation_id` = the workflow_id and a JSON object payload
 * `{"workflow_event": "<name>", "data": <any JSON>, "node_id": "<optional: only this node>"}`.
 * It starts every READY EVENT node of that workflow whose metadata `event` is `<name>` (or only `node_id`), after
 * `data` (absent: `{}`) was written to workflow_data at `events.<name>`. Anything else is refused with a NACK:
 * VALIDATION_ERROR (not such a payload), NO_ROUTE (no running workflow with that id, or no node of it waits for that
 * event now: an event is never kept for later, so the sender learns it was not taken), PERMISSION_DENIED (the sender is
 * neither the operator, nor the workflow's creator, nor an agent one of its nodes names; or the metadata `event_from`
 * of the nodes waiting for it does not list it).
 */
export const WORKFLOW_EVENT_MESSAGE_TYPE = 'NOTIFICATION';
/** Where an event's data lands in workflow_data: `events.<name>`. */
export const EVENT_DATA_KEY = 'events';
/** An event name: at most this many characters. */
export const MAX_EVENT_NAME = 256;

export interface WorkflowEventInput {
  readonly workflowId: string;
  readonly event: string;
  readonly data: unknown;
  /** '' = every READY EVENT node waiting for `event`. */
  readonly nodeId: string;
  /** The agent that sent it. */
  readonly producerId: string;
  /** Who sent it, authenticated (`operator`, `agent:<id>`, `enrolment:<id>`); absent with auth `none`. */
  readonly principal?: string;
  readonly messageId: string;
}

/** What takes events: the workflow engine (`Workflows.takeEvent`). Answers a refusal, or undefined when taken. */
export interface WorkflowEventSink {
  takeEvent(
    input: WorkflowEventInput,
    ctx: { readonly correlationId: string },
    settle: (result: Record<string, unknown>) => void,
  ): Refusal | undefined;
}

/** Reads a NOTIFICATION's payload as a workflow event, or answers why it is not one. */
export function parseWorkflowEvent(
  json: Record<string, unknown> | undefined,
  correlationId: string,
): { event: string; data: unknown; nodeId: string } | Refusal {
  const shape =
    'a NOTIFICATION to the coordinator is a workflow event: a JSON object {"workflow_event": "<name>", "data": {…}} with correlation_id = the workflow_id';
  if (!json) return { code: 'VALIDATION_ERROR', detail: shape };
  const event = json.workflow_event;
  if (typeof event !== 'string' || event.trim() === '')
    return { code: 'VALIDATION_ERROR', detail: `workflow_event is required: ${shape}` };
  if (event.length > MAX_EVENT_NAME)
    return { code: 'VALIDATION_ERROR', detail: `workflow_event is longer than ${MAX_EVENT_NAME} characters` };
  if (correlationId.trim() === '')
    return { code: 'VALIDATION_ERROR', detail: `correlation_id must name the workflow: ${shape}` };
  const nodeId = json.node_id;
  if (nodeId !== undefined && nodeId !== null && typeof nodeId !== 'string')
    return { code: 'VALIDATION_ERROR', detail: 'node_id, when given, is a string (the EVENT node to start)' };
  return { event, data: json.data === undefined ? {} : json.data, nodeId: typeof nodeId === 'string' ? nodeId : '' };
}

/** NOTIFICATION envelopes to `coordinator` → workflow events (taken in the message's own transaction, then FULFILLED). */
export function bindWorkflowEventsToRouter(sink: WorkflowEventSink, router: CoordinatorMailbox): Disposable {
  return router.handleAtCoordinator(WORKFLOW_EVENT_MESSAGE_TYPE, (envelope, json, ctx) => {
    const parsed = parseWorkflowEvent(json, envelope.correlationId);
    if ('code' in parsed) return parsed;
    return sink.takeEvent(
      {
        workflowId: envelope.correlationId,
        event: parsed.event,
        data: parsed.data,
        nodeId: parsed.nodeId,
        producerId: envelope.producerId,
        principal: ctx.principal,
        messageId: envelope.messageId,
      },
      ctx,
      (result) => router.settleAtCoordinator(envelope.messageId, ctx, result),
    );
  });
}
