import { DEFAULT_SCHEDULER_OPTIONS, type SchedulerOptions } from '../core/api';

/** The scheduler settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface SchedulerSettingValues {
  readonly maxParallelInstances?: unknown;
  readonly defaultMaxParallelInstances?: unknown;
  readonly conflictThreshold?: unknown;
  readonly onUnavailableEngine?: unknown;
}

export interface SchedulerSettings {
  /** RFC §9.1: the most tasks running at once per agent type (descriptor name); 0 = no limit for that type (not the default). */
  readonly maxParallelInstances: Readonly<Record<string, number>>;
  /** For types not listed; 0 = unlimited. */
  readonly defaultMaxParallelInstances: number;
  /** RFC §9.3: a parallelism confidence below this asks a human (a HITL CONFLICT invocation). */
  readonly conflictThreshold: number;
  readonly unavailableEngine: SchedulerOptions['unavailableEngine'];
  /** What was ignored or clamped, for the Output channel. */
  readonly warnings: readonly string[];
}

/** The largest limit a setting may give (a limit this high is, in practice, none). */
const MAX_PARALLEL_INSTANCES_LIMIT = 10_000;

/**
 * Turns sw4rm.scheduler.* into the scheduler's options (README, "Tasks and activity"). A value of the wrong type or out
 * of range is ignored (or clamped) and named in `warnings`.
 */
export function schedulerSettings(values: SchedulerSettingValues): SchedulerSettings {
  const warnings: string[] = [];
  const limit = (name: string, value: unknown): number | undefined => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
      warnings.push(`${name} must be a whole number ≥ 0 (0 = unlimited); ignored.`);
      return undefined;
    }
    if (value > MAX_PARALLEL_INSTANCES_LIMIT) {
      warnings.push(
        `${name} ${value} is above ${MAX_PARALLEL_INSTANCES_LIMIT}; using ${MAX_PARALLEL_INSTANCES_LIMIT}.`,
      );
      return MAX_PARALLEL_INSTANCES_LIMIT;
    }
    return value;
  };
  const maxParallelInstances: Record<string, number> = {};
  const given = values.maxParallelInstances;
  if (given !== undefined && (typeof given !== 'object' || given === null || Array.isArray(given))) {
    warnings.push(
      'sw4rm.scheduler.maxParallelInstances is not an object of agent type → number; no per-type limit applies.',
    );
  } else if (given) {
    for (const [type, value] of Object.entries(given as Record<string, unknown>)) {
      if (!type.trim()) {
        warnings.push('sw4rm.scheduler.maxParallelInstances has an empty agent type; ignored.');
        continue;
      }
      const n = limit(`sw4rm.scheduler.maxParallelInstances["${type}"]`, value);
      // 0 is kept: that type has no limit, whatever the default says.
      if (n !== undefined) maxParallelInstances[type] = n;
    }
  }
  const defaultMaxParallelInstances =
    values.defaultMaxParallelInstances === undefined
      ? DEFAULT_SCHEDULER_OPTIONS.defaultMaxParallelInstances
      : (limit('sw4rm.scheduler.defaultMaxParallelInstances', values.defaultMaxParallelInstances) ??
        DEFAULT_SCHEDULER_OPTIONS.defaultMaxParallelInstances);
  let conflictThreshold = DEFAULT_SCHEDULER_OPTIONS.conflictThreshold;
  if (values.conflictThreshold !== undefined) {
    const t = values.conflictThreshold;
    if (typeof t !== 'number' || !Number.isFinite(t))
      warnings.push(`sw4rm.scheduler.conflictThreshold is not a number; using ${conflictThreshold}.`);
    else {
      conflictThreshold = Math.min(1, Math.max(0, t));
      if (conflictThreshold !== t)
        warnings.push(`sw4rm.scheduler.conflictThreshold ${t} is outside 0–1; using ${conflictThreshold}.`);
    }
  }
  let unavailableEngine = DEFAULT_SCHEDULER_OPTIONS.unavailableEngine;
  if (values.onUnavailableEngine === 'serialise' || values.onUnavailableEngine === 'escalate')
    unavailableEngine = values.onUnavailableEngine;
  else if (values.onUnavailableEngine !== undefined)
    warnings.push(`sw4rm.scheduler.onUnavailableEngine must be serialise or escalate; using ${unavailableEngine}.`);
  return { maxParallelInstances, defaultMaxParallelInstances, conflictThreshold, unavailableEngine, warnings };
}

/** The scheduler's options from the settings (the host starts with them). */
export function schedulerOptionsOf(settings: SchedulerSettings): Partial<SchedulerOptions> {
  return {
    maxParallelInstances: settings.maxParallelInstances,
    defaultMaxParallelInstances: settings.defaultMaxParallelInstances,
    conflictThreshold: settings.conflictThreshold,
    unavailableEngine: settings.unavailableEngine,
  };
}

/** Whether two readings of the limits differ (a live change goes to the running coordinator through setMaxParallelInstances). */
export function limitsChanged(a: SchedulerSettings, b: SchedulerSettings): boolean {
  if (a.defaultMaxParallelInstances !== b.defaultMaxParallelInstances) return true;
  const ka = Object.keys(a.maxParallelInstances).sort();
  const kb = Object.keys(b.maxParallelInstances).sort();
  return (
    ka.length !== kb.length || ka.some((k, i) => k !== kb[i] || a.maxParallelInstances[k] !== b.maxParallelInstances[k])
  );
}

/** What SchedulerLimits needs of the API (the whole CoordinatorApi in the editor). */
export interface LimitsTarget {
  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number, by: string): Promise<void>;
}

/**
 * Keeps the running coordinator's max_parallel_instances equal to the settings (no restart needed): once when it is
 * bound (a change while the host started found no API to give it to), then whenever the limits change. No `vscode`:
 * `read` reads the settings.
 */
export class SchedulerLimits {
  private api: LimitsTarget | undefined;
  private applied: SchedulerSettings | undefined;

  constructor(
    private readonly read: () => SchedulerSettings,
    private readonly by: string,
    private readonly report: (problem: string) => void,
  ) {}

  /**
   * `api` started with the settings read when its host started; they may have changed since (during the start-up no
   * API took the change), so it is given the limits of now once.
   */
  async bind(api: LimitsTarget | undefined): Promise<void> {
    this.api = api;
    this.applied = undefined;
    if (api) await this.settingsChanged();
  }

  /** The settings changed: the limits go to the coordinator if they differ from what it was last given. */
  async settingsChanged(): Promise<void> {
    const api = this.api;
    if (!api) return;
    const settings = this.read();
    if (this.applied && !limitsChanged(this.applied, settings)) return;
    this.applied = settings;
    try {
      await api.setMaxParallelInstances(settings.maxParallelInstances, settings.defaultMaxParallelInstances, this.by);
    } catch (err) {
      this.applied = undefined;
      this.report(
        `the max_parallel_instances limits were not applied: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
}
