/** The MCP bridge's default port (sw4rm.bridge.port, --bridge-port), apart so the editor's settings load no bridge code. */
export const DEFAULT_BRIDGE_PORT = 50052;
