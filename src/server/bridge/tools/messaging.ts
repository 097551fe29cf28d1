import type { BridgeTool } from '../model';

/** list_agents, send_message, read_inbox, ack_message (README, "The MCP bridge"). Built by the bridge helper. */
export const MESSAGING_TOOLS: readonly BridgeTool[] = [];
