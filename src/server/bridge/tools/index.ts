import type { BridgeTool } from '../model';
import { MESSAGING_TOOLS } from './messaging';
import { WORK_TOOLS } from './work';
import { WORKSPACE_TOOLS } from './workspace';

/** Every tool the MCP bridge serves, in the order `tools/list` shows them. */
export const BRIDGE_TOOLS: readonly BridgeTool[] = [...MESSAGING_TOOLS, ...WORK_TOOLS, ...WORKSPACE_TOOLS];
