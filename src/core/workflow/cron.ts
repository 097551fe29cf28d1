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
 *
 * cron-parser reads the expression (its syntax and checks); the fire times are computed here, from the fields it
 * read, by the same rules: cron-parser's own search steps through the calendar with Luxon dates and took up to 25 ms
 * for one expression (`0 0 * 2 1#5`, the fifth Monday of a February: every 28 years), so 500 nodes of a workflow were
 * seconds of one turn (issue 30, item 1). Here a month is one look-up of which of its days match (the answer depends
 * only on the month's length and its first weekday: 28 cases per expression), so the next fire is found in at most
 * 4,800 months (the Gregorian calendar repeats every 400 years: an expression that fires in none of them never fires).
 */
import { CronExpressionParser } from 'cron-parser';

export const SCHEDULE_LIMITS = {
  /** The most characters of a `schedule` expression. */
  maxChars: 256,
} as const;

const NAMED = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@hourly', '@weekdays', '@weekends']);

/** What cron-parser read of an expression, as the fire-time search here needs it. */
interface Fields {
  readonly minutes: readonly boolean[];
  readonly hours: readonly boolean[];
  readonly months: readonly boolean[]; // 1-12
  readonly dom: ReadonlySet<number>;
  readonly domLast: boolean;
  readonly domWildcard: boolean;
  readonly dow: ReadonlySet<number>;
  /** The weekdays of `nL` (the last n-day of the month): cron-parser takes the first character of each value. */
  readonly dowLast: readonly number[] | undefined;
  readonly nth: number;
  readonly dowWildcard: boolean;
  /** Which days of a month match, by (length − 28) × 7 + first weekday: a bit per day (bit 0: the 1st). */
  readonly masks: Array<number | undefined>;
}

function read(expression: string): Fields {
  // Only the fields are read (the fire times are computed here, in UTC): cron-parser resolves no time zone.
  const f = CronExpressionParser.parse(expression.trim(), { currentDate: new Date(0), strict: false }).fields;
  const flags = (values: readonly unknown[], size: number) => {
    const out = new Array<boolean>(size).fill(false);
    for (const v of values) if (typeof v === 'number' && v >= 0 && v < size) out[v] = true;
    return out;
  };
  const dowValues = f.dayOfWeek.values as readonly unknown[];
  return {
    minutes: flags(f.minute.values, 60),
    hours: flags(f.hour.values, 24),
    months: flags(f.month.values, 13),
    dom: new Set((f.dayOfMonth.values as readonly unknown[]).filter((v): v is number => typeof v === 'number')),
    domLast: f.dayOfMonth.hasLastChar,
    domWildcard: f.dayOfMonth.isWildcard,
    dow: new Set(dowValues.filter((v): v is number => typeof v === 'number')),
    dowLast: f.dayOfWeek.hasLastChar ? dowValues.map((v) => parseInt(String(v).charAt(0), 10) % 7) : undefined,
    nth: f.dayOfWeek.nthDay,
    dowWildcard: f.dayOfWeek.isWildcard,
    masks: new Array<number | undefined>(28).fill(undefined),
  };
}

/** cron-parser's day rule (CronExpression#matchDayOfMonth), for day `d` of a month of `length` days, on `weekday`. */
function dayMatches(f: Fields, d: number, length: number, weekday: number): boolean {
  const matchedDom = f.dom.has(d) || (f.domLast && d === length);
  const matchedDow =
    (f.dow.has(weekday) && (f.nth <= 0 || Math.ceil(d / 7) === f.nth)) ||
    (f.dowLast !== undefined && d > length - 7 && f.dowLast.includes(weekday));
  if (!f.domWildcard && !f.dowWildcard) return matchedDom || matchedDow;
  if (matchedDom && f.dowWildcard) return true;
  return f.domWildcard && !f.dowWildcard && matchedDow;
}

function dayMask(f: Fields, length: number, firstWeekday: number): number {
  const key = (length - 28) * 7 + firstWeekday;
  let mask = f.masks[key];
  if (mask === undefined) {
    mask = 0;
    for (let d = 1; d <= length; d++) if (dayMatches(f, d, length, (firstWeekday + d - 1) % 7)) mask |= 1 << (d - 1);
    f.masks[key] = mask;
  }
  return mask;
}

const MINUTE_MS = 60_000;
/** 400 years of months: the Gregorian calendar's cycle. */
const MAX_MONTHS = 4_800;

/** The first fire time strictly after `afterEpochMs`, or undefined when there is none in 400 years (so never). */
function nextFire(f: Fields, afterEpochMs: number): number | undefined {
  const start = Math.floor(afterEpochMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const first = new Date(start);
  let year = first.getUTCFullYear();
  let month = first.getUTCMonth() + 1;
  let day = first.getUTCDate();
  let minuteOfDay = first.getUTCHours() * 60 + first.getUTCMinutes();
  for (let step = 0; step <= MAX_MONTHS; step++) {
    if (f.months[month]) {
      const length = new Date(Date.UTC(year, month, 0)).getUTCDate();
      const firstWeekday = new Date(Date.UTC(year, month - 1, 1)).getUTCDay();
      const mask = dayMask(f, length, firstWeekday);
      for (let d = day; d <= length; d++) {
        if ((mask & (1 << (d - 1))) === 0) {
          minuteOfDay = 0;
          continue;
        }
        for (let m = minuteOfDay; m < 1440; m++) {
          if (f.hours[Math.floor(m / 60)] && f.minutes[m % 60]) return Date.UTC(year, month - 1, d) + m * MINUTE_MS;
          if (!f.hours[Math.floor(m / 60)]) m = Math.floor(m / 60) * 60 + 59;
        }
        minuteOfDay = 0;
      }
    }
    month++;
    if (month > 12) {
      month = 1;
      year++;
    }
    day = 1;
    minuteOfDay = 0;
  }
  return undefined;
}

/** Verdicts (and the fields read) of recent expressions: a workflow repeats its schedules. */
const verdicts = new Map<string, { why: string | undefined; fields?: Fields }>();
const MAX_VERDICTS = 1_000;

function verdict(expression: string): { why: string | undefined; fields?: Fields } {
  const known = typeof expression === 'string' ? verdicts.get(expression) : undefined;
  if (known) return known;
  const answer = check(expression);
  if (typeof expression === 'string' && expression.length <= SCHEDULE_LIMITS.maxChars) {
    // The oldest goes first (a Map keeps insertion order): a workflow's schedules read at its create are still here
    // when it starts, however many came before.
    if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
    verdicts.set(expression, answer);
  }
  return answer;
}

/** Why `expression` is not an accepted schedule, or undefined. */
export function scheduleError(expression: string): string | undefined {
  return verdict(expression).why;
}

function check(expression: string): { why: string | undefined; fields?: Fields } {
  const why = syntaxError(expression);
  if (why) return { why };
  const text = expression.trim();
  let fields: Fields;
  try {
    fields = read(text);
  } catch (err) {
    return {
      why: `schedule ${JSON.stringify(text.slice(0, 80))} is not a valid cron expression: ${(err as Error).message}`,
    };
  }
  if (nextFire(fields, 0) === undefined)
    return { why: `schedule ${JSON.stringify(text.slice(0, 80))} is not a valid cron expression: it never fires` };
  return { why: undefined, fields };
}

function syntaxError(expression: string): string | undefined {
  if (typeof expression !== 'string' || expression.trim() === '')
    return 'schedule is empty: give a 5-field cron expression (minute hour day-of-month month day-of-week, UTC), e.g. "0 9 * * 1-5"';
  if (expression.length > SCHEDULE_LIMITS.maxChars)
    return `schedule is longer than ${SCHEDULE_LIMITS.maxChars} characters (${expression.length})`;
  const text = expression.trim();
  if (text.startsWith('@')) {
    if (!NAMED.has(text.toLowerCase()))
      return `schedule ${JSON.stringify(text.slice(0, 40))} is not one of ${[...NAMED].join(', ')}`;
  } else {
    const fields = text.split(/\s+/);
    if (fields.length === 6)
      return `schedule has 6 fields: seconds are not supported; give 5 fields (minute hour day-of-month month day-of-week, UTC)`;
    if (fields.length !== 5)
      return `schedule has ${fields.length} field${fields.length === 1 ? '' : 's'}; give 5 (minute hour day-of-month month day-of-week, UTC), e.g. "*/15 * * * *"`;
    if (/h/i.test(text.replace(/\b(?:THU|THURSDAY)\b/gi, '')))
      return 'schedule uses H (hashed values), which is not supported; give the minute or hour itself';
  }
  return undefined;
}

/**
 * The first time the schedule fires strictly after `afterEpochMs` (epoch milliseconds, UTC). Throws when the expression
 * is not accepted (scheduleError says why) or fires no more.
 */
export function nextFireAfter(expression: string, afterEpochMs: number): number {
  const { why, fields } = verdict(expression);
  if (why !== undefined || !fields) throw new Error(why ?? `schedule ${JSON.stringify(expression)} is not accepted`);
  if (!Number.isFinite(afterEpochMs)) throw new Error(`nextFireAfter: ${afterEpochMs} is not a time`);
  const next = nextFire(fields, afterEpochMs);
  if (next === undefined)
    throw new Error(
      `schedule ${JSON.stringify(expression.trim().slice(0, 80))} fires no more after ${new Date(afterEpochMs).toISOString()}`,
    );
  return next;
}
