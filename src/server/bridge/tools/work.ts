import type { BridgeTool } from '../model';
import { ACTIVITY_TOOLS } from './activity';
import { COLLABORATION_TOOLS } from './collaboration';
import { DECISION_TOOLS } from './decisions';
import { TASK_TOOLS } from './tasks';

/**
 * request_decision (decisions.ts), report_activity, append_artifact (activity.ts), current_task, complete_task,
 * fail_task (tasks.ts), request_handoff, submit_proposal, submit_vote (collaboration.ts) (README, "The MCP bridge").
 * Each calls the core method the gRPC adapter of the same operation calls; the caller is always the credential's agent.
 */
export const WORK_TOOLS: readonly BridgeTool[] = [
  ...DECISION_TOOLS,
  ...TASK_TOOLS,
  ...ACTIVITY_TOOLS,
  ...COLLABORATION_TOOLS,
];
