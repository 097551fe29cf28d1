import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TASK_STATES } from '../../src/core/scheduler/model';
import { Commands, Views } from '../../src/extension/contributions';
import type { AgentRecord, MessageSummary, StoredEvent, TaskRecord } from '../../src/core/api';
import {
  groupTasks,
  paramsProblem,
  priorityProblem,
  scopeProblem,
  scopeShort,
  submitFailure,
  submitResultText,
  targetProblem,
  taskActionText,
  taskAgent,
  taskContextValue,
  taskDetailText,
  taskGroupDescription,
  taskGroupOf,
  taskRow,
  taskTargets,
  waitingText,
} from '../../src/extension/tasksModel';
import { SchedulerHarness } from '../support/schedulerHarness';

function task(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    taskId: 't-1',
    target: 'type:Echo',
    assignedAgentId: '',
    priority: 0,
    seq: 1,
    params: Buffer.from('{"text":"hi"}'),
    contentType: 'application/json',
    scopeText: 'repo:myrepo/src/**',
    scope: { repoId: 'myrepo', worktreeId: '', paths: ['src/**'], resources: [] },
    jobKey: 'k',
    submittedBy: 'editor:me',
    submittedAt: 0,
    state: 'QUEUED',
    waiting: null,
    runMessageId: '',
    preemptMessageId: '',
    preemptedBy: '',
    nonPreemptibleUntil: null,
    dispatches: 0,
    errorCode: '',
    note: '',
    startedAt: null,
    endedAt: null,
    updatedAt: 0,
    agentType: '',
    terminateMessageId: '',
    deadline: null,
    withdrawals: 0,
    result: '',
    ...overrides,
  };
}

function agent(agentId: string, name: string, state = 'RUNNABLE'): AgentRecord {
  return {
    descriptor: { agentId, name } as AgentRecord['descriptor'],
    state,
    registeredAt: 0,
    updatedAt: 0,
    lastHeartbeatAt: null,
    health: {},
    presence: 'online',
  };
}

describe("the Tasks view's text (no vscode)", () => {
  it("groups tasks: Running (dispatched, running, preempting), Queued, Done (completed, failed, cancelled), keeping the core's order", () => {
    const tasks = [
      task({ taskId: 'q1' }),
      task({ taskId: 'r1', state: 'RUNNING' }),
      task({ taskId: 'd1', state: 'DISPATCHED' }),
      task({ taskId: 'p1', state: 'PREEMPTING' }),
      task({ taskId: 'q2' }),
      task({ taskId: 'c1', state: 'COMPLETED' }),
      task({ taskId: 'f1', state: 'FAILED' }),
      task({ taskId: 'x1', state: 'CANCELLED' }),
    ];
    const groups = groupTasks(tasks);
    assert.deepEqual(
      groups.running.map((t) => t.taskId),
      ['r1', 'd1', 'p1'],
    );
    assert.deepEqual(
      groups.queued.map((t) => t.taskId),
      ['q1', 'q2'],
    );
    assert.deepEqual(
      groups.done.map((t) => t.taskId),
      ['c1', 'f1', 'x1'],
    );
    assert.equal(taskGroupOf({ state: 'PREEMPTING' }), 'running');
  });

  it('says every waiting reason in words', () => {
    assert.equal(
      waitingText({ kind: 'max_parallel_instances', agentType: 'Echo', limit: 2, running: 2 }),
      'queued behind max_parallel_instances (2 of 2 running for type Echo)',
    );
    assert.equal(
      waitingText({ kind: 'conflict_decision', invocationId: 'i', withTaskId: 't-9' }),
      'waiting for a conflict decision (its scope overlaps task t-9)',
    );
    assert.equal(
      waitingText({ kind: 'conflict_check', withTaskId: 't-9' }),
      "waiting for the inference engine's parallelism check (its scope overlaps task t-9)",
    );
    assert.equal(waitingText({ kind: 'preempted', byTaskId: 't-0' }), 'preempted by task t-0');
    assert.equal(
      waitingText({ kind: 'preempted', byTaskId: '' }),
      'preempted by the operator (RequestPreemption)',
      'no task id after a RequestPreemption',
    );
    assert.equal(
      waitingText({ kind: 'serialised_after', taskId: 't-2' }),
      'serialised after task t-2 (a conflict decision)',
    );
    assert.equal(
      waitingText({ kind: 'agent_busy', agentId: 'echo-1' }),
      'waiting for agent echo-1 to finish its current task',
    );
    assert.equal(
      waitingText({ kind: 'agent_not_runnable', agentId: 'echo-1', state: 'SUSPENDED' }),
      'waiting for agent echo-1 to become RUNNABLE (it is SUSPENDED)',
    );
    assert.equal(
      waitingText({ kind: 'no_agent_of_type', agentType: 'Echo' }),
      'waiting for a RUNNABLE agent of type Echo',
    );
  });

  it('puts the task id in the label, then priority, agent, state with the waiting reason, and scope', () => {
    const queued = taskRow(
      task({ waiting: { kind: 'max_parallel_instances', agentType: 'Echo', limit: 2, running: 2 } }),
    );
    assert.equal(queued.label, 't-1');
    assert.equal(
      queued.description,
      'P0 · type:Echo · QUEUED: queued behind max_parallel_instances (2 of 2 running for type Echo) · myrepo/src/**',
    );
    assert.match(queued.tooltip, /scope repo:myrepo\/src\/\*\*/);
    const failed = taskRow(
      task({ state: 'FAILED', errorCode: 'forced_preemption', assignedAgentId: 'echo-2', priority: -5, note: 'gone' }),
    );
    assert.equal(failed.description, 'P-5 · type:Echo → echo-2 · FAILED forced_preemption · myrepo/src/**');
    assert.match(failed.tooltip, /note: gone/);
    // A waiting reason left on a task that runs is not shown.
    assert.doesNotMatch(
      taskRow(task({ state: 'RUNNING', waiting: { kind: 'preempted', byTaskId: 'x' } })).description,
      /preempted/,
    );
    assert.equal(taskContextValue({ state: 'RUNNING' }), 'task+RUNNING');
    assert.equal(taskAgent({ target: 'echo-1', assignedAgentId: 'echo-1' }), 'echo-1');
  });

  it('shortens scopes', () => {
    assert.equal(
      scopeShort({ repoId: 'r', worktreeId: 'w', paths: ['a/**', 'b'], resources: ['db'] }),
      'r@w/a/**,b · resource:db',
    );
    assert.equal(scopeShort({ repoId: '', worktreeId: '', paths: [], resources: ['port:80'] }), 'resource:port:80');
    assert.equal(scopeShort({ repoId: 'r', worktreeId: '', paths: ['x'.repeat(100)], resources: [] }, 20).length, 20);
  });

  it('validates the Submit Task… fields: target, priority -19..20, scope, parameters JSON', () => {
    assert.equal(targetProblem('echo-1'), undefined);
    assert.equal(targetProblem('type:Echo'), undefined);
    assert.match(targetProblem('type:') ?? '', /agent type/);
    assert.match(targetProblem('a:b') ?? '', /cannot contain ":"/);
    assert.match(targetProblem(' ') ?? '', /agent id/);
    for (const ok of ['-19', '0', '20', '+3']) assert.equal(priorityProblem(ok), undefined, ok);
    assert.match(priorityProblem('-20') ?? '', /outside -19..20/);
    assert.match(priorityProblem('21') ?? '', /outside/);
    assert.match(priorityProblem('1.5') ?? '', /whole number/);
    assert.match(priorityProblem('') ?? '', /whole number/);
    assert.match(scopeProblem('  ') ?? '', /repo:<repo_id>/);
    assert.equal(scopeProblem('repo:myrepo/path'), undefined);
    assert.equal(paramsProblem(''), undefined);
    assert.equal(paramsProblem('{"a":1}'), undefined);
    assert.match(paramsProblem('{a') ?? '', /Not valid JSON/);
  });

  it('offers agent types first, then agents', () => {
    const targets = taskTargets([agent('echo-2', 'Echo'), agent('echo-1', 'Echo', 'RUNNING'), agent('w', 'Writer')]);
    assert.deepEqual(
      targets.map((t) => t.target),
      ['type:Echo', 'type:Writer', 'echo-1', 'echo-2', 'w'],
    );
    assert.match(targets[0].description, /2 registered/);
    assert.match(targets[2].description, /Echo · RUNNING/);
  });

  it('says what SubmitTask answered', () => {
    assert.deepEqual(submitResultText(submitFailure('UNAVAILABLE', 'the coordinator is stopping')), {
      ok: false,
      text: 'Task refused: UNAVAILABLE: the coordinator is stopping',
    });
    assert.deepEqual(
      submitResultText({ accepted: true, task: task({ state: 'DISPATCHED', assignedAgentId: 'echo-1' }), reason: '' }),
      { ok: true, text: 'Task t-1 accepted (priority 0), DISPATCHED on echo-1.' },
    );
    const queued = submitResultText({
      accepted: true,
      task: task({ waiting: { kind: 'max_parallel_instances', agentType: 'Echo', limit: 1, running: 1 } }),
      reason: '',
    });
    assert.equal(
      queued.text,
      'Task t-1 accepted (priority 0), queued: queued behind max_parallel_instances (1 of 1 running for type Echo).',
    );
    assert.match(
      submitResultText({ accepted: true, task: task(), reason: 'waiting for a conflict decision' }).text,
      /queued: waiting for a conflict decision/,
    );
  });

  it('writes the details document: the record, the parameters, the messages and the log events', () => {
    const message: MessageSummary = {
      messageId: 'm-1',
      messageType: 'CONTROL',
      producerId: 'coordinator',
      recipientId: 'echo-1',
      state: 'FULFILLED',
      errorCode: '',
      correlationId: 't-1',
      contentType: 'application/json',
      size: 10,
      tracked: true,
      acceptedAt: 0,
      updatedAt: 1000,
    };
    const event = {
      id: 1,
      ts: '2026-01-01T00:00:00.000Z',
      level: 'INFO',
      actor: 'coordinator',
      eventType: 'scheduler.task_dispatched',
      correlationId: 't-1',
      details: { agent_id: 'echo-1' },
    } as unknown as StoredEvent;
    const text = taskDetailText(
      task({ state: 'COMPLETED', assignedAgentId: 'echo-1', note: 'done' }),
      [message],
      [event],
    );
    assert.match(text, /^Task t-1\n/);
    assert.match(text, /state {11}COMPLETED/);
    assert.match(text, /"text": "hi"/);
    assert.match(
      text,
      /Messages \(correlation id t-1\), newest first: 1\n.*CONTROL FULFILLED coordinator → echo-1 m-1/,
    );
    assert.match(text, /Log events \(correlation id t-1\), oldest first: 1\n.*scheduler\.task_dispatched/);
  });
});

describe("the Tasks view's menus (package.json ⇄ taskContextValue)", () => {
  const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../../package.json'), 'utf8')) as {
    contributes: { menus: Record<string, Array<{ command: string; when?: string }>> };
  };
  /** The states of the task rows a command is offered on in the Tasks view's context menu. */
  function offeredOn(command: string): string[] {
    const entries = manifest.contributes.menus['view/item/context'].filter(
      (e) => e.command === command && e.when?.startsWith(`view == ${Views.tasks} `),
    );
    assert.ok(entries.length, `${command} is in the Tasks view's context menu`);
    return TASK_STATES.filter((state) =>
      entries.every((e) => {
        const match = /viewItem =~ \/(.*)\/$/.exec(e.when ?? '');
        return match !== null && new RegExp(match[1]).test(taskContextValue({ state }));
      }),
    );
  }

  it('offers Preempt on dispatched and running tasks, Cancel on every open one, details on all', () => {
    assert.deepEqual(offeredOn(Commands.preemptTask), ['DISPATCHED', 'RUNNING']);
    assert.deepEqual(offeredOn(Commands.cancelTask), ['QUEUED', 'DISPATCHED', 'RUNNING', 'PREEMPTING']);
    assert.deepEqual(offeredOn(Commands.showTaskDetails), [...TASK_STATES]);
  });

  it('counts Running and Queued as "first N of M" when the view lists only the first, Done as the newest', () => {
    assert.equal(taskGroupDescription('queued', 200, 100_000, 50), 'first 200 of 100,000');
    assert.equal(taskGroupDescription('queued', 3, 3, 50), '3');
    assert.equal(taskGroupDescription('running', 2, undefined, 50), '2');
    assert.equal(taskGroupDescription('done', 50, undefined, 50), 'newest 50');
    assert.equal(taskGroupDescription('done', 7, undefined, 50), '7');
  });

  it("offers Shutdown Agent… on the Agents view's agent rows", () => {
    const entry = manifest.contributes.menus['view/item/context'].find((e) => e.command === Commands.shutdownAgent);
    assert.equal(entry?.when, `view == ${Views.agents} && viewItem =~ /^agent\\+/`);
  });
});

describe("the Tasks commands' notifications with the scheduler's own answers (real store, ManualClock)", () => {
  let h: SchedulerHarness;
  beforeEach(() => {
    h = new SchedulerHarness();
  });
  afterEach(() => h.dispose());

  // The core refuses only control characters in a task_id: an agent may choose one that a notification renders as a link.
  const LINK_ID = '[Stop](command:sw4rm.stop)';

  it('shows a refusal once with its code (the reason starts with it) and never a command link from a task id', () => {
    h.agent('a1');
    h.submitted('a1', 0, { taskId: LINK_ID });
    const refused = h.submit('a1', 0, { taskId: LINK_ID });
    assert.equal(refused.accepted, false);
    const text = submitResultText(refused).text;
    assert.match(text, /^Task refused: DUPLICATE_DETECTED: /);
    assert.equal(text.split('DUPLICATE_DETECTED').length, 2, `the code once: ${text}`);
    assert.doesNotMatch(text, /\[|\]\(/, text);
  });

  it('names an accepted task, the task it is serialised after and the preempted or cancelled task without a link', () => {
    h.agent('a1');
    const first = h.submit('a1', 0, { taskId: LINK_ID });
    assert.ok(first.accepted);
    const accepted = submitResultText(first).text;
    assert.equal(accepted, 'Task Stop(command:sw4rm.stop) accepted (priority 0), DISPATCHED on a1.');
    const second = h.submit('a1', 0, { taskId: `${LINK_ID}-2` });
    assert.ok(second.accepted);
    assert.doesNotMatch(submitResultText(second).text, /\[/);
    const serialised = submitResultText({
      accepted: true,
      task: second.task,
      reason: `serialised after task ${LINK_ID}`,
    }).text;
    assert.equal(
      serialised,
      `Task Stop(command:sw4rm.stop)-2 accepted (priority 0), queued: serialised after task Stop(command:sw4rm.stop).`,
    );
    assert.equal(taskActionText('cancel', `${LINK_ID}-2`, 'CANCELLED'), 'Task Stop(command:sw4rm.stop)-2: CANCELLED.');
    assert.doesNotMatch(taskActionText('preempt', LINK_ID, 'PREEMPTING'), /\[|\]/);
  });
});
