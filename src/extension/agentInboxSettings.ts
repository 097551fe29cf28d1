import { DEFAULT_LAUNCHES_OPTIONS, INBOX_ACK_TIMEOUT_MINUTES, type LaunchesOptions } from '../core/api';

/** The setting as the user wrote it (any JSON value may arrive from settings.json). */
export interface AgentInboxSettingValues {
  readonly inboxAckTimeoutMinutes?: unknown;
}

export interface AgentInboxSettings {
  /** The launch area's options (README, "The MCP bridge"): the ACK timeout of messages to launched agents that pull their inbox. */
  readonly options: Pick<LaunchesOptions, 'bridgedAckTimeoutMs'>;
  /** What was ignored or clamped, for the Output channel. */
  readonly warnings: readonly string[];
}

/**
 * Turns sw4rm.agents.inboxAckTimeoutMinutes into the launch area's `bridgedAckTimeoutMs`. A value that is not a whole
 * number is ignored (the default applies), one out of range is clamped; both are named in `warnings`.
 */
export function agentInboxSettings(values: AgentInboxSettingValues): AgentInboxSettings {
  const warnings: string[] = [];
  const fallback = DEFAULT_LAUNCHES_OPTIONS.bridgedAckTimeoutMs / 60_000;
  const { min, max } = INBOX_ACK_TIMEOUT_MINUTES;
  let minutes = fallback;
  const value = values.inboxAckTimeoutMinutes;
  if (value !== undefined) {
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      warnings.push(`sw4rm.agents.inboxAckTimeoutMinutes must be a whole number; using ${fallback}.`);
    } else {
      minutes = Math.min(max, Math.max(min, value));
      if (minutes !== value)
        warnings.push(`sw4rm.agents.inboxAckTimeoutMinutes ${value} is outside ${min}–${max}; using ${minutes}.`);
    }
  }
  return { options: { bridgedAckTimeoutMs: minutes * 60_000 }, warnings };
}
