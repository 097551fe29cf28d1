import type { DeadLetter, DeadLetterFilter } from '../core/api';

/** Relative time ranges: resolved against the clock whenever the view lists or exports. */
export type TimeRange = 'hour' | 'day' | 'all';

export const TIME_RANGES: ReadonlyArray<{
  readonly range: TimeRange;
  readonly label: string;
  readonly ms: number | undefined;
}> = [
  { range: 'hour', label: 'Last hour', ms: 3_600_000 },
  { range: 'day', label: 'Last day', ms: 86_400_000 },
  { range: 'all', label: 'All time', ms: undefined },
];

/** What the operator chose in "Filter Dead Letters" (RFC §21.1: time range, error class, route, producer). */
export interface DeadLetterViewFilter {
  readonly errorCode?: string;
  readonly producerId?: string;
  readonly recipientId?: string;
  readonly timeRange: TimeRange;
  /** Requeued entries are hidden unless asked for. */
  readonly includeRequeued: boolean;
}

export const NO_FILTER: DeadLetterViewFilter = { timeRange: 'all', includeRequeued: false };

export function isFiltered(filter: DeadLetterViewFilter): boolean {
  return describeFilter(filter) !== undefined;
}

/** The router's filter for `filter` at time `now`. */
export function coreFilter(filter: DeadLetterViewFilter, now: number, limit?: number): DeadLetterFilter {
  const range = TIME_RANGES.find((r) => r.range === filter.timeRange)?.ms;
  return {
    ...(filter.errorCode ? { errorCode: filter.errorCode } : {}),
    ...(filter.producerId ? { producerId: filter.producerId } : {}),
    ...(filter.recipientId ? { recipientId: filter.recipientId } : {}),
    ...(range !== undefined ? { since: now - range } : {}),
    includeRequeued: filter.includeRequeued,
    ...(limit !== undefined ? { limit } : {}),
  };
}

/** A short text for the view's description, e.g. "AGENT_UNAVAILABLE · from a · to b · last hour"; undefined without a filter. */
export function describeFilter(filter: DeadLetterViewFilter): string | undefined {
  const parts: string[] = [];
  if (filter.errorCode) parts.push(filter.errorCode);
  if (filter.producerId) parts.push(`from ${filter.producerId}`);
  if (filter.recipientId) parts.push(`to ${filter.recipientId}`);
  if (filter.timeRange !== 'all')
    parts.push(TIME_RANGES.find((r) => r.range === filter.timeRange)!.label.toLowerCase());
  if (filter.includeRequeued) parts.push('with requeued');
  return parts.length ? parts.join(' · ') : undefined;
}

/** Distinct values of one field among `letters`, most frequent first, with their counts. */
export function valueCounts(
  letters: readonly DeadLetter[],
  pick: (letter: DeadLetter) => string,
): Array<{ value: string; count: number }> {
  const counts = new Map<string, number>();
  for (const letter of letters) counts.set(pick(letter), (counts.get(pick(letter)) ?? 0) + 1);
  return [...counts]
    .map(([value, count]) => ({ value, count }))
    .sort((a, b) => b.count - a.count || a.value.localeCompare(b.value));
}

/** `letters` narrowed by the parts of `filter` that are set (the time range against `now`). */
export function matches(letter: DeadLetter, filter: Partial<DeadLetterViewFilter>, now: number): boolean {
  if (filter.errorCode && letter.errorCode !== filter.errorCode) return false;
  if (filter.producerId && letter.producerId !== filter.producerId) return false;
  if (filter.recipientId && letter.recipientId !== filter.recipientId) return false;
  if (filter.includeRequeued === false && letter.requeuedAt !== null) return false;
  const range = TIME_RANGES.find((r) => r.range === filter.timeRange)?.ms;
  if (range !== undefined && letter.failedAt < now - range) return false;
  return true;
}

/** A file name for an exported bundle: sw4rm-dead-letters-2025-01-02T03-04-05Z.json. */
export function exportFileName(now: number): string {
  return `sw4rm-dead-letters-${new Date(now)
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/:/g, '-')}.json`;
}
