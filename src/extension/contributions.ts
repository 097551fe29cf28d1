/** Every command, view and setting id the extension contributes, in one place (package.json must match). */
export const Commands = {
  start: 'sw4rm.start',
  stop: 'sw4rm.stop',
  restart: 'sw4rm.restart',
  copyAgentEnvironment: 'sw4rm.copyAgentEnvironment',
  showLog: 'sw4rm.showLog',
} as const;

export const Views = {
  container: 'sw4rm',
  agents: 'sw4rm.agents',
} as const;

export const SETTINGS_SECTION = 'sw4rm';

export const Settings = {
  port: 'port',
  host: 'host',
  auth: 'auth',
  dataDir: 'dataDir',
  heartbeatDebounceSeconds: 'heartbeatDebounceSeconds',
  autoStart: 'autoStart',
} as const;

export const OUTPUT_CHANNEL_NAME = 'SW4RM';
