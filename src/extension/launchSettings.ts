import type { ProfileIssue } from '../core/api';

/** What the follower needs of the API (the whole CoordinatorApi in the editor). */
export interface LaunchProfileTarget {
  setLaunchProfileSettings(value: unknown): Promise<ProfileIssue[]>;
}

/**
 * Keeps the running coordinator's launch profiles in step with the `sw4rm.agents.profiles` setting (README, "Launch
 * your first agent"): the value as the user wrote it (any JSON) is given when the coordinator starts and at every
 * change; the coordinator reads it (src/core/launch) and answers what it refused, which goes to `report` — once per
 * distinct set of issues, so that an unrelated settings change does not warn again. No `vscode`: `read` reads the setting.
 */
export class LaunchProfileSettingsFollower {
  private api: LaunchProfileTarget | undefined;
  private reported = '';

  constructor(
    private readonly read: () => unknown,
    private readonly report: (issues: readonly ProfileIssue[]) => void,
  ) {}

  async bind(api: LaunchProfileTarget | undefined): Promise<void> {
    this.api = api;
    if (api) await this.apply();
  }

  async settingsChanged(): Promise<void> {
    this.reported = '';
    await this.apply();
  }

  private async apply(): Promise<void> {
    const api = this.api;
    if (!api) return;
    let issues: ProfileIssue[];
    try {
      issues = await api.setLaunchProfileSettings(this.read() ?? []);
    } catch (err) {
      issues = [
        {
          source: 'sw4rm.agents.profiles',
          path: '',
          message: `not applied: ${err instanceof Error ? err.message : String(err)}`,
        },
      ];
    }
    if (api !== this.api) return;
    const key = JSON.stringify(issues);
    if (!issues.length || key === this.reported) return;
    this.reported = key;
    this.report(issues);
  }
}
