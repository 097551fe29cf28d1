import type { BridgeTool } from '../model';

/** The confined `workspace` file tools, through the tools area (README, "Tools"). Built by the work-tools helper. */
export const WORKSPACE_TOOLS: readonly BridgeTool[] = [];
