import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { invocationJson, HitlService } from '../../src/core/hitl/hitlService';
import { REASON_TYPES, type HitlInvocation } from '../../src/core/hitl/model';
import { DEFAULT_HITL_POLICY } from '../../src/core/hitl/policy';
import { parseBody, parseInvocationRequest } from '../../src/core/hitl/request';
import { SequentialIds } from '../../src/core/ids';
import { EventLog } from '../../src/core/log/eventLog';
import { approvalSettings, ProblemMemory } from '../../src/extension/approvalSettings';
import {
  announcementText,
  approvalRow,
  auditFileName,
  MAX_SETTLED_LISTED,
  needsAnnouncement,
  notificationText,
  OpenAnnouncements,
  orderForView,
  panelTitle,
  REASON_ICONS,
  stateText,
} from '../../src/extension/approvalsModel';
import { Commands, ContextKeys, HITL_PANEL_VIEW_TYPE, Views } from '../../src/extension/contributions';
import { hitlPanelHtml } from '../../src/extension/panels/hitlPanelHtml';
import { panelCsp } from '../../src/extension/panels/panelHtml';
import { parseHostMessage, parseInvocationJson } from '../../webview/hitl/protocol';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const root = path.resolve(__dirname, '../../..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
const time = (ms: number) => new Date(ms).toISOString().slice(11, 19);

/** A real HITL service over a real store, with a manual clock. */
function hitlFixture() {
  const dir = makeTempDir('sw4rm-approvals-');
  const store = CoordinatorStore.open(dir);
  const clock = new ManualClock(T0);
  const log = new EventLog(store, clock);
  const hitl = new HitlService(store, log, clock, new SequentialIds(), DEFAULT_HITL_POLICY);
  const open = (body: Record<string, unknown>, requester = 'agent-a') => {
    const request = parseInvocationRequest(body, { requester, correlationId: 'corr-1', now: clock.now() });
    return hitl.open(request, { kind: 'rpc' }, { correlationId: 'corr-1' }).invocation;
  };
  return {
    hitl,
    clock,
    open,
    dispose: () => {
      hitl.dispose();
      log.dispose();
      store.close();
      removeTempDir(dir);
    },
  };
}

function invocation(overrides: Partial<HitlInvocation> & { id: string }): HitlInvocation {
  return {
    reasonType: 'SECURITY_APPROVAL',
    requester: 'agent-a',
    correlationId: 'c',
    subject: { repoId: 'repo', worktreeId: 'wt', taskId: 't1' },
    context: {
      summary: 'Delete generated fixtures',
      facts: {},
      diffs: [],
      risk: { level: 'HIGH', notes: [] },
      priorAttempts: [],
      inference: {},
      score: null,
    },
    proposedActions: [],
    suggestedAction: '',
    priority: 0,
    requestedFallback: '',
    origin: { kind: 'rpc' },
    createdAt: T0,
    deadlineAt: T0 + 300_000,
    originalDeadlineAt: T0 + 300_000,
    extensions: 0,
    state: 'pending',
    decision: null,
    updatedAt: T0,
    ...overrides,
  };
}

describe('approval settings (sw4rm.approvals.*) → HITL policy', () => {
  const defaults = { defaultDeadlineSeconds: 300, fallbacks: {}, rules: [], pauseAll: false, retentionDays: 90 };

  it('declares the defaults, which give the core default policy', () => {
    const props = manifest.contributes.configuration.properties;
    assert.equal(props['sw4rm.approvals.defaultDeadlineSeconds'].default, 300);
    assert.deepEqual(props['sw4rm.approvals.fallbacks'].default, {});
    assert.deepEqual(props['sw4rm.approvals.rules'].default, []);
    assert.equal(props['sw4rm.approvals.pauseAll'].default, false);
    assert.equal(props['sw4rm.approvals.retentionDays'].default, 90);
    const { policy, problems } = approvalSettings(defaults);
    assert.deepEqual(problems, []);
    assert.deepEqual(policy, DEFAULT_HITL_POLICY);
  });

  it('reads deadlines, fallbacks per reason type over "*", rules and pause', () => {
    const { policy, problems } = approvalSettings({
      defaultDeadlineSeconds: 60,
      fallbacks: {
        '*': 'AUTO_DECIDE_THRESHOLD',
        DEBATE_DEADLOCK: { policy: 'EXTEND_TIMEOUT', extendSeconds: 30, maxExtensions: 2 },
      },
      rules: [{ name: 'docs', reasonType: 'WORKTREE_OVERRIDE', agent: 'doc-*', subject: 'repo/**', action: 'approve' }],
      pauseAll: true,
      retentionDays: 7,
    });
    assert.deepEqual(problems, []);
    assert.equal(policy.defaultDeadlineMs, 60_000);
    assert.equal(policy.settledRetentionMs, 7 * 86_400_000);
    assert.equal(policy.fallbacks.SECURITY_APPROVAL.policy, 'AUTO_DECIDE_THRESHOLD');
    assert.deepEqual(policy.fallbacks.DEBATE_DEADLOCK, {
      policy: 'EXTEND_TIMEOUT',
      threshold: 0.9,
      extendMs: 30_000,
      maxExtensions: 2,
    });
    assert.deepEqual(policy.rules, [
      { name: 'docs', reasonType: 'WORKTREE_OVERRIDE', agent: 'doc-*', subject: 'repo/**', action: 'approve' },
    ]);
    assert.equal(policy.paused, true);
  });

  it('skips bad entries and names the setting each problem comes from', () => {
    const { policy, problems } = approvalSettings({
      defaultDeadlineSeconds: -5,
      fallbacks: { NOPE: 'DENY_BY_DEFAULT', CONFLICT: 'MAYBE' },
      rules: [{ action: 'approve', name: 'ok' }, { action: 'allow' }],
      pauseAll: 'yes',
      retentionDays: 0,
    });
    assert.equal(policy.defaultDeadlineMs, DEFAULT_HITL_POLICY.defaultDeadlineMs);
    assert.equal(policy.fallbacks.CONFLICT.policy, 'DENY_BY_DEFAULT');
    assert.deepEqual(
      policy.rules.map((r) => r.name),
      ['ok'],
    );
    assert.equal(policy.paused, false);
    assert.equal(policy.settledRetentionMs, DEFAULT_HITL_POLICY.settledRetentionMs);
    assert.equal(problems.length, 6, problems.join('\n'));
    assert.ok(
      problems.some((p) => p.startsWith('sw4rm.approvals.retentionDays must be a number of days from 1 to 3650')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('sw4rm.approvals.defaultDeadlineSeconds must be')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith("sw4rm.approvals.fallbacks: unknown reason type 'NOPE'")),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('sw4rm.approvals.fallbacks.CONFLICT.policy must be')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('sw4rm.approvals.rules[1].action must be')),
      problems.join('\n'),
    );
    assert.ok(
      problems.some((p) => p.startsWith('sw4rm.approvals.pauseAll must be true or false')),
      problems.join('\n'),
    );
  });

  it('reports each problem once', () => {
    const memory = new ProblemMemory();
    assert.deepEqual(memory.fresh(['a', 'b']), ['a', 'b']);
    assert.deepEqual(memory.fresh(['b', 'c']), ['c']);
    assert.deepEqual(memory.fresh(['a', 'b', 'c']), []);
  });

  it('applies live to a running HITL service: a rule decides at once, pause makes everything wait', () => {
    const f = hitlFixture();
    try {
      const rules = [{ name: 'fixtures', reasonType: 'SECURITY_APPROVAL', agent: 'agent-*', action: 'approve' }];
      f.hitl.setPolicy(approvalSettings({ ...defaults, rules }).policy);
      const ruled = f.open({ reason_type: 'SECURITY_APPROVAL', summary: 'one' });
      assert.equal(ruled.state, 'decided');
      assert.equal(ruled.decision?.origin.rule, 'fixtures');
      f.hitl.setPolicy(approvalSettings({ ...defaults, rules, pauseAll: true }).policy);
      assert.equal(f.open({ reason_type: 'SECURITY_APPROVAL', summary: 'two' }).state, 'pending');
      f.hitl.setPolicy(approvalSettings({ ...defaults, defaultDeadlineSeconds: 10 }).policy);
      const short = f.open({ reason_type: 'CONFLICT' });
      assert.equal(short.deadlineAt, T0 + 10_000);
    } finally {
      f.dispose();
    }
  });
});

describe('Approvals view rows', () => {
  it('lists pending first by priority then deadline, then settled ones newest first, bounded', () => {
    const rows = [
      invocation({ id: 'settled-old', state: 'decided', updatedAt: T0 + 1 }),
      invocation({ id: 'late', deadlineAt: T0 + 900 }),
      invocation({ id: 'urgent', priority: 5, deadlineAt: T0 + 999_999 }),
      invocation({ id: 'settled-new', state: 'timed_out', updatedAt: T0 + 50 }),
      invocation({ id: 'soon', deadlineAt: T0 + 100 }),
      invocation({ id: 'settled-mid', state: 'cancelled', updatedAt: T0 + 20 }),
    ];
    assert.deepEqual(
      orderForView(rows).map((i) => i.id),
      ['urgent', 'soon', 'late', 'settled-new', 'settled-mid', 'settled-old'],
    );
    assert.deepEqual(
      orderForView(rows, 1).map((i) => i.id),
      ['urgent', 'soon', 'late', 'settled-new'],
    );
    assert.ok(MAX_SETTLED_LISTED >= 100);
  });

  it('has an icon for every reason type of the RFC', () => {
    assert.deepEqual(Object.keys(REASON_ICONS).sort(), [...REASON_TYPES].sort());
    assert.equal(new Set(Object.values(REASON_ICONS)).size, REASON_TYPES.length, 'each reason type looks different');
  });

  it('shows a pending invocation with its requester and deadline, and marks it pending for the Cancel menu', () => {
    const row = approvalRow(invocation({ id: 'i1', priority: 2 }), time);
    assert.equal(row.label, 'Security approval: Delete generated fixtures');
    assert.equal(row.description, 'pending · agent-a · due 03:09:05');
    assert.equal(row.icon, 'shield');
    assert.equal(row.contextValue, 'approval+pending');
    assert.match(
      row.tooltip,
      /^SECURITY_APPROVAL — pending\nfrom agent-a · priority 2\ninvocation i1\nrepo repo · worktree wt · task t1\nDelete generated fixtures\nrisk: HIGH/,
    );
    assert.match(row.accessibilityLabel, /SECURITY_APPROVAL approval pending, from agent-a/);
  });

  it('shows how a settled invocation was decided: by whom, by rule or by fallback', () => {
    const decided = (
      state: HitlInvocation['state'],
      action: 'approve' | 'deny',
      origin: NonNullable<HitlInvocation['decision']>['origin'],
    ) =>
      invocation({
        id: 'x',
        state,
        updatedAt: T0 + 5_000,
        decision: { action, rationale: 'because', payload: null, decidedAt: T0 + 5_000, origin },
      });
    const human = approvalRow(
      decided('decided', 'approve', { kind: 'human', by: 'editor:alice', automatic: false }),
      time,
    );
    assert.equal(human.description, 'approved · agent-a · by editor:alice · 03:04:10');
    assert.equal(human.contextValue, 'approval+decided');
    assert.match(human.tooltip, /approved by editor:alice at 03:04:10\nrationale: because$/);
    const rule = approvalRow(
      decided('decided', 'deny', { kind: 'rule', by: 'policy', automatic: true, rule: 'no-prod' }),
      time,
    );
    assert.equal(rule.description, "denied · agent-a · by rule 'no-prod' · 03:04:10");
    const fallback = decided('timed_out', 'deny', {
      kind: 'fallback',
      by: 'policy',
      automatic: true,
      policy: 'DENY_BY_DEFAULT',
      trigger: 'deadline',
    });
    assert.equal(stateText(fallback), 'timed out → denied');
    assert.equal(
      approvalRow(fallback, time).description,
      'timed out → denied · agent-a · by fallback DENY_BY_DEFAULT · 03:04:10',
    );
    assert.equal(approvalRow(fallback, time).contextValue, 'approval+timed_out');
  });

  it('announces only invocations that wait for a human, not those a rule decided at once', () => {
    assert.equal(needsAnnouncement({ kind: 'opened', invocation: { state: 'pending' } }), true);
    assert.equal(needsAnnouncement({ kind: 'opened', invocation: { state: 'decided' } }), false);
    assert.equal(needsAnnouncement({ kind: 'extended', invocation: { state: 'pending' } }), false);
    assert.equal(needsAnnouncement({ kind: 'settled', invocation: { state: 'timed_out' } }), false);
  });

  it('keeps agent-supplied text on one line and out of notification links', () => {
    const row = approvalRow(
      invocation({ id: 'i', context: { ...invocation({ id: 'i' }).context, summary: 'line one\n\nline   two' } }),
      time,
    );
    assert.equal(row.label, 'Security approval: line one line two');
    const text = notificationText(invocation({ id: 'i', requester: 'evil [click](command:sw4rm.stop)' }));
    assert.equal(text, 'SW4RM approval needed: SECURITY_APPROVAL from evil click(command:sw4rm.stop)');
    assert.equal(panelTitle(invocation({ id: 'i' }), 'i'), 'Approval: Security approval · agent-a');
    assert.equal(panelTitle(undefined, '0123456789'), 'Approval 01234567');
  });

  it('links Review to the invocation with an argument that cannot end the link', () => {
    const text = announcementText(invocation({ id: 'x) [y](command:sw4rm.stop' }), Commands.reviewApproval);
    const link = /\[Review\]\(command:sw4rm\.approvals\.review\?([^)\s]+)\)$/.exec(text);
    assert.ok(link, text);
    assert.ok(text.startsWith('SW4RM approval needed: SECURITY_APPROVAL from agent-a. [Review]('), text);
    assert.equal(text.match(/\[/g)?.length, 1, 'one link only');
    assert.deepEqual(JSON.parse(decodeURIComponent(link[1])), [{ kind: 'approval', id: 'x) [y](command:sw4rm.stop' }]);
  });

  it('closes an announcement when its invocation settles, once, and all of them when the coordinator goes', () => {
    const announcements = new OpenAnnouncements();
    const closed: string[] = [];
    assert.equal(
      announcements.add('a', () => closed.push('a')),
      true,
    );
    assert.equal(
      announcements.add('b', () => closed.push('b')),
      true,
    );
    assert.equal(
      announcements.add('a', () => closed.push('a again')),
      false,
      'one notification per invocation',
    );
    assert.deepEqual(closed, ['a again']);
    announcements.close('a');
    announcements.close('a');
    assert.deepEqual(closed, ['a again', 'a']);
    assert.equal(announcements.has('a'), false);
    announcements.add('c', () => closed.push('c'));
    announcements.closeAll();
    assert.deepEqual(closed, ['a again', 'a', 'b', 'c']);
    assert.equal(announcements.size, 0);
  });

  it('names audit files by time, without characters file systems refuse', () => {
    assert.equal(auditFileName(Date.UTC(2025, 0, 2, 3, 4, 5, 678)), 'sw4rm-approvals-audit-2025-01-02T03-04-05Z.json');
  });
});

describe('Approvals contributions', () => {
  it('declares the Approvals view in the SW4RM container with a welcome text for stopped and running', () => {
    assert.ok(
      manifest.contributes.views[Views.container].some(
        (v: { id: string; name: string }) => v.id === Views.approvals && v.name === 'Approvals',
      ),
    );
    const welcome = manifest.contributes.viewsWelcome.filter((w: { view: string }) => w.view === Views.approvals);
    assert.deepEqual(welcome.map((w: { when: string }) => w.when).sort(), ['!sw4rm.running', 'sw4rm.running']);
  });

  it('restores approval panels: the panel type is an activation event', () => {
    assert.ok(manifest.activationEvents.includes(`onWebviewPanel:${HITL_PANEL_VIEW_TYPE}`));
  });

  it('offers Cancel only on pending invocations, Review on all, and Pause or Resume by the paused context key', () => {
    const items = manifest.contributes.menus['view/item/context'].filter((e: { when: string }) =>
      e.when.includes(Views.approvals),
    );
    const regexOf = (command: string) =>
      new RegExp(/viewItem =~ \/(.*)\//.exec(items.find((e: { command: string }) => e.command === command).when)![1]);
    for (const state of ['pending', 'decided', 'timed_out', 'cancelled']) {
      assert.ok(regexOf(Commands.reviewApproval).test(`approval+${state}`));
      assert.equal(regexOf(Commands.cancelApproval).test(`approval+${state}`), state === 'pending', state);
    }
    assert.ok(!regexOf(Commands.reviewApproval).test('deadLetter'));
    const title = manifest.contributes.menus['view/title'].filter((e: { when: string }) =>
      e.when.includes(Views.approvals),
    );
    assert.ok(
      title.find(
        (e: { command: string; when: string }) =>
          e.command === Commands.pauseApprovals && e.when.includes(`!${ContextKeys.approvalsPaused}`),
      ),
    );
    assert.ok(
      title.find(
        (e: { command: string; when: string }) =>
          e.command === Commands.resumeApprovals && /&& sw4rm\.approvals\.paused$/.test(e.when),
      ),
    );
  });

  it('packages the webview bundle and stylesheet, not their source maps', () => {
    const ignore = fs
      .readFileSync(path.join(root, '.vscodeignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    assert.ok(ignore.includes('!dist/webview/*.js'));
    assert.ok(ignore.includes('!dist/webview/*.css'));
    assert.ok(!ignore.some((l) => l.startsWith('!') && l.includes('.map')));
  });
});

describe('approval panel page', () => {
  const page = {
    cspSource: 'https://webview.test',
    scriptUri: 'https://webview.test/dist/webview/hitl.js',
    styleUri: 'https://webview.test/dist/webview/hitl.css',
    nonce: 'n0nce+/=',
  };

  it('has a strict CSP: scripts by nonce only, styles and images from the webview origin, nothing inline', () => {
    assert.equal(
      panelCsp(page.cspSource, page.nonce),
      "default-src 'none'; script-src 'nonce-n0nce+/='; style-src https://webview.test; img-src https://webview.test",
    );
    const html = hitlPanelHtml(page);
    assert.ok(html.includes(`content="${panelCsp(page.cspSource, page.nonce)}"`));
    assert.ok(!html.includes('unsafe-inline'));
    const scripts = [...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
    assert.deepEqual(scripts, [`<script nonce="${page.nonce}" src="${page.scriptUri}">`]);
    assert.doesNotMatch(html, /\son[a-z]+\s*=/i, 'no inline event handlers');
    assert.doesNotMatch(html, /\sstyle\s*=|<style/i, 'no inline styles');
    assert.ok(html.includes(`<link rel="stylesheet" href="${page.styleUri}">`));
  });

  it('has real, labelled controls for the decision', () => {
    const html = hitlPanelHtml(page);
    for (const id of ['approve', 'deny', 'modify', 'defer', 'send-modify'])
      assert.match(html, new RegExp(`<button type="button" id="${id}"`));
    assert.match(html, /<label for="rationale">/);
    assert.match(
      html,
      /<textarea id="rationale" [^>]*required aria-required="true" aria-describedby="rationale-required">/,
    );
    assert.match(
      html,
      /<p id="rationale-required" class="required-hint">A rationale is required: say why before you approve, deny, modify or defer\.<\/p>/,
    );
    assert.match(html, /<label for="payload">/);
    assert.match(html, /id="status" class="status" role="status" aria-live="polite"/);
  });

  it('escapes what it puts in attributes', () => {
    const html = hitlPanelHtml({ ...page, scriptUri: 'https://x/"><img src=x>' });
    assert.ok(html.includes('src="https://x/&quot;>&lt;img src=x>"'));
  });
});

describe("the coordinator's invocation JSON is what the panel protocol expects", () => {
  it('for a pending and a decided invocation with every kind of context', () => {
    const f = hitlFixture();
    try {
      const body = parseBody(
        JSON.stringify({
          reason_type: 'SECURITY_APPROVAL',
          summary: 'Delete generated fixtures',
          facts: { files: 3, owner: { team: 'infra' } },
          diffs: [
            { title: 'config.json', before_json: { a: 1 }, after_json: { a: 2 } },
            { title: 'notes.txt', before: 'a\nb', after: 'a\nc' },
            { title: 'p', unified: '@@ -1 +1 @@\n-a\n+b' },
          ],
          risk: { level: 'HIGH', notes: ['irreversible'] },
          prior_attempts: [{ at: 'yesterday' }],
          inference: { model: 'm', confidence: 0.4 },
          subject: { repo_id: 'r', worktree_id: 'w', task_id: 't' },
          suggested_action: 'approve',
          proposed_actions: ['approve', 'deny'],
        }),
      );
      const opened = f.open(body);
      const wire = JSON.parse(JSON.stringify(invocationJson(opened)));
      const parsed = parseInvocationJson(wire);
      assert.ok(parsed, 'a pending invocation parses');
      assert.equal(parsed.context.diffs.length, 3);
      assert.equal(parsed.decision, null);
      f.hitl.decide(opened.id, { action: 'modify', rationale: 'smaller', payload: { files: 1 } }, 'editor:test', {
        correlationId: 'c',
      });
      const decided = parseInvocationJson(JSON.parse(JSON.stringify(invocationJson(f.hitl.get(opened.id)!))));
      assert.ok(decided?.decision);
      assert.equal(decided.decision.decided_by, 'editor:test');
      assert.deepEqual(decided.decision.decision_payload, { files: 1 });
      assert.ok(
        parseHostMessage({
          type: 'invocation',
          invocationId: opened.id,
          invocation: decided,
          operator: 'editor:test',
          now: T0,
        }),
      );
    } finally {
      f.dispose();
    }
  });
});
