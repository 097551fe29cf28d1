import { DEFAULT_HANDOFF_OPTIONS, HANDOFF_OPTION_BOUNDS, type HandoffOptions } from '../core/api';

/** The handoff settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface HandoffSettingValues {
  readonly defaultTimeoutSeconds?: unknown;
  readonly reroute?: unknown;
  readonly routeToOperator?: unknown;
  readonly retentionDays?: unknown;
}

export interface HandoffSettings {
  /** The handoff area's options (README, "Handoffs"): the default timeout, rerouting, routing to the operator, retention. */
  readonly options: Partial<HandoffOptions>;
  /** What was ignored or clamped, for the Output channel. */
  readonly warnings: readonly string[];
}

/**
 * Turns sw4rm.handoffs.* into the handoff area's options. A value of the wrong type is ignored (the default applies), a
 * number out of range is clamped; both are named in `warnings`.
 */
export function handoffSettings(values: HandoffSettingValues): HandoffSettings {
  const warnings: string[] = [];
  const whole = (
    name: string,
    value: unknown,
    bounds: { readonly min: number; readonly max: number },
    fallback: number,
  ): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      warnings.push(`sw4rm.handoffs.${name} must be a whole number; using ${fallback}.`);
      return fallback;
    }
    const clamped = Math.min(bounds.max, Math.max(bounds.min, value));
    if (clamped !== value)
      warnings.push(`sw4rm.handoffs.${name} ${value} is outside ${bounds.min}–${bounds.max}; using ${clamped}.`);
    return clamped;
  };
  const flag = (name: string, value: unknown, fallback: boolean): boolean => {
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') {
      warnings.push(`sw4rm.handoffs.${name} is not true or false; using ${fallback}.`);
      return fallback;
    }
    return value;
  };
  const d = DEFAULT_HANDOFF_OPTIONS;
  return {
    options: {
      defaultTimeoutMs:
        whole(
          'defaultTimeoutSeconds',
          values.defaultTimeoutSeconds,
          HANDOFF_OPTION_BOUNDS.defaultTimeoutSeconds,
          d.defaultTimeoutMs / 1000,
        ) * 1000,
      reroute: flag('reroute', values.reroute, d.reroute),
      routeToOperator: flag('routeToOperator', values.routeToOperator, d.routeToOperator),
      retentionDays: whole('retentionDays', values.retentionDays, HANDOFF_OPTION_BOUNDS.retentionDays, d.retentionDays),
    },
    warnings,
  };
}

/** The host's handoff options from the settings (the host starts with them). */
export function handoffOptionsOf(settings: HandoffSettings): Partial<HandoffOptions> {
  return { ...settings.options };
}
