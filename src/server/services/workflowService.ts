import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { ValidationIssue, WorkflowDetail } from '../../core/workflow/model';
import { definitionFromJson } from '../../core/workflow/definitionFile';
import { WorkflowError } from '../../core/workflow/workflows';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { speakerOf } from '../speaker';
import { timestampOf } from './negotiationRoomService';
import { refusedBeforeDecode } from './workflowDefinitionScan';
import { statusOf } from '../errorStatus';

/** The trailer that carries CreateWorkflow's warnings (unreachable nodes…): one `code: message` per entry, at most 20. */
export const WARNING_TRAILER = 'sw4rm-warning';
const MAX_WARNINGS = 20;
/** How many of the issues CreateWorkflow's `error` lists (the rest are counted). */
const MAX_ISSUES = 20;

interface IdRequest {
  workflow_id?: string;
}
interface StartRequest extends IdRequest {
  workflow_data?: string;
  metadata?: Record<string, string>;
}
interface ResumeRequest extends StartRequest {
  node_id?: string;
}

/**
 * `code: message; code: message …` of a refused definition: errors only, the first MAX_ISSUES, the string starting with
 * the first issue's code (`workflow_cycle_detected: a → b → a …`).
 */
export function issuesText(issues: readonly ValidationIssue[]): string {
  const errors = issues.filter((i) => i.severity === 'error');
  const shown = errors
    .slice(0, MAX_ISSUES)
    .map((i) => (i.message.startsWith(`${i.code}:`) ? i.message : `${i.code}: ${i.message}`));
  const more = errors.length > MAX_ISSUES ? [`… and ${errors.length - MAX_ISSUES} more`] : [];
  return [...shown, ...more].join('; ');
}

/** The most bytes a WorkflowState answer is let grow to: what a gRPC client receives by default (4 MiB), less room for the rest. */
export const STATE_ANSWER_BUDGET = 4 * 1024 * 1024 - 64 * 1024;

/**
 * workflow.proto WorkflowState (proto field names, keepCase) of a workflow, within `budget` bytes (estimated: each
 * node's ids, output and error, plus workflow_data): every node of the detail while they fit; else the PENDING nodes
 * are left out first (a node absent from node_states is PENDING unless node_states_omitted says more were cut), then
 * the last ones in the definition's order. `metadata.node_states_omitted` counts the workflow's nodes not in
 * node_states (absent when none is), `metadata.counts` is every node's status count (JSON).
 */
export function stateMessage(d: WorkflowDetail, budget = STATE_ANSWER_BUDGET): Record<string, unknown> {
  const ts = (ms: number | null) => (ms === null ? null : timestampOf(ms));
  const summary = d.summary;
  const entries = d.nodes.map((n) => {
    const s = n.state;
    // The proto has no field for what a node waits for: a node that has no error shows it there.
    const error = s.error || (s.waiting ? `waiting for ${s.waiting}` : '');
    const bytes = 2 * Buffer.byteLength(s.nodeId) + Buffer.byteLength(s.output) + Buffer.byteLength(error) + 48;
    return { s, error, bytes };
  });
  let room = budget - Buffer.byteLength(d.data) - Buffer.byteLength(summary.reason) - 1024;
  const total = entries.reduce((sum, e) => sum + e.bytes, 0);
  const kept =
    total <= room
      ? entries
      : entries
          .filter((e) => e.s.status !== 'PENDING')
          .filter((e) => {
            room -= e.bytes;
            return room >= 0;
          });
  const nodeStates: Record<string, unknown> = {};
  for (const { s, error } of kept) {
    nodeStates[s.nodeId] = {
      node_id: s.nodeId,
      status: s.status,
      started_at: ts(s.startedAt),
      completed_at: ts(s.completedAt),
      output: s.output,
      error,
    };
  }
  const omitted = summary.nodeCount - kept.length;
  return {
    workflow_id: summary.workflowId,
    node_states: nodeStates,
    workflow_data: d.data,
    started_at: ts(summary.startedAt),
    completed_at: ts(summary.completedAt),
    metadata: {
      state: summary.state,
      reason: summary.reason,
      nodes: String(summary.nodeCount),
      updated_at: new Date(summary.updatedAt).toISOString(),
      counts: JSON.stringify(summary.counts),
      ...(omitted > 0 ? { node_states_omitted: String(omitted) } : {}),
    },
  };
}

/**
 * sw4rm.workflow.WorkflowService over the core's workflow engine (RFC §17.7; README, "Workflows"). Domain refusals are
 * answers, `success` false and `error` starting with the code: a definition that does not validate
 * (`workflow_cycle_detected: a → b → a`, several issues joined by `; `), ALREADY_EXISTS, NOT_FOUND, FAILED_PRECONDITION
 * (already started, a node RUNNING…). A request that cannot be read is a gRPC status: INVALID_ARGUMENT for a missing
 * definition or workflow_id / node_id, for workflow_data that is not a JSON object within its bounds, and for a
 * CreateWorkflowRequest refused on its bytes before it is decoded (workflowDefinitionScan.ts: over 1 MiB,
 * `OVERSIZE_PAYLOAD: …`; more nodes, dependencies or map entries than WORKFLOW_LIMITS, `VALIDATION_ERROR: limit_exceeded: …`). Answers after
 * the store is durable. No field names the caller (identity.ts); the engine decides from the caller's credential
 * (speakerOf): the operator may do everything; an agent credential may create a workflow only for agents it may act as
 * (no `type:` node), start and resume only one it created (or may act as the agent that did), read one it created or
 * whose nodes name it — else the gRPC status PERMISSION_DENIED, logged `workflow.permission_denied`.
 */
export class WorkflowServiceAdapter {
  static readonly serviceName = 'sw4rm.workflow.WorkflowService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { workflows, ids, store, credentials } = this.coordinator;
    type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void;
    const invalid = (details: string): grpc.StatusObject => ({
      code: grpc.status.INVALID_ARGUMENT,
      details: `VALIDATION_ERROR: ${details}`,
      metadata: new grpc.Metadata(),
    });
    /** Runs `work`; a WorkflowError of kind `invalid` is INVALID_ARGUMENT, the others are answered by `refusal`. */
    const unary =
      <Req, Res>(
        work: (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void,
        refusal: (call: grpc.ServerUnaryCall<Req, Res>, error: string) => Res,
      ): Unary<Req, Res> =>
      (call, callback) => {
        try {
          work(call, callback);
        } catch (err) {
          if (err instanceof WorkflowError) {
            if (err.kind === 'invalid')
              callback({
                code: grpc.status.INVALID_ARGUMENT,
                details: `${err.code}: ${err.message}`,
                metadata: new grpc.Metadata(),
              });
            else if (err.kind === 'permission')
              callback({
                code: grpc.status.PERMISSION_DENIED,
                details: `${err.code}: ${err.message}`,
                metadata: new grpc.Metadata(),
              });
            else answerWhenDurable(store, callback, refusal(call, `${err.code}: ${err.message}`));
            return;
          }
          callback(statusOf(err));
        }
      };
    const contextOf = (call: grpc.ServerUnaryCall<unknown, unknown>, workflowId: string) => ({
      ...callContext(call, ids),
      correlationId: workflowId,
    });
    const required = (value: string | undefined, field: string): string | undefined =>
      (value ?? '').trim() === '' ? `${field} is required` : undefined;
    /**
     * Who calls, for the engine's rules and as the workflow's creator / the log's actor: `operator`, `agent:<agent id>`,
     * `enrolment:<credential id>`, `unauthenticated` (auth none).
     */
    const caller = (call: grpc.ServerUnaryCall<unknown, unknown>) => {
      const speaker = speakerOf(call, credentials);
      return { speaker, by: speaker.kind === 'coordinator' ? 'coordinator' : speaker.label };
    };

    return {
      CreateWorkflow: unary<{ definition?: unknown }, { workflow_id: string; success: boolean; error: string }>(
        (call, callback) => {
          const refused = refusedBeforeDecode(call.request);
          if (refused !== undefined) {
            callback({ code: grpc.status.INVALID_ARGUMENT, details: refused, metadata: new grpc.Metadata() });
            return;
          }
          const ctx = callContext(call, ids);
          const raw = call.request.definition;
          if (raw === null || raw === undefined) {
            callback(invalid('definition is required (a WorkflowDefinition with its nodes)'));
            return;
          }
          const read = definitionFromJson(raw);
          if (!read.definition || read.issues.some((i) => i.severity === 'error')) {
            answerWhenDurable(store, callback, {
              workflow_id: String((raw as { workflow_id?: unknown }).workflow_id ?? ''),
              success: false,
              error: issuesText(read.issues),
            });
            return;
          }
          const { speaker, by } = caller(call);
          const result = workflows.create(read.definition, by, ctx, speaker);
          if (!result.ok) {
            answerWhenDurable(store, callback, {
              workflow_id: read.definition.workflowId,
              success: false,
              error: issuesText(result.issues),
            });
            return;
          }
          const trailer = new grpc.Metadata();
          for (const w of [...read.issues.filter((i) => i.severity === 'warning'), ...result.warnings].slice(
            0,
            MAX_WARNINGS,
          )) {
            trailer.add(WARNING_TRAILER, `${w.code}: ${w.message}`.slice(0, 1024).replace(/[\r\n]/g, ' '));
          }
          answerWhenDurable(
            store,
            callback,
            { workflow_id: result.workflowId, success: true, error: '' },
            undefined,
            trailer,
          );
        },
        (call, error) => ({
          workflow_id: String((call.request.definition as { workflow_id?: unknown } | undefined)?.workflow_id ?? ''),
          success: false,
          error,
        }),
      ),

      StartWorkflow: unary<StartRequest, { workflow_id: string; state: unknown; success: boolean; error: string }>(
        (call, callback) => {
          const id = call.request.workflow_id ?? '';
          const missing = required(id, 'workflow_id');
          if (missing) {
            callback(invalid(missing));
            return;
          }
          const ctx = contextOf(call, id);
          const { speaker, by } = caller(call);
          const detail = workflows.start(id, call.request.workflow_data ?? '', by, ctx, speaker);
          answerWhenDurable(store, callback, {
            workflow_id: id,
            state: stateMessage(detail),
            success: true,
            error: '',
          });
        },
        (call, error) => ({ workflow_id: call.request.workflow_id ?? '', state: null, success: false, error }),
      ),

      GetWorkflowState: unary<IdRequest, { state: unknown; success: boolean; error: string }>(
        (call, callback) => {
          const id = call.request.workflow_id ?? '';
          const missing = required(id, 'workflow_id');
          if (missing) {
            callback(invalid(missing));
            return;
          }
          const { speaker, by } = caller(call);
          const detail = workflows.state(id, speaker, by);
          if (!detail) {
            answerWhenDurable(store, callback, {
              state: null,
              success: false,
              error: `NOT_FOUND: no workflow '${id.slice(0, 128)}'`,
            });
            return;
          }
          answerWhenDurable(store, callback, { state: stateMessage(detail), success: true, error: '' });
        },
        (_call, error) => ({ state: null, success: false, error }),
      ),

      ResumeWorkflow: unary<ResumeRequest, { workflow_id: string; state: unknown; success: boolean; error: string }>(
        (call, callback) => {
          const id = call.request.workflow_id ?? '';
          const missing =
            required(id, 'workflow_id') ?? required(call.request.node_id, 'node_id (the node to run again from)');
          if (missing) {
            callback(invalid(missing));
            return;
          }
          const ctx = contextOf(call, id);
          const { speaker, by } = caller(call);
          const detail = workflows.resume(
            id,
            call.request.node_id ?? '',
            call.request.workflow_data ?? '',
            by,
            ctx,
            speaker,
          );
          answerWhenDurable(store, callback, {
            workflow_id: id,
            state: stateMessage(detail),
            success: true,
            error: '',
          });
        },
        (call, error) => ({ workflow_id: call.request.workflow_id ?? '', state: null, success: false, error }),
      ),
    };
  }
}
