import { CONNECTION_LIMIT_BOUNDS, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from '../server/connectionLimits';

/** The connection settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface ConnectionSettingValues {
  readonly maxConnections?: unknown;
  readonly unauthenticatedIdleSeconds?: unknown;
  readonly requestBodyTimeoutSeconds?: unknown;
}

/**
 * Turns sw4rm.maxConnections, sw4rm.unauthenticatedIdleSeconds and sw4rm.requestBodyTimeoutSeconds into the
 * server's connection bounds (README "Limits"). Values that are not whole numbers fall back to the default,
 * values out of range are clamped; both are named in `warnings`.
 */
export function connectionSettings(values: ConnectionSettingValues): { limits: ConnectionLimits; warnings: string[] } {
  const warnings: string[] = [];
  const whole = (name: string, value: unknown, fallback: number, bounds: { min: number; max: number }): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      warnings.push(`sw4rm.${name} is not a number; using ${fallback}.`);
      return fallback;
    }
    const clamped = Math.min(bounds.max, Math.max(bounds.min, Math.floor(value)));
    if (clamped !== value)
      warnings.push(`sw4rm.${name} ${value} is outside ${bounds.min}–${bounds.max}; using ${clamped}.`);
    return clamped;
  };
  const defaults = DEFAULT_CONNECTION_LIMITS;
  return {
    limits: {
      maxConnections: whole(
        'maxConnections',
        values.maxConnections,
        defaults.maxConnections,
        CONNECTION_LIMIT_BOUNDS.maxConnections,
      ),
      unauthenticatedIdleMs:
        whole(
          'unauthenticatedIdleSeconds',
          values.unauthenticatedIdleSeconds,
          defaults.unauthenticatedIdleMs / 1000,
          CONNECTION_LIMIT_BOUNDS.unauthenticatedIdleSeconds,
        ) * 1000,
      requestBodyMs:
        whole(
          'requestBodyTimeoutSeconds',
          values.requestBodyTimeoutSeconds,
          defaults.requestBodyMs / 1000,
          CONNECTION_LIMIT_BOUNDS.requestBodySeconds,
        ) * 1000,
    },
    warnings,
  };
}
