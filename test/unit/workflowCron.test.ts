import { strict as assert } from 'node:assert';
import { nextFireAfter, scheduleError, SCHEDULE_LIMITS } from '../../src/core/workflow/cron';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

describe('workflow SCHEDULE triggers: 5-field cron in UTC (cron-parser)', () => {
  it('accepts 5-field expressions and the named schedules', () => {
    for (const ok of [
      '* * * * *',
      '*/15 * * * *',
      '0 9 * * 1-5',
      '30 2 1 * *',
      '0 0 * * MON',
      '0 12 * JAN,JUL *',
      '0 0 L * *',
      '0 0 * * 1#2',
      '@daily',
      '@hourly',
      '@weekly',
      '@monthly',
      '@yearly',
      '@annually',
      '@weekdays',
      '@weekends',
      '  5 4 * * *  ',
      '0 0 * * THU',
    ]) {
      assert.equal(scheduleError(ok), undefined, ok);
    }
  });

  it('refuses what is not a 5-field schedule, saying why', () => {
    assert.match(scheduleError('')!, /schedule is empty/);
    assert.match(scheduleError('* * * * * *')!, /6 fields: seconds are not supported/);
    assert.match(scheduleError('* * *')!, /3 fields; give 5/);
    assert.match(scheduleError('0 0 1 1 * 2030')!, /6 fields/);
    assert.match(
      scheduleError('61 * * * *')!,
      /not a valid cron expression: Constraint error, got value 61 expected range 0-59/,
    );
    assert.match(scheduleError('0 0 30 2 *')!, /not a valid cron expression/);
    assert.match(scheduleError('H * * * *')!, /H \(hashed values\)/);
    assert.match(scheduleError('@secondly')!, /is not one of @yearly/);
    assert.match(scheduleError('@minutely')!, /is not one of/);
    assert.match(scheduleError('a b c d e')!, /not a valid cron expression/);
    assert.match(scheduleError(`${'1,'.repeat(SCHEDULE_LIMITS.maxChars)}1 * * * *`)!, /longer than 256 characters/);
  });

  it('next fire time: strictly after the given epoch, in UTC', () => {
    assert.equal(
      iso(nextFireAfter('*/15 * * * *', at('2026-01-01T00:00:00.000Z'))),
      '2026-01-01T00:15:00.000Z',
      'exactly at a fire time: the next one',
    );
    assert.equal(iso(nextFireAfter('*/15 * * * *', at('2026-01-01T00:14:59.999Z'))), '2026-01-01T00:15:00.000Z');
    assert.equal(iso(nextFireAfter('*/15 * * * *', at('2026-01-01T00:15:00.001Z'))), '2026-01-01T00:30:00.000Z');
    assert.equal(iso(nextFireAfter('* * * * *', at('2026-01-01T23:59:30.000Z'))), '2026-01-02T00:00:00.000Z');
    // 2026-01-02 is a Friday: the next weekday 09:00 is Monday the 5th.
    assert.equal(iso(nextFireAfter('0 9 * * 1-5', at('2026-01-02T10:00:00.000Z'))), '2026-01-05T09:00:00.000Z');
    assert.equal(iso(nextFireAfter('0 9 * * 1-5', at('2026-01-02T08:59:59.000Z'))), '2026-01-02T09:00:00.000Z');
    assert.equal(iso(nextFireAfter('@daily', at('2026-03-10T12:00:00.000Z'))), '2026-03-11T00:00:00.000Z');
    assert.equal(
      iso(nextFireAfter('0 0 29 2 *', at('2026-03-01T00:00:00.000Z'))),
      '2028-02-29T00:00:00.000Z',
      'the next leap day',
    );
    assert.equal(iso(nextFireAfter('0 0 L * *', at('2026-02-01T00:00:00.000Z'))), '2026-02-28T00:00:00.000Z');
    // Both day fields restricted: either matches (13th or a Friday). 2026-02-06 is a Friday, before the 13th.
    assert.equal(iso(nextFireAfter('0 9 13 * 5', at('2026-02-01T00:00:00.000Z'))), '2026-02-06T09:00:00.000Z');
    // No daylight saving: UTC throughout (Europe moves its clocks on 2026-03-29).
    assert.equal(iso(nextFireAfter('30 1 * * *', at('2026-03-29T00:00:00.000Z'))), '2026-03-29T01:30:00.000Z');
  });

  it('a chain of fire times: each strictly after the previous one', () => {
    let t = at('2026-01-01T00:00:00.000Z');
    const times: string[] = [];
    for (let i = 0; i < 4; i++) {
      t = nextFireAfter('0 */6 * * *', t);
      times.push(iso(t));
    }
    assert.deepEqual(times, [
      '2026-01-01T06:00:00.000Z',
      '2026-01-01T12:00:00.000Z',
      '2026-01-01T18:00:00.000Z',
      '2026-01-02T00:00:00.000Z',
    ]);
  });

  it('throws for a refused expression or a time that is not one', () => {
    assert.throws(() => nextFireAfter('* * * * * *', 0), /seconds are not supported/);
    assert.throws(() => nextFireAfter('* * * * *', Number.NaN), /not a time/);
  });
});
