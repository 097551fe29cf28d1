/**
 * SCHEDULE triggers (node metadata `schedule`), read by cron-parser, always in UTC.
 *
 * An expression has exactly five fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day
 * of week (0-7 or SUN-SAT; 0 and 7 are Sunday), each `*`, a value, a range `a-b`, a list `a,b`, or a step (`*` or a range
 * followed by `/n`); `L` (last day of the month, or `5L`: the last Friday) and `#` (`1#2`: the second Monday) as
 * cron-parser reads them. The named schedules @yearly, @annually, @monthly, @weekly, @daily, @hourly, @weekdays and
 * @weekends are accepted. Refused: a sixth field (seconds: a node is never scheduled more often than once a minute),
 * @minutely and @secondly (write `* * * * *`), cron-parser's `H` (hashed values, which depend on a seed), and
 * expressions that can never fire (`0 0 30 2 *`).
 * When both day fields are restricted, a day matching either runs (classic cron: `0 9 13 * 5` is every 13th and every
 * Friday).
 */
import { CronExpressionParser } from 'cron-parser';

export const SCHEDULE_LIMITS = {
  /** The most characters of a `schedule` expression. */
  maxChars: 256,
} as const;

const NAMED = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@hourly', '@weekdays', '@weekends']);

function parse(expression: string, afterEpochMs: number) {
  return CronExpressionParser.parse(expression.trim(), { currentDate: new Date(afterEpochMs), tz: 'UTC', strict: false });
}

/** Verdicts of recent expressions: a workflow repeats its schedules, and cron-parser takes tens of µs per parse. */
const verdicts = new Map<string, string | undefined>();
const MAX_VERDICTS = 1_000;

/** Why `expression` is not an accepted schedule, or undefined. */
export function scheduleError(expression: string): string | undefined {
  if (typeof expression === 'string' && verdicts.has(expression)) return verdicts.get(expression);
  const verdict = check(expression);
  if (typeof expression === 'string' && expression.length <= SCHEDULE_LIMITS.maxChars) {
    if (verdicts.size >= MAX_VERDICTS) verdicts.clear();
    verdicts.set(expression, verdict);
  }
  return verdict;
}

function check(expression: string): string | undefined {
  if (typeof expression !== 'string' || expression.trim() === '') return 'schedule is empty: give a 5-field cron expression (minute hour day-of-month month day-of-week, UTC), e.g. "0 9 * * 1-5"';
  if (expression.length > SCHEDULE_LIMITS.maxChars) return `schedule is longer than ${SCHEDULE_LIMITS.maxChars} characters (${expression.length})`;
  const text = expression.trim();
  if (text.startsWith('@')) {
    if (!NAMED.has(text.toLowerCase())) return `schedule ${JSON.stringify(text.slice(0, 40))} is not one of ${[...NAMED].join(', ')}`;
  } else {
    const fields = text.split(/\s+/);
    if (fields.length === 6) return `schedule has 6 fields: seconds are not supported; give 5 fields (minute hour day-of-month month day-of-week, UTC)`;
    if (fields.length !== 5) return `schedule has ${fields.length} field${fields.length === 1 ? '' : 's'}; give 5 (minute hour day-of-month month day-of-week, UTC), e.g. "*/15 * * * *"`;
    if (/h/i.test(text.replace(/\b(?:THU|THURSDAY)\b/gi, ''))) return 'schedule uses H (hashed values), which is not supported; give the minute or hour itself';
  }
  try {
    parse(text, 0).next();
  } catch (err) {
    return `schedule ${JSON.stringify(text.slice(0, 80))} is not a valid cron expression: ${(err as Error).message}`;
  }
  return undefined;
}

/**
 * The first time the schedule fires strictly after `afterEpochMs` (epoch milliseconds, UTC). Throws when the expression
 * is not accepted (scheduleError says why) or fires no more.
 */
export function nextFireAfter(expression: string, afterEpochMs: number): number {
  const why = scheduleError(expression);
  if (why) throw new Error(why);
  if (!Number.isFinite(afterEpochMs)) throw new Error(`nextFireAfter: ${afterEpochMs} is not a time`);
  const next = parse(expression, afterEpochMs).next().getTime();
  // cron-parser answers the next whole matching minute after the given time; keep "strictly after" explicit.
  if (!(next > afterEpochMs)) throw new Error(`schedule ${JSON.stringify(expression)} answered ${next}, not after ${afterEpochMs}`);
  return next;
}
