import { parsePolicySettings, type PolicySet, type PolicySettings, type PolicySettingValues } from '../core/api';

/** The sw4rm.negotiation.* settings as the user wrote them (any JSON value may arrive from settings.json). */
export type NegotiationSettingValues = PolicySettingValues;

export interface NegotiationSettings {
  /**
   * What the coordinator is given: only the fields the settings name. At start they are laid over its newest policy
   * version; after that it lays only the fields that differ from the settings it last applied (so an unchanged
   * setting never undoes an RPC's change).
   */
  readonly settings: PolicySettings;
  /** What was ignored, for the Output channel. */
  readonly warnings: readonly string[];
}

/**
 * Turns sw4rm.negotiation.* into the coordinator's PolicySettings (README, "Negotiation policy"). A value of the wrong
 * type or out of range, an unknown field, a schema that does not compile, is left out and named in `warnings`; the
 * rest applies. What only the whole policy can tell (a profile outside the guardrails) the coordinator refuses, and
 * NegotiationSettingsFollower reports.
 */
export function negotiationSettings(values: NegotiationSettingValues): NegotiationSettings {
  return parsePolicySettings(values, 'sw4rm.negotiation.');
}

/** The host's negotiation options from the settings (the host starts with them). */
export function negotiationOptionsOf(settings: NegotiationSettings): PolicySettings {
  return settings.settings;
}

/** What the follower needs of the API (the whole CoordinatorApi in the editor). */
export interface NegotiationTarget {
  applyNegotiationSettings(settings: PolicySettings): Promise<PolicySet>;
}

/**
 * Keeps the running coordinator's negotiation policy in step with sw4rm.negotiation.* without a restart: once when it
 * is bound (the settings may have changed while the host started), then at every change. The coordinator compares
 * what it is given with the settings it last applied (at bind: those it started with) and lays only the fields that
 * changed over its newest version, so a setting the user did not touch never undoes an RPC's change. A refusal (and every ignored value) goes to `report`; the coordinator keeps the
 * version it has. No `vscode`: `read` reads the settings.
 */
export class NegotiationSettingsFollower {
  private api: NegotiationTarget | undefined;
  private applied: string | undefined;

  constructor(
    private readonly read: () => NegotiationSettings,
    private readonly report: (problem: string) => void,
  ) {}

  async bind(api: NegotiationTarget | undefined): Promise<void> {
    this.api = api;
    this.applied = undefined;
    if (api) await this.apply(false);
  }

  /** The settings changed: their warnings are reported, and the settings go to the coordinator when they differ from the last given. */
  async settingsChanged(): Promise<void> {
    await this.apply(true);
  }

  private async apply(reportWarnings: boolean): Promise<void> {
    const read = this.read();
    // At bind, the warnings were reported with the other settings' when the host started.
    if (reportWarnings) for (const warning of read.warnings) this.report(warning);
    const api = this.api;
    if (!api) return;
    const key = JSON.stringify(read.settings);
    if (this.applied === key) return;
    this.applied = key;
    try {
      await api.applyNegotiationSettings(read.settings);
    } catch (err) {
      this.applied = undefined;
      this.report(
        `sw4rm.negotiation.* was not applied (the policy stays as it was): ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
}
