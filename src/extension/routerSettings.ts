import {
  DEFAULT_LANE_OPTIONS, DEFAULT_ROUTER_OPTIONS, MAX_MESSAGE_RETENTION_HOURS, MESSAGE_TYPES, MIB, PAYLOAD_LIMITS, type RouterOptions,
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
  const whole = (name: string, value: unknown, fallback: number, max: number): number => {
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      if (value !== undefined) warnings.push(`sw4rm.${name} is not a number; using ${fallback}.`);
      return fallback;
    }
    const clamped = Math.min(max, Math.max(1, Math.floor(value)));
    if (clamped !== value) warnings.push(`sw4rm.${name} ${value} is outside 1–${max}; using ${clamped}.`);
    return clamped;
  };
  const capacity = whole('inboxCapacity', values.inboxCapacity, DEFAULT_ROUTER_OPTIONS.capacity, MAX_INBOX_CAPACITY);
  const dedupSeconds = whole('deduplicationWindowSeconds', values.deduplicationWindowSeconds,
    DEFAULT_ROUTER_OPTIONS.dedupWindowMs / 1000, MAX_DEDUP_WINDOW_SECONDS);
  const retentionHours = whole('messageRetentionHours', values.messageRetentionHours,
    DEFAULT_ROUTER_OPTIONS.messageRetentionMs / 3_600_000, MAX_MESSAGE_RETENTION_HOURS);
  let rate = DEFAULT_LANE_OPTIONS.privilegedRatePerSecond;
  const rawRate = values.privilegedRatePerSecond;
  if (typeof rawRate === 'number' && Number.isFinite(rawRate) && rawRate > 0) {
    rate = Math.min(MAX_PRIVILEGED_RATE, rawRate);
    if (rate !== rawRate) warnings.push(`sw4rm.privilegedRatePerSecond ${rawRate} is above ${MAX_PRIVILEGED_RATE}; using ${rate}.`);
  } else if (rawRate !== undefined) {
    warnings.push(`sw4rm.privilegedRatePerSecond must be a positive number; using ${rate}.`);
  }
  let unaddressed = DEFAULT_ROUTER_OPTIONS.unaddressed;
  const rawUnaddressed = values.unaddressedMessages;
  if ((UNADDRESSED as readonly unknown[]).includes(rawUnaddressed)) unaddressed = rawUnaddressed as RouterOptions['unaddressed'];
  else if (rawUnaddressed !== undefined) warnings.push(`sw4rm.unaddressedMessages must be one of ${UNADDRESSED.join(', ')}; using ${unaddressed}.`);
  return {
    options: {
      capacity,
      dedupWindowMs: dedupSeconds * 1000,
      messageRetentionMs: retentionHours * 3_600_000,
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
