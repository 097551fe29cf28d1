import {
  DEFAULT_LANE_OPTIONS,
  DEFAULT_ROUTER_OPTIONS,
  MAX_MEMORY_BUDGET_MIB,
  MAX_MESSAGE_RETENTION_HOURS,
  MAX_STORE_BUDGET_MIB,
  MESSAGE_TYPES,
  MIB,
  MIN_MEMORY_BUDGET_MIB,
  MIN_STORE_BUDGET_MIB,
  PAYLOAD_LIMITS,
  type RouterOptions,
} from '../core/api';

/** The largest payload limit a setting may ask for: what the gRPC transport admits (16 MiB). */
export const MAX_PAYLOAD_LIMIT_BYTES = 16 * MIB;
/** Bounds shared with the headless CLI (`--capacity`, `--dedup-window`). */
export const MAX_INBOX_CAPACITY = 1_000_000;
export const MAX_DEDUP_WINDOW_SECONDS = 30 * 86_400;
export const MAX_PRIVILEGED_RATE = 1_000_000;

/** The router settings as the user wrote them (any JSON value may arrive from settings.json). */
export interface RouterSettingValues {
  readonly inboxCapacity: unknown;
  readonly deduplicationWindowSeconds: unknown;
  readonly messageRetentionHours: unknown;
  /** sw4rm.storeBudgetMiB: the store's disk budget; admission refuses beyond it (BUFFER_FULL). */
  readonly storeBudgetMiB?: unknown;
  /** sw4rm.memoryBudgetMiB: the coordinator's memory budget; admission refuses beyond it (BUFFER_FULL). */
  readonly memoryBudgetMiB?: unknown;
  readonly privilegedRatePerSecond: unknown;
  readonly payloadLimits: unknown;
  /** sw4rm.unaddressedMessages: `refuse` (NO_ROUTE, the default) or `fanout`. */
  readonly unaddressedMessages?: unknown;
}

const UNADDRESSED: ReadonlyArray<RouterOptions['unaddressed']> = ['refuse', 'fanout'];

export interface RouterSettings {
  readonly options: Partial<RouterOptions>;
  /** What was ignored or capped, one sentence each, for the Output channel. */
  readonly warnings: readonly string[];
}

/**
 * Turns the sw4rm.* router settings into router options. Out-of-range numbers are clamped and named in
 * `warnings`; payload limits are merged over the RFC table, unknown message types are ignored and values
 * above 16 MiB are capped.
 */
export function routerSettings(values: RouterSettingValues): RouterSettings {
  const warnings: string[] = [];
  const whole = (name: string, value: unknown, fallback: number, max: number, min = 1): number => {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      if (value !== undefined) warnings.push(`sw4rm.${name} is not a number; using ${fallback}.`);
      return fallback;
    }
    const clamped = Math.min(max, Math.max(min, Math.floor(value)));
    if (clamped !== value) warnings.push(`sw4rm.${name} ${value} is outside ${min}–${max}; using ${clamped}.`);
    return clamped;
  };
  const capacity = whole('inboxCapacity', values.inboxCapacity, DEFAULT_ROUTER_OPTIONS.capacity, MAX_INBOX_CAPACITY);
  const dedupSeconds = whole(
    'deduplicationWindowSeconds',
    values.deduplicationWindowSeconds,
    DEFAULT_ROUTER_OPTIONS.dedupWindowMs / 1000,
    MAX_DEDUP_WINDOW_SECONDS,
  );
  const retentionHours = whole(
    'messageRetentionHours',
    values.messageRetentionHours,
    DEFAULT_ROUTER_OPTIONS.messageRetentionMs / 3_600_000,
    MAX_MESSAGE_RETENTION_HOURS,
  );
  const storeBudgetMiB = whole(
    'storeBudgetMiB',
    values.storeBudgetMiB,
    DEFAULT_ROUTER_OPTIONS.storeBudgetBytes / MIB,
    MAX_STORE_BUDGET_MIB,
    MIN_STORE_BUDGET_MIB,
  );
  const memoryBudgetMiB = whole(
    'memoryBudgetMiB',
    values.memoryBudgetMiB,
    DEFAULT_ROUTER_OPTIONS.memoryBudgetBytes / MIB,
    MAX_MEMORY_BUDGET_MIB,
    MIN_MEMORY_BUDGET_MIB,
  );
  let rate = DEFAULT_LANE_OPTIONS.privilegedRatePerSecond;
  const rawRate = values.privilegedRatePerSecond;
  if (typeof rawRate === 'number' && Number.isFinite(rawRate) && rawRate > 0) {
    rate = Math.min(MAX_PRIVILEGED_RATE, rawRate);
    if (rate !== rawRate)
      warnings.push(`sw4rm.privilegedRatePerSecond ${rawRate} is above ${MAX_PRIVILEGED_RATE}; using ${rate}.`);
  } else if (rawRate !== undefined) {
    warnings.push(`sw4rm.privilegedRatePerSecond must be a positive number; using ${rate}.`);
  }
  let unaddressed = DEFAULT_ROUTER_OPTIONS.unaddressed;
  const rawUnaddressed = values.unaddressedMessages;
  if ((UNADDRESSED as readonly unknown[]).includes(rawUnaddressed))
    unaddressed = rawUnaddressed as RouterOptions['unaddressed'];
  else if (rawUnaddressed !== undefined)
    warnings.push(`sw4rm.unaddressedMessages must be one of ${UNADDRESSED.join(', ')}; using ${unaddressed}.`);
  return {
    options: {
      capacity,
      dedupWindowMs: dedupSeconds * 1000,
      messageRetentionMs: retentionHours * 3_600_000,
      storeBudgetBytes: storeBudgetMiB * MIB,
      memoryBudgetBytes: memoryBudgetMiB * MIB,
      lanes: { ...DEFAULT_LANE_OPTIONS, privilegedRatePerSecond: rate },
      payloadLimits: mergePayloadLimits(values.payloadLimits, warnings),
      unaddressed,
    },
    warnings,
  };
}

/** `configured` (message type → bytes) over the RFC table (src/core/limits.ts); `{}` is the RFC table itself. */
export function mergePayloadLimits(configured: unknown, warnings: string[] = []): Readonly<Record<string, number>> {
  const limits: Record<string, number> = { ...PAYLOAD_LIMITS };
  if (configured === undefined || configured === null) return limits;
  if (typeof configured !== 'object' || Array.isArray(configured)) {
    warnings.push('sw4rm.payloadLimits must be an object of message type → bytes; using the RFC limits.');
    return limits;
  }
  for (const [type, bytes] of Object.entries(configured as Record<string, unknown>)) {
    if (!(MESSAGE_TYPES as readonly string[]).includes(type)) {
      warnings.push(`sw4rm.payloadLimits: '${type}' is not a message type (${MESSAGE_TYPES.join(', ')}); ignored.`);
      continue;
    }
    if (typeof bytes !== 'number' || !Number.isFinite(bytes) || bytes < 1) {
      warnings.push(`sw4rm.payloadLimits.${type} must be a number of bytes from 1; ignored.`);
      continue;
    }
    const capped = Math.min(MAX_PAYLOAD_LIMIT_BYTES, Math.floor(bytes));
    if (capped !== bytes) warnings.push(`sw4rm.payloadLimits.${type} ${bytes} is capped at ${capped} bytes.`);
    limits[type] = capped;
  }
  return limits;
}

/** The share of the store's disk budget at which the status bar warns. */
export const STORE_WARNING_SHARE = 0.8;

/**
 * The status bar's store warning: text (`store 82%`) and tooltip line, once the store holds STORE_WARNING_SHARE
 * of its disk budget; undefined below. Pure, for tests.
 */
export function storeWarning(
  store: { readonly bytes: number; readonly budget: number } | undefined,
): { text: string; tooltip: string } | undefined {
  if (!store || !(store.budget > 0) || store.bytes < store.budget * STORE_WARNING_SHARE) return undefined;
  const percent = Math.floor((store.bytes / store.budget) * 100);
  return {
    text: `store ${percent}%`,
    tooltip:
      `Store at ${percent}% of its disk budget: ${mebibytes(store.bytes)} of ${mebibytes(store.budget)} (sw4rm.storeBudgetMiB); ` +
      'over the budget, messages are refused with BUFFER_FULL',
  };
}

function mebibytes(bytes: number): string {
  return `${(bytes / MIB).toFixed(1)} MiB`;
}
