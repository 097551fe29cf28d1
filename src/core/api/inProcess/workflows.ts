import type { Coordinator } from '../../coordinator';
import type { Event } from '../../events';
import { parseDefinitionTextOffThread } from '../../workflow/definitionThread';
import type {
  ValidationIssue,
  WorkflowCreateResult,
  WorkflowDetail,
  WorkflowFileIssue,
  WorkflowNodeDetail,
  WorkflowsChange,
  WorkflowSummary,
} from '../../workflow/model';
import { WorkflowError } from '../../workflow/workflows';
import { CoordinatorApiError } from '../errors';
import type { WorkflowsApi } from '../sections/workflows';
import type { InProcessHost } from './host';

/** Workflows the Workflows view asks for when no limit is given, and the most it may ask for. */
const DEFAULT_WORKFLOWS = 100;
const MAX_WORKFLOWS = 1_000;

/** CoordinatorApi's workflow section over a coordinator in this thread. */
export function workflowsSection(host: InProcessHost): WorkflowsApi {
  /** `run` with the workflow engine's refusals as CoordinatorApiError (not_found, invalid, refused; the SW4RM code kept). */
  const workflowRun = <T>(work: (coordinator: Coordinator) => T): Promise<T> =>
    host.run((c) => {
      try {
        return work(c);
      } catch (err) {
        if (err instanceof WorkflowError) {
          // `permission` does not arise here (the editor is the operator): refused, should it ever.
          throw new CoordinatorApiError(
            err.kind === 'not_found' ? 'not_found' : err.kind === 'invalid' ? 'invalid' : 'refused',
            err.message,
            err.code,
          );
        }
        throw err;
      }
    });
  /** Workflow changes, passed on while this API is not disposed. */
  const onDidChangeWorkflows: Event<WorkflowsChange> = (listener) =>
    host.coordinator.workflows.onDidChange((change) => {
      if (!host.disposed) listener(change);
    });
  return {
    onDidChangeWorkflows,

    workflows(limit?: number): Promise<WorkflowSummary[]> {
      return workflowRun((c) =>
        c.workflows.list(
          Math.min(Math.max(1, Math.floor(limit ?? DEFAULT_WORKFLOWS) || DEFAULT_WORKFLOWS), MAX_WORKFLOWS),
        ),
      );
    },

    workflow(workflowId: string, maxNodes?: number): Promise<WorkflowDetail | undefined> {
      return workflowRun((c) => c.workflows.detail(workflowId, maxNodes));
    },

    workflowNode(workflowId: string, nodeId: string): Promise<WorkflowNodeDetail | undefined> {
      return workflowRun((c) => c.workflows.nodeDetail(workflowId, nodeId));
    },

    async createWorkflowFromText(text: string, fileName: string, by: string): Promise<WorkflowCreateResult> {
      // Parsed on the definition worker when large (yaml takes ~0.9 s per MiB), then created here.
      const parsed = await parseDefinitionTextOffThread(text, fileName);
      return workflowRun((c): WorkflowCreateResult => {
        const placed = parsed.issues;
        if (!parsed.definition || placed.some((i) => i.severity === 'error')) return { ok: false, issues: placed };
        const unplaced = (issues: readonly ValidationIssue[]): WorkflowFileIssue[] =>
          issues.map((i) => {
            const at = placed.find((p) => p.path === i.path);
            return {
              ...i,
              line: at?.line ?? 0,
              column: at?.column ?? 0,
              endLine: at?.endLine ?? 0,
              endColumn: at?.endColumn ?? 0,
            };
          });
        try {
          const result = c.workflows.create(parsed.definition, by, {
            correlationId: parsed.definition.workflowId || c.ids.uuid(),
            principal: 'operator',
          });
          if (!result.ok) return { ok: false, issues: unplaced(result.issues) };
          return { ok: true, workflowId: result.workflowId, warnings: placed.filter((i) => i.severity === 'warning') };
        } catch (err) {
          if (err instanceof WorkflowError && err.kind === 'exists') {
            return {
              ok: false,
              issues: unplaced([{ severity: 'error', code: err.code, path: 'workflow_id', message: err.message }]),
            };
          }
          throw err;
        }
      });
    },

    startWorkflow(workflowId: string, data: string, by: string): Promise<WorkflowDetail> {
      return workflowRun((c) =>
        c.workflows.start(workflowId, data, by, { correlationId: workflowId, principal: 'operator' }),
      );
    },

    runWorkflowNode(workflowId: string, nodeId: string, by: string): Promise<WorkflowDetail> {
      return workflowRun((c) =>
        c.workflows.runNode(workflowId, nodeId, by, { correlationId: workflowId, principal: 'operator' }),
      );
    },

    resumeWorkflow(workflowId: string, nodeId: string, data: string, by: string): Promise<WorkflowDetail> {
      return workflowRun((c) =>
        c.workflows.resume(workflowId, nodeId, data, by, { correlationId: workflowId, principal: 'operator' }),
      );
    },

    cancelWorkflow(workflowId: string, reason: string, by: string): Promise<WorkflowDetail> {
      return workflowRun((c) =>
        c.workflows.cancel(workflowId, reason, by, { correlationId: workflowId, principal: 'operator' }),
      );
    },
  };
}
