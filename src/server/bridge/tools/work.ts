import type { BridgeTool } from '../model';

/**
 * request_decision, report_activity, append_artifact, current_task, complete_task, fail_task, request_handoff,
 * submit_proposal, submit_vote (README, "The MCP bridge"). Built by the work-tools helper.
 */
export const WORK_TOOLS: readonly BridgeTool[] = [];
