import {
  DEFAULT_EXECUTION_POLICY,
  ToolCallError,
  type ToolDescriptor,
  type ToolFrame,
} from '../../../core/tools/model';
import { WORKSPACE_PROVIDER_ID, WORKSPACE_TOOL_DESCRIPTORS } from '../../../core/tools/workspaceProvider';
import {
  BridgeToolError,
  type BridgeTool,
  type BridgeToolContext,
  type BridgeToolOutput,
  type JsonSchemaObject,
} from '../model';
import { asBridgeError, refusal } from './errors';

/**
 * One workspace tool over the bridge: the same call ToolService.Call makes (Tools.start with the caller's agent id, via
 * `bridge`), so the tools area applies its rules once — the schema, the caller's bound worktree (an unbound caller is
 * refused `worktree_not_bound`, answered FAILED_PRECONDITION), Confinement for every path (`..`, absolute paths and
 * links out of the worktree are refused `permission_denied`), max_concurrency, the log and the Tools view's record.
 * The MCP call going away (its signal) abandons the call as a cancelled gRPC call does (Tools.abandon).
 */
function workspaceTool(descriptor: ToolDescriptor): BridgeTool {
  return {
    name: `workspace_${descriptor.name}`,
    description: `${descriptor.description} (The built-in workspace provider's ${descriptor.name}; paths are relative to your worktree, which you must be bound to.)`,
    inputSchema: descriptor.inputSchema as JsonSchemaObject,
    annotations: {
      readOnlyHint: descriptor.sideEffects === 'none',
      destructiveHint: descriptor.name === 'delete_file',
      idempotentHint: descriptor.idempotent,
      openWorldHint: false,
    },
    run: (args, tool) => callWorkspace(descriptor.name, args, tool),
  };
}

function callWorkspace(
  toolName: string,
  args: Record<string, unknown>,
  { coordinator, caller, ctx, signal }: BridgeToolContext,
): Promise<BridgeToolOutput> {
  return new Promise<BridgeToolOutput>((resolve, reject) => {
    let done = false;
    const settle = (f: () => void) => {
      if (done) return;
      done = true;
      signal.removeEventListener('abort', onAbort);
      f();
    };
    let callId: string | undefined;
    const onAbort = () =>
      settle(() => {
        if (callId !== undefined) coordinator.tools.abandon(callId);
        reject(refusal('CANCELLED', `${toolName}: the MCP call was cancelled`));
      });
    try {
      callId = coordinator.tools.start(
        caller.agentId,
        {
          providerId: WORKSPACE_PROVIDER_ID,
          toolName,
          contentType: 'application/json',
          args: Buffer.from(JSON.stringify(args), 'utf8'),
          policy: DEFAULT_EXECUTION_POLICY,
          stream: false,
          via: 'bridge',
        },
        ctx,
        {
          frame: () => undefined,
          end: (frame: ToolFrame) =>
            settle(() => {
              try {
                resolve(JSON.parse(frame.data.toString('utf8')) as BridgeToolOutput);
              } catch (err) {
                reject(err);
              }
            }),
          fail: (err: ToolCallError) => settle(() => reject(bridged(err))),
        },
      ).callId;
    } catch (err) {
      done = true;
      reject(bridged(err));
      return;
    }
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The tools area's refusal as the bridge answers it; an unbound caller is told how a bridged agent gets its worktree. */
function bridged(err: unknown): unknown {
  const answer = asBridgeError(err);
  if (err instanceof ToolCallError && err.code === 'worktree_not_bound' && answer instanceof BridgeToolError) {
    return new BridgeToolError(
      answer.code,
      `${answer.message} (an agent launched with SW4RM: Launch Agent… is bound to its worktree at launch; ask the person at the editor to bind you)`,
      false,
    );
  }
  return answer;
}

/** The confined `workspace` file and git tools, through the tools area (README, "Workspace tools"), as workspace_<tool>. */
export const WORKSPACE_TOOLS: readonly BridgeTool[] = WORKSPACE_TOOL_DESCRIPTORS.map(workspaceTool);
