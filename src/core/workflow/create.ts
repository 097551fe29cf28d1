import type { CallContext } from '../context';
import type { Core, Parts, Speaker } from './core';
import { WorkflowError } from './errors';
import type { NodeRecord, ValidationIssue, WorkflowDefinition, WorkflowRecord } from './model';
import { canonical, pendingNode } from './state';
import { validateDefinition } from './validate';

/** CreateWorkflow's answer: created (or the same definition again: `created` false), or refused with every issue. */
export type CreateResult =
  | {
      readonly ok: true;
      readonly workflowId: string;
      readonly created: boolean;
      readonly warnings: readonly ValidationIssue[];
    }
  | { readonly ok: false; readonly issues: readonly ValidationIssue[] };

/**
 * CreateWorkflow: a definition validated (validateDefinition, O(V + E)) before anything is stored, then stored DEFINED
 * with every node PENDING. An empty workflow_id gets a uuid; the same workflow_id again is answered as created when the
 * definition is the same (canonical form: a retry), refused ALREADY_EXISTS otherwise.
 */
export class Create {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'live' | 'notify'>,
    private readonly p: Pick<Parts, 'access'>,
  ) {}

  create(input: WorkflowDefinition, by: string, ctx: CallContext, speaker: Speaker): CreateResult {
    const { ids, log, store, clock } = this.c.deps;
    const definition: WorkflowDefinition = input.workflowId === '' ? { ...input, workflowId: ids.uuid() } : input;
    const validated = validateDefinition(definition);
    const warnings = validated.issues.filter((i) => i.severity === 'warning');
    if (!validated.ok) {
      const errors = validated.issues.filter((i) => i.severity === 'error');
      log.record({
        correlationId: definition.workflowId || ctx.correlationId,
        actor: by,
        eventType: 'workflow.create_refused',
        level: 'WARN',
        details: {
          workflow_id: definition.workflowId.slice(0, 256),
          nodes: definition.nodes.length,
          codes: [...new Set(errors.map((e) => e.code))],
          first: errors[0]?.message.slice(0, 512),
        },
      });
      return { ok: false, issues: validated.issues };
    }
    this.p.access.checkCreate(definition, by, speaker);
    const existing = this.c.live.get(definition.workflowId)?.record ?? store.workflows.get(definition.workflowId);
    if (existing) {
      if (canonical(existing.definition) === canonical(definition))
        return { ok: true, workflowId: existing.workflowId, created: false, warnings: existing.warnings };
      throw new WorkflowError(
        'exists',
        'ALREADY_EXISTS',
        `workflow '${definition.workflowId}' exists with another definition: choose another workflow_id (or leave it empty for a new one)`,
      );
    }
    const now = clock.now();
    const nodes = new Map<string, NodeRecord>();
    for (const n of definition.nodes) nodes.set(n.nodeId, pendingNode(n.nodeId));
    const record: WorkflowRecord = {
      workflowId: definition.workflowId,
      definition,
      warnings,
      state: 'DEFINED',
      data: '{}',
      nodes,
      createdAt: now,
      createdBy: by,
      startedAt: null,
      completedAt: null,
      startedBy: '',
      reason: '',
      updatedAt: now,
    };
    this.c.transitions.run((tx) => {
      store.workflows.create(record);
      log.record({
        correlationId: record.workflowId,
        actor: by,
        eventType: 'workflow.state',
        details: {
          workflow_id: record.workflowId,
          from: '',
          to: 'DEFINED',
          reason: 'created',
          nodes: nodes.size,
          warnings: warnings.length,
        },
      });
      this.c.notify(tx, { workflowId: record.workflowId, state: 'DEFINED' });
    }, record.workflowId);
    return { ok: true, workflowId: record.workflowId, created: true, warnings };
  }
}
