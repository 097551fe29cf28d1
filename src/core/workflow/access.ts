import type { AccessPart, EventRecorder, Refusal, Speaker } from './core';
import { WorkflowError } from './errors';
import type { WorkflowEventInput } from './eventTrigger';
import type { WorkflowDefinition, WorkflowRecord } from './model';
import { agentsOf, eventFrom, TYPE_TARGET, type LiveWorkflow } from './state';

/** The principal name of an agent credential: `agent:<id>` (src/core/credentials). */
const AGENT_PRINCIPAL = 'agent:';

/**
 * Who may call what (README, "Workflows: who may call"): the operator and the coordinator everything; an agent
 * credential creates a workflow only for agents it may act as (no `type:` target), starts and resumes only one it
 * created (or may act as its creator), reads one it created or one of whose nodes names it; an event only from the
 * operator, the creator or an agent a node names, narrowed by the node's `event_from`. A refusal is logged
 * (`workflow.permission_denied`, WARN) and thrown as WorkflowError `permission`.
 */
export class Access implements AccessPart {
  constructor(private readonly log: Pick<EventRecorder, 'record'>) {}

  /** CreateWorkflow: an agent credential may create a workflow only when it may act as every node's agent. */
  checkCreate(definition: WorkflowDefinition, by: string, speaker: Speaker): void {
    if (speaker.kind !== 'agent') return;
    for (const n of definition.nodes) {
      if (n.agentId.startsWith(TYPE_TARGET)) {
        this.deny(
          'create',
          definition.workflowId,
          by,
          `node ${n.nodeId} goes to ${n.agentId} (any agent of a type): only the operator may create a workflow with such a node`,
        );
      }
      if (!speaker.mayActAs(n.agentId)) {
        this.deny(
          'create',
          definition.workflowId,
          by,
          `${speaker.label} may not act as agent '${n.agentId}' (node ${n.nodeId}): an agent credential may create a ` +
            'workflow only for agents it may act as (as SubmitTask lets it submit only for them)',
        );
      }
    }
  }

  /** StartWorkflow, ResumeWorkflow: its creator (or a credential that may act as it) and the operator. */
  checkCreator(action: 'start' | 'resume', record: WorkflowRecord, by: string, speaker: Speaker): void {
    if (!this.isCreator(record, speaker, by))
      this.deny(
        action,
        record.workflowId,
        by,
        `only its creator (${record.createdBy}) or the operator may ${action} workflow '${record.workflowId}'`,
      );
  }

  /** GetWorkflowState: its creator, an agent one of its nodes names, or the operator. */
  checkRead(record: WorkflowRecord, live: LiveWorkflow | undefined, by: string, speaker: Speaker): void {
    if (
      speaker.kind === 'agent' &&
      !this.isCreator(record, speaker, by) &&
      ![...(live?.agents ?? agentsOf(record.definition))].some((a) => speaker.mayActAs(a))
    ) {
      this.deny(
        'read',
        record.workflowId,
        by,
        `only its creator, an agent one of its nodes names, or the operator may read it (workflow '${record.workflowId}')`,
      );
    }
  }

  /** Who may send a workflow's event (README, "The EVENT filter"): the operator, the workflow's creator, an agent one of its nodes names. */
  eventSenderRefusal(
    input: WorkflowEventInput,
    record: WorkflowRecord,
    live: LiveWorkflow | undefined,
  ): Refusal | undefined {
    if (input.principal === 'operator') return undefined;
    const creator =
      record.createdBy === `${AGENT_PRINCIPAL}${input.producerId}` ||
      (input.principal !== undefined && input.principal === record.createdBy);
    if (creator || (live?.agents ?? agentsOf(record.definition)).has(input.producerId)) return undefined;
    return {
      code: 'PERMISSION_DENIED',
      detail: `${input.producerId.slice(0, 128)} neither created workflow '${input.workflowId.slice(0, 128)}' nor is named by one of its nodes: only those agents and the operator may send its events`,
    };
  }

  /**
   * The nodes waiting for the event that this sender may fire: a node's event_from narrows who may send its event (the
   * operator excepted). A refusal when some wait but none for this sender.
   */
  eventTargets(
    input: WorkflowEventInput,
    live: LiveWorkflow,
    candidates: readonly string[],
  ): { readonly waiting: readonly string[] } | Refusal {
    const waiting =
      input.principal === 'operator'
        ? candidates
        : candidates.filter((id) => eventFrom(live.defs.get(id)!)?.includes(input.producerId) ?? true);
    if (candidates.length > 0 && waiting.length === 0) {
      const first = candidates[0];
      return {
        code: 'PERMISSION_DENIED',
        detail: `the event_from of node ${first} lists ${eventFrom(live.defs.get(first)!)!.join(', ').slice(0, 512)}: ${input.producerId.slice(0, 128)} may not send its event '${input.event.slice(0, 128)}'`,
      };
    }
    return { waiting };
  }

  /** The operator (and the coordinator) always; an agent when it created the workflow or may act as the agent that did. */
  private isCreator(record: WorkflowRecord, speaker: Speaker, by: string): boolean {
    if (speaker.kind !== 'agent') return true;
    if (record.createdBy === by) return true;
    return (
      record.createdBy.startsWith(AGENT_PRINCIPAL) && speaker.mayActAs(record.createdBy.slice(AGENT_PRINCIPAL.length))
    );
  }

  /** PERMISSION_DENIED, logged (`workflow.permission_denied`). */
  private deny(action: string, workflowId: string, by: string, reason: string): never {
    this.log.record({
      correlationId: workflowId || 'workflow',
      actor: by,
      eventType: 'workflow.permission_denied',
      level: 'WARN',
      details: { workflow_id: workflowId.slice(0, 256), action, principal: by, reason: reason.slice(0, 512) },
    });
    throw new WorkflowError('permission', 'PERMISSION_DENIED', reason);
  }
}
