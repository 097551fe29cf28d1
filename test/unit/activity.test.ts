import { strict as assert } from 'node:assert';
import { isoUtc, type ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { EventLog } from '../../src/core/log/eventLog';
import { StoreFixture } from '../support/coordinatorFixture';
import {
  ActivityBuffer,
  ActivityEntryInvalidError,
  HISTORY_EVICTION_BATCH,
} from '../../src/core/activity/activityBuffer';
import { ARTIFACT_LIMITS } from '../../src/core/activity/activityBuffer';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../../src/core/limits';
import {
  ActivityBufferFullError,
  DEFAULT_ACTIVITY_OPTIONS,
  type ActivityChange,
  type ActivityEntry,
  type ActivityOptions,
  type Artifact,
} from '../../src/core/activity/model';

describe('Activity buffer (RFC §10, §10.1)', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;
  let buffer: ActivityBuffer;
  let changes: ActivityChange[];
  const ctx = { correlationId: 'corr-act' };

  function open(options: Partial<ActivityOptions> = {}): ActivityBuffer {
    const opened = new ActivityBuffer(store, log, clock, { ...DEFAULT_ACTIVITY_OPTIONS, ...options });
    opened.onDidChange((change) => changes.push(change));
    return opened;
  }

  function reopen(options: Partial<ActivityOptions> = {}): void {
    buffer.dispose();
    buffer = open(options);
  }

  const entry = (
    agentId: string,
    taskId: string,
    more: Partial<ActivityEntry> = {},
  ): Omit<ActivityEntry, 'endedAt' | 'outcome'> => ({
    agentId,
    taskId,
    repoId: 'app',
    worktreeId: agentId,
    branch: `sw4rm/${agentId}`,
    timestamp: clock.now(),
    description: `working on ${taskId}`,
    ...more,
  });

  const events = (eventType: string) => log.query({ eventType, limit: 100_000 });

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-activity-' });
    ({ store, clock, log } = fixture);
    changes = [];
    buffer = open();
  });

  afterEach(() => {
    buffer.dispose();
    fixture.dispose();
  });

  describe('entries', () => {
    it('begins and ends an entry: one event each, a live change each, the ended one in the history', () => {
      buffer.begin(entry('alpha', 't1'), ctx);
      assert.deepEqual(
        buffer.entries().map((e) => [e.agentId, e.taskId, e.endedAt, e.outcome]),
        [['alpha', 't1', null, '']],
      );
      assert.equal(events('activity.added').length, 1);
      assert.equal(changes.at(-1)?.kind, 'added');

      clock.advance(1_000);
      buffer.end('alpha', 't1', 'COMPLETED', ctx);
      assert.deepEqual(buffer.entries(), []);
      const [ended] = buffer.history();
      assert.deepEqual([ended.taskId, ended.outcome, ended.endedAt], ['t1', 'COMPLETED', clock.now()]);
      assert.equal(events('activity.ended').length, 1);
      assert.equal(changes.at(-1)?.kind, 'ended');
      buffer.end('alpha', 't1', 'COMPLETED', ctx);
      assert.equal(events('activity.ended').length, 1, 'ending an entry that is not active is a no-op');
    });

    it('filters by agent, repo, worktree and task; newest first', () => {
      buffer.begin(entry('alpha', 't1'), ctx);
      clock.advance(1);
      buffer.begin(entry('alpha', 't2', { repoId: 'lib' }), ctx);
      clock.advance(1);
      buffer.begin(entry('beta', 't3'), ctx);
      assert.deepEqual(
        buffer.entries().map((e) => e.taskId),
        ['t3', 't2', 't1'],
      );
      assert.deepEqual(
        buffer.entries({ agentId: 'alpha' }).map((e) => e.taskId),
        ['t2', 't1'],
      );
      assert.deepEqual(
        buffer.entries({ repoId: 'app' }).map((e) => e.taskId),
        ['t3', 't1'],
      );
      assert.deepEqual(
        buffer.entries({ worktreeId: 'beta' }).map((e) => e.taskId),
        ['t3'],
      );
      assert.deepEqual(
        buffer.entries({ taskId: 't2' }).map((e) => e.agentId),
        ['alpha'],
      );
      assert.deepEqual(
        buffer.entries({ agentId: 'alpha', repoId: 'app' }).map((e) => e.taskId),
        ['t1'],
      );
      buffer.end('alpha', 't1', 'FAILED', ctx);
      buffer.end('beta', 't3', 'COMPLETED', ctx);
      assert.deepEqual(
        buffer.history({ agentId: 'beta' }).map((e) => e.taskId),
        ['t3'],
      );
      assert.deepEqual(
        buffer.history({}, 1).map((e) => e.taskId),
        ['t3'],
      );
    });

    it('cuts a description past 200 words with "…" and says so in the event', () => {
      const long = Array.from({ length: 250 }, (_, i) => `w${i}`).join(' ');
      buffer.begin(entry('alpha', 't1', { description: long }), ctx);
      const [stored] = buffer.entries();
      assert.equal(stored.description.split(/\s+/).length, 200);
      assert.ok(stored.description.endsWith('w199…'));
      const [added] = events('activity.added');
      assert.deepEqual(added.details.description_cut, {
        words: 250,
        chars: long.length,
        limit_words: 200,
        limit_chars: 4096,
      });
      buffer.begin(entry('alpha', 't2', { description: 'short' }), ctx);
      assert.equal(events('activity.added')[1].details.description_cut, undefined);
    });

    it('refuses an entry whose ids are not acceptable (too long, control characters, empty task)', () => {
      assert.throws(() => buffer.begin(entry('alpha', 'x'.repeat(257)), ctx), ActivityEntryInvalidError);
      assert.throws(
        () => buffer.begin(entry('alpha', 't1', { repoId: 'a\u0000b' }), ctx),
        /VALIDATION_ERROR: repo_id contains control/,
      );
      assert.throws(() => buffer.begin(entry('alpha', ''), ctx), /task_id is empty/);
      assert.deepEqual(buffer.entries(), []);
    });

    it('a task begun again (after a preemption) replaces its entry and leaves the history', () => {
      buffer.begin(entry('alpha', 't1'), ctx);
      buffer.end('alpha', 't1', 'CANCELLED', ctx);
      buffer.begin(entry('alpha', 't1', { description: 'again' }), ctx);
      buffer.begin(entry('alpha', 't1', { description: 'and again' }), ctx);
      assert.deepEqual(
        buffer.entries().map((e) => e.description),
        ['and again'],
      );
      assert.deepEqual(buffer.history(), []);
      assert.equal(buffer.usage().active, 1);
    });
  });

  describe('limits (RFC §10.1)', () => {
    it('refuses beyond the per-agent limit with activity_buffer_full, logged; other agents still get entries', () => {
      reopen({ maxPerAgent: 3 });
      for (const t of ['t1', 't2', 't3']) buffer.begin(entry('alpha', t), ctx);
      assert.throws(
        () => buffer.begin(entry('alpha', 't4'), ctx),
        (err: unknown) =>
          err instanceof ActivityBufferFullError &&
          err.code === 'activity_buffer_full' &&
          err.scope === 'agent' &&
          err.limit === 3,
      );
      assert.equal(buffer.entries({ agentId: 'alpha' }).length, 3, 'nothing dropped, nothing added');
      const [refused] = events('activity.refused');
      assert.deepEqual(
        [refused.level, refused.details.error_code, refused.details.task_id],
        ['WARN', 'activity_buffer_full', 't4'],
      );
      buffer.begin(entry('beta', 't5'), ctx);
      buffer.end('alpha', 't1', 'COMPLETED', ctx);
      buffer.begin(entry('alpha', 't4'), ctx);
      assert.equal(buffer.entries({ agentId: 'alpha' }).length, 3);
    });

    it('refuses beyond the total limit with activity_buffer_full (scope coordinator)', () => {
      reopen({ maxEntries: 5, maxPerAgent: 100 });
      for (let i = 0; i < 5; i++) buffer.begin(entry(`a${i}`, 't'), ctx);
      assert.throws(
        () => buffer.begin(entry('late', 't'), ctx),
        (err: unknown) => err instanceof ActivityBufferFullError && err.scope === 'coordinator',
      );
      assert.equal(buffer.usage().active, 5);
      assert.equal(buffer.entries({ agentId: 'late' }).length, 0);
    });

    it('has the RFC defaults: 10,000 entries, 100 per agent', () => {
      assert.deepEqual([buffer.usage().maxEntries, buffer.usage().maxPerAgent], [10_000, 100]);
      for (let i = 0; i < 100; i++) buffer.begin(entry('alpha', `t${i}`), ctx);
      assert.throws(() => buffer.begin(entry('alpha', 't100'), ctx), ActivityBufferFullError);
    });

    it('warns at 80%: one WARN per crossing, usage().warning while above', () => {
      reopen({ maxEntries: 10 });
      for (let i = 0; i < 7; i++) buffer.begin(entry(`a${i}`, 't'), ctx);
      assert.equal(buffer.usage().warning, false);
      assert.equal(events('activity.capacity_warning').length, 0);
      buffer.begin(entry('a7', 't'), ctx);
      assert.equal(buffer.usage().warning, true);
      buffer.begin(entry('a8', 't'), ctx);
      const warnings = events('activity.capacity_warning');
      assert.equal(warnings.length, 1, 'logged once per crossing');
      assert.deepEqual(
        [warnings[0].level, warnings[0].details.active, warnings[0].details.max_entries],
        ['WARN', 8, 10],
      );
      buffer.end('a8', 't', 'COMPLETED', ctx);
      buffer.end('a7', 't', 'COMPLETED', ctx);
      assert.equal(buffer.usage().warning, false);
      assert.equal(events('activity.capacity_normal').length, 1);
      buffer.begin(entry('a7', 't'), ctx);
      assert.equal(events('activity.capacity_warning').length, 2, 'a new crossing, a new warning');
    });
  });

  describe('purge and reconcile', () => {
    it('purges the named tasks of an agent, or all of its entries when none are named', () => {
      for (const t of ['t1', 't2', 't3']) buffer.begin(entry('alpha', t), ctx);
      buffer.begin(entry('beta', 't1'), ctx);
      assert.equal(buffer.purge('alpha', ['t2', 'nope'], ctx), 1);
      assert.deepEqual(
        buffer
          .entries({ agentId: 'alpha' })
          .map((e) => e.taskId)
          .sort(),
        ['t1', 't3'],
      );
      assert.deepEqual(changes.at(-1), { kind: 'purged', agentId: 'alpha', taskIds: ['t2'] });
      assert.equal(buffer.purge('alpha', [], ctx), 2);
      assert.deepEqual(
        buffer.entries().map((e) => e.agentId),
        ['beta'],
      );
      assert.equal(buffer.purge('alpha', [], ctx), 0);
      assert.deepEqual(
        events('activity.purged').map((e) => e.details.count),
        [1, 2],
      );
      assert.deepEqual(
        buffer.history({ agentId: 'alpha' }).map((e) => e.outcome),
        ['purged', 'purged', 'purged'],
      );
    });

    it('reconciles: purges entries whose task is no longer active (COMPLETED, FAILED, unknown), in one event', () => {
      for (const t of ['live', 'done', 'gone']) buffer.begin(entry('alpha', t), ctx);
      buffer.begin(entry('beta', 'done2'), ctx);
      const running = new Set(['live']);
      assert.equal(
        buffer.reconcile((_agent, task) => running.has(task), ctx),
        3,
      );
      assert.deepEqual(
        buffer.entries().map((e) => e.taskId),
        ['live'],
      );
      const [event] = events('activity.reconciled');
      assert.equal(event.details.count, 3);
      assert.deepEqual(
        buffer.history().map((e) => e.outcome),
        ['reconciled', 'reconciled', 'reconciled'],
      );
      assert.deepEqual(
        changes
          .filter((c) => c.kind === 'purged')
          .map((c) => c.kind === 'purged' && c.agentId)
          .sort(),
        ['alpha', 'beta'],
      );
      assert.equal(
        buffer.reconcile(() => true, ctx),
        0,
      );
      assert.equal(events('activity.reconciled').length, 1, 'nothing to reconcile, nothing logged');
    });
  });

  describe('history eviction', () => {
    it('keeps at most historyEntries ended entries, the newest', () => {
      reopen({ historyEntries: 3 });
      for (let i = 0; i < 5; i++) {
        buffer.begin(entry('alpha', `t${i}`), ctx);
        clock.advance(1);
        buffer.end('alpha', `t${i}`, 'COMPLETED', ctx);
      }
      assert.deepEqual(
        buffer.history().map((e) => e.taskId),
        ['t4', 't3', 't2'],
      );
      assert.equal(store.activity.listEntries().length, 3, 'evicted from the store too');
      assert.ok(events('activity.history_evicted').length >= 1);
    });

    it('evicts ended entries older than historyMs, on the clock', () => {
      reopen({ historyMs: 60_000 });
      buffer.begin(entry('alpha', 'old'), ctx);
      buffer.end('alpha', 'old', 'COMPLETED', ctx);
      clock.advance(30_000);
      buffer.begin(entry('alpha', 'new'), ctx);
      buffer.end('alpha', 'new', 'COMPLETED', ctx);
      clock.advance(29_999);
      assert.deepEqual(
        buffer.history().map((e) => e.taskId),
        ['new', 'old'],
      );
      clock.advance(1);
      assert.deepEqual(
        buffer.history().map((e) => e.taskId),
        ['new'],
      );
      clock.advance(30_000);
      assert.deepEqual(buffer.history(), []);
      assert.deepEqual(store.activity.listEntries(), []);
    });

    it('evicts a large backlog in bounded runs', () => {
      reopen({ historyEntries: 100_000, maxPerAgent: 100_000, maxEntries: 100_000 });
      const n = HISTORY_EVICTION_BATCH * 2 + 10;
      for (let i = 0; i < n; i++) buffer.begin(entry('alpha', `t${i}`), ctx);
      buffer.purge('alpha', [], ctx);
      assert.equal(buffer.usage().history, n);
      reopen({ historyEntries: 5 });
      assert.equal(buffer.usage().history, n - HISTORY_EVICTION_BATCH, 'one batch at a time');
      clock.advance(0);
      clock.advance(0);
      assert.equal(buffer.usage().history, 5);
    });
  });

  describe('restart', () => {
    it('restores active entries and the history from the store', () => {
      buffer.begin(entry('alpha', 't1', { description: 'd1' }), ctx);
      buffer.begin(entry('beta', 't2'), ctx);
      buffer.end('beta', 't2', 'FAILED', ctx);
      reopen();
      assert.deepEqual(
        buffer.entries().map((e) => [e.agentId, e.taskId, e.description]),
        [['alpha', 't1', 'd1']],
      );
      assert.deepEqual(
        buffer.history().map((e) => [e.taskId, e.outcome]),
        [['t2', 'FAILED']],
      );
      reopen({ maxPerAgent: 1 });
      assert.throws(
        () => buffer.begin(entry('alpha', 't3'), ctx),
        ActivityBufferFullError,
        'restored entries count toward the limits',
      );
    });
  });

  describe('artifacts (activity.proto)', () => {
    const artifact = (more: Partial<Artifact> = {}): Artifact => ({
      negotiationId: 'neg-1',
      kind: 'diff',
      version: 'v1',
      contentType: 'text/x-diff',
      content: Buffer.from('--- a\n+++ b\n'),
      createdAt: '',
      ...more,
    });

    it('appends and lists in order, by kind, persisted across a restart; created_at defaults to now', () => {
      assert.deepEqual(buffer.appendArtifact(artifact(), ctx), { ok: true, reason: '' });
      clock.advance(5);
      assert.equal(
        buffer.appendArtifact(
          artifact({ kind: 'note', content: Buffer.from('ok'), createdAt: '2026-02-03T04:05:06Z' }),
          ctx,
        ).ok,
        true,
      );
      assert.equal(buffer.appendArtifact(artifact({ negotiationId: 'neg-2' }), ctx).ok, true);
      reopen();
      const all = buffer.listArtifacts('neg-1', '');
      assert.deepEqual(
        all.map((a) => [a.kind, a.content.toString(), a.createdAt]),
        [
          ['diff', '--- a\n+++ b\n', isoUtc(clock.now() - 5)],
          ['note', 'ok', '2026-02-03T04:05:06Z'],
        ],
      );
      assert.deepEqual(
        buffer.listArtifacts('neg-1', 'note').map((a) => a.kind),
        ['note'],
      );
      assert.deepEqual(buffer.listArtifacts('nope', ''), []);
      assert.equal(events('activity.artifact_appended').length, 3);
    });

    it('refuses a missing or over-long negotiation_id, an unknown kind, content over 1 MiB, a bad created_at', () => {
      const refusals: Array<[Partial<Artifact>, RegExp]> = [
        [{ negotiationId: '' }, /negotiation_id is required/],
        [{ negotiationId: 'n'.repeat(257) }, /negotiation_id is longer than 256/],
        [{ kind: 'poem' }, /kind must be one of contract, diff, decision, score, note/],
        [{ content: Buffer.alloc(1024 * 1024 + 1) }, /content is larger than 1048576 bytes/],
        [{ createdAt: 'yesterday' }, /created_at is not an ISO-8601/],
      ];
      for (const [more, reason] of refusals) {
        const result = buffer.appendArtifact(artifact(more), ctx);
        assert.equal(result.ok, false);
        assert.match(result.reason, /^VALIDATION_ERROR: /);
        assert.match(result.reason, reason);
      }
      assert.equal(
        buffer.appendArtifact(artifact({ content: Buffer.alloc(1024 * 1024) }), ctx).ok,
        true,
        'exactly 1 MiB is accepted',
      );
      assert.equal(buffer.listArtifacts('neg-1', '').length, 1);
      assert.equal(events('activity.artifact_refused').length, refusals.length);
    });

    it('caps a negotiation: 1,000 artifacts, the bytes of one kind one answer can carry, 64 MiB in all (BUFFER_FULL)', () => {
      assert.deepEqual(ARTIFACT_LIMITS, {
        perNegotiation: 1000,
        bytesPerNegotiation: 64 * 1024 * 1024,
        bytesPerKind: TRANSPORT_MAX_MESSAGE_BYTES - 1024 * 1024,
      });
      for (let i = 0; i < 1000; i++)
        assert.equal(
          buffer.appendArtifact(artifact({ negotiationId: 'many', kind: 'note', content: Buffer.from('x') }), ctx).ok,
          true,
        );
      const many = buffer.appendArtifact(
        artifact({ negotiationId: 'many', kind: 'note', content: Buffer.from('x') }),
        ctx,
      );
      assert.equal(many.ok, false);
      assert.match(many.reason, /^BUFFER_FULL: negotiation 'many' already holds 1000 artifacts.*new negotiation_id/);
      assert.equal(
        buffer.appendArtifact(artifact({ negotiationId: 'other' }), ctx).ok,
        true,
        'other negotiations are not affected',
      );

      const mib = Buffer.alloc(1024 * 1024, 1);
      const perKind = Math.floor(ARTIFACT_LIMITS.bytesPerKind / mib.length);
      for (let i = 0; i < perKind; i++)
        assert.equal(
          buffer.appendArtifact(artifact({ negotiationId: 'big', kind: 'diff', content: mib }), ctx).ok,
          true,
        );
      const kindFull = buffer.appendArtifact(artifact({ negotiationId: 'big', kind: 'diff', content: mib }), ctx);
      assert.match(kindFull.reason, /^BUFFER_FULL: .*bytes of 'diff' artifacts.*per kind/);
      assert.equal(
        buffer.appendArtifact(artifact({ negotiationId: 'big', kind: 'diff', content: Buffer.alloc(16) }), ctx).ok,
        true,
        'what still fits is taken',
      );
      let appended = perKind;
      for (const kind of ['contract', 'decision', 'score', 'note']) {
        for (let i = 0; i < perKind && appended < 63; i++, appended++)
          assert.equal(buffer.appendArtifact(artifact({ negotiationId: 'big', kind, content: mib }), ctx).ok, true);
      }
      const full = buffer.appendArtifact(artifact({ negotiationId: 'big', kind: 'note', content: mib }), ctx);
      assert.match(
        full.reason,
        /^BUFFER_FULL: negotiation 'big' holds 66060304 bytes.*would exceed 67108864 per negotiation/,
      );
      const refused = events('activity.artifact_refused');
      assert.equal(refused.length, 3);
      assert.equal(refused[2].details.code, 'BUFFER_FULL');
      assert.equal(refused[2].level, 'WARN');
    });
  });
});
