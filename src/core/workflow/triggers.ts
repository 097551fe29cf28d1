import type { Core, Parts, Refusal } from './core';
import { EVENT_DATA_KEY, type WorkflowEventInput } from './eventTrigger';
import { isPlainObject } from './paths';
import { applyWrites, nodeOf } from './state';

/**
 * The EVENT trigger (eventTrigger.ts): a workflow event taken in the envelope's transaction — who may send it
 * (access.ts), which READY EVENT nodes wait for it, its data written to workflow_data.<EVENT_DATA_KEY>.<event> — and
 * the nodes it fires started right after. An event no node waits for now is refused, not kept. (SCHEDULE nodes and
 * automatic retries fire on their timers: progress.ts armOrQueue.)
 */
export class Triggers {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'live'>,
    private readonly p: Pick<Parts, 'progress' | 'dispatch' | 'data' | 'access' | 'queries'>,
  ) {}

  /** A workflow event: taken in the envelope's transaction; the nodes start right after. */
  takeEvent(input: WorkflowEventInput, settle: (result: Record<string, unknown>) => void): Refusal | undefined {
    const { progress } = this.p;
    const live = this.c.live.get(input.workflowId);
    const record = live?.record ?? this.p.queries.storedRecord(input.workflowId);
    if (!record)
      return {
        code: 'NO_ROUTE',
        detail: `no workflow '${input.workflowId.slice(0, 128)}' (correlation_id names the workflow)`,
      };
    const denied = this.p.access.eventSenderRefusal(input, record, live);
    if (denied) return denied;
    if (!live)
      return {
        code: 'NO_ROUTE',
        detail: `workflow '${input.workflowId.slice(0, 128)}' is ${record.state}: it takes no events`,
      };
    const candidates = [...(live.events.get(input.event) ?? [])].filter(
      (id) => input.nodeId === '' || id === input.nodeId,
    );
    const targets = this.p.access.eventTargets(input, live, candidates);
    if ('code' in targets) return targets;
    const { waiting } = targets;
    if (waiting.length === 0) {
      const named = live.record.definition.nodes.filter(
        (n) =>
          n.trigger === 'EVENT' &&
          n.metadata.event === input.event &&
          (input.nodeId === '' || n.nodeId === input.nodeId),
      );
      const states = named.map((n) => `${n.nodeId} (${nodeOf(live, n.nodeId).status})`).join(', ');
      return {
        code: 'NO_ROUTE',
        detail: `no EVENT node of workflow '${input.workflowId.slice(0, 128)}' waits for '${input.event.slice(0, 128)}' now${named.length ? `: ${states.slice(0, 512)}` : ' (no node has that event)'}; an event is not kept for later`,
      };
    }
    if (live.failed.size > 0)
      return {
        code: 'NO_ROUTE',
        detail: `workflow '${input.workflowId.slice(0, 128)}' is failing (${live.record.reason.slice(0, 256)}): it starts no node`,
      };
    const current = live.data[EVENT_DATA_KEY];
    if (current !== undefined && !isPlainObject(current)) {
      return {
        code: 'VALIDATION_ERROR',
        detail: `workflow_data.${EVENT_DATA_KEY} holds ${Array.isArray(current) ? 'a list' : typeof current}, so the event's data cannot be written to ${EVENT_DATA_KEY}.${input.event.slice(0, 128)}`,
      };
    }
    const written = applyWrites(live, [[[EVENT_DATA_KEY, input.event], input.data]]);
    if ('error' in written)
      return {
        code: written.kind === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR',
        detail: `${written.error} with this event's data`,
      };
    const now = this.c.deps.clock.now();
    this.c.transitions.run((tx) => {
      this.p.data.commitWrites(live, written);
      for (const id of waiting) {
        const node = nodeOf(live, id);
        node.fireAt = now;
        node.waiting = `its task to be submitted (event '${input.event}' from ${input.producerId} came)`;
        progress.putNode(live, node);
        progress.queueStart(live, id);
      }
      this.c.deps.log.record({
        correlationId: live.record.workflowId,
        actor: input.producerId,
        eventType: 'workflow.event',
        details: {
          workflow_id: live.record.workflowId,
          event: input.event,
          node_ids: waiting,
          message_id: input.messageId,
        },
      });
      progress.settle(tx, live, input.producerId);
      settle({ workflow_id: live.record.workflowId, workflow_event: input.event, node_ids: waiting });
    }, live.record.workflowId);
    this.p.dispatch.scheduleDrain();
    return undefined;
  }
}
