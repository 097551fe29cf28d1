/** Every command, view, context key and setting id the extension contributes, in one place (package.json must match). */
export const Commands = {
  start: 'sw4rm.start',
  stop: 'sw4rm.stop',
  restart: 'sw4rm.restart',
  copyAgentEnvironment: 'sw4rm.copyAgentEnvironment',
  showLog: 'sw4rm.showLog',
  showMetrics: 'sw4rm.showMetrics',
  requeueDeadLetter: 'sw4rm.dlq.requeue',
  exportDeadLetters: 'sw4rm.dlq.export',
  filterDeadLetters: 'sw4rm.dlq.filter',
  clearDeadLetterFilter: 'sw4rm.dlq.clearFilter',
  refreshDeadLetters: 'sw4rm.dlq.refresh',
} as const;

export const Views = {
  container: 'sw4rm',
  agents: 'sw4rm.agents',
  deadLetters: 'sw4rm.deadLetters',
} as const;

/** Context keys the extension sets for `when` clauses in package.json. */
export const ContextKeys = {
  /** True while the coordinator of this window is serving. */
  running: 'sw4rm.running',
  /** True while the Dead Letters view has a filter. */
  deadLettersFiltered: 'sw4rm.dlq.filtered',
} as const;

export const SETTINGS_SECTION = 'sw4rm';

export const Settings = {
  port: 'port',
  host: 'host',
  auth: 'auth',
  dataDir: 'dataDir',
  heartbeatDebounceSeconds: 'heartbeatDebounceSeconds',
  autoStart: 'autoStart',
  inboxCapacity: 'inboxCapacity',
  deduplicationWindowSeconds: 'deduplicationWindowSeconds',
  privilegedRatePerSecond: 'privilegedRatePerSecond',
  payloadLimits: 'payloadLimits',
} as const;

export const OUTPUT_CHANNEL_NAME = 'SW4RM';
