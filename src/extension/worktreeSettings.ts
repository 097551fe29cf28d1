import {
  DEFAULT_SETUP_TIMEOUT_SECONDS,
  DEFAULT_SNAPSHOT_RETENTION_DAYS,
  MAX_SETUP_TIMEOUT_SECONDS,
  MAX_SNAPSHOT_RETENTION_DAYS,
  MIN_SNAPSHOT_RETENTION_DAYS,
  settingsSetupConfig,
  type WorktreeSetupConfig,
} from '../core/api';

/** The worktree settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface WorktreeSettingValues {
  readonly folder?: unknown;
  readonly setupCopy?: unknown;
  readonly setupCommand?: unknown;
  readonly setupTimeoutSeconds?: unknown;
  readonly snapshotRetentionDays?: unknown;
}

export interface WorktreeSettings {
  /** Where agent worktrees go ('' = the sibling folder `<repo>.sw4rm-worktrees` of each repository). */
  readonly folder: string;
  /** The setup configuration that replaces each repository's `.sw4rm/worktree.json`; undefined: the file applies. */
  readonly setup: WorktreeSetupConfig | undefined;
  readonly snapshotRetentionDays: number;
  readonly warnings: readonly string[];
}

/**
 * Turns sw4rm.worktrees.* into the host's worktree options (README, "Worktrees"). A value of the wrong type or out of
 * range falls back to the default (or is clamped); a setup configuration that cannot be read is ignored. Each is named in
 * `warnings` (the Output channel).
 */
export function worktreeSettings(values: WorktreeSettingValues): WorktreeSettings {
  const warnings: string[] = [];
  const folder = typeof values.folder === 'string' ? values.folder.trim() : '';
  if (values.folder !== undefined && typeof values.folder !== 'string')
    warnings.push('sw4rm.worktrees.folder is not text; using the sibling folder <repo>.sw4rm-worktrees.');
  const whole = (name: string, value: unknown, fallback: number, min: number, max: number): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      warnings.push(`sw4rm.worktrees.${name} is not a number; using ${fallback}.`);
      return fallback;
    }
    const clamped = Math.min(max, Math.max(min, Math.floor(value)));
    if (clamped !== value)
      warnings.push(`sw4rm.worktrees.${name} ${value} is outside ${min}–${max}; using ${clamped}.`);
    return clamped;
  };
  const snapshotRetentionDays = whole(
    'snapshotRetentionDays',
    values.snapshotRetentionDays,
    DEFAULT_SNAPSHOT_RETENTION_DAYS,
    MIN_SNAPSHOT_RETENTION_DAYS,
    MAX_SNAPSHOT_RETENTION_DAYS,
  );
  const timeout = whole(
    'setupTimeoutSeconds',
    values.setupTimeoutSeconds,
    DEFAULT_SETUP_TIMEOUT_SECONDS,
    1,
    MAX_SETUP_TIMEOUT_SECONDS,
  );
  let copy: string[] = [];
  if (Array.isArray(values.setupCopy) && values.setupCopy.every((g) => typeof g === 'string'))
    copy = values.setupCopy as string[];
  else if (values.setupCopy !== undefined)
    warnings.push('sw4rm.worktrees.setupCopy is not a list of globs; no files are copied by the settings.');
  const command = typeof values.setupCommand === 'string' ? values.setupCommand : '';
  let setup: WorktreeSetupConfig | undefined;
  try {
    setup = settingsSetupConfig(copy, command, timeout);
  } catch (err) {
    warnings.push(
      `sw4rm.worktrees.setupCopy / setupCommand: ${(err as Error).message}; each repository's .sw4rm/worktree.json applies instead.`,
    );
  }
  return { folder, setup, snapshotRetentionDays, warnings };
}
