import type { HostOptions } from '../server/host';

/** The tools settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface ToolSettingValues {
  readonly processEnabled?: unknown;
  readonly processAcceptUnenforcedNetworkPolicy?: unknown;
}

export interface ToolSettings {
  /** The built-in `process` provider (README, "The process provider"): on, and whether it may run a call whose network policy it cannot enforce. */
  readonly process: { readonly enabled: boolean; readonly acceptUnenforcedNetworkPolicy: boolean };
  /** What was ignored, for the Output channel. */
  readonly warnings: readonly string[];
}

/**
 * Turns sw4rm.tools.* into the host's tool options. Both switches are off unless the value is exactly `true`: a value
 * of another type is named in `warnings` and counts as off (the process provider runs commands, so it is never on by
 * accident).
 */
export function toolSettings(values: ToolSettingValues): ToolSettings {
  const warnings: string[] = [];
  const flag = (name: string, value: unknown): boolean => {
    if (value !== undefined && typeof value !== 'boolean')
      warnings.push(`sw4rm.tools.process.${name} is not true or false; it stays off.`);
    return value === true;
  };
  return {
    process: {
      enabled: flag('enabled', values.processEnabled),
      acceptUnenforcedNetworkPolicy: flag('acceptUnenforcedNetworkPolicy', values.processAcceptUnenforcedNetworkPolicy),
    },
    warnings,
  };
}

/** The host's tool options from the settings (the host starts with them). */
export function toolOptionsOf(settings: ToolSettings): NonNullable<HostOptions['tools']> {
  return { process: { ...settings.process } };
}
