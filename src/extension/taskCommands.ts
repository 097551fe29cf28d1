import * as vscode from 'vscode';
import { CoordinatorApiError, type CoordinatorApi, type TaskRecord } from '../core/api';
import { CoordinatorCommands, messageOf, showError } from './coordinatorCommands';
import { asAgentRow } from './messageCommands';
import { notificationText } from './notificationText';
import { answerOf } from './quickPick';
import { requireRunning } from './notRunning';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import {
  DEFAULT_PRIORITY_TEXT,
  SCOPE_SYNTAX_HINT,
  paramsOf,
  paramsProblem,
  priorityProblem,
  scopeProblem,
  submitFailure,
  submitResultText,
  targetProblem,
  taskActionText,
  taskDetailText,
  taskRow,
  taskTargets,
  taskTitle,
} from './tasksModel';
import { asTaskNode, type TasksView } from './views/tasksView';

const TASK_DOCUMENT = 'task';
/** The log events a task's details show at most. */
const TASK_EVENTS_LIMIT = 200;
/** The Pick a task list: the first open tasks in dispatch order, and the newest finished ones. */
const PICK_TASKS_LISTED = 50;
const MAX_SHUTDOWN_GRACE_SECONDS = 3600;
/** The grace field's proposal: the coordinator's own default (ShutdownAgent without a grace). */
const DEFAULT_GRACE_TEXT = 'default';

/** The grace field as milliseconds: undefined for the default (empty or `default`), null when it is not valid. */
function graceMsOf(text: string): number | undefined | null {
  const value = text.trim();
  if (!value || value.toLowerCase() === DEFAULT_GRACE_TEXT) return undefined;
  const n = Number(value);
  return /^\d+$/.test(value) && n >= 1 && n <= MAX_SHUTDOWN_GRACE_SECONDS ? n * 1000 : null;
}

/**
 * The Tasks view's commands: Submit Task… (a form: agent or agent type, priority, scope, parameters), Preempt Task,
 * Cancel Task, Shutdown Agent… (also on the Agents view's rows) and Show Task Details (a read-only document).
 */
export class TaskCommands extends CoordinatorCommands {
  constructor(
    private readonly operator: string,
    private readonly view: TasksView,
    private readonly documents: ReadOnlyDocuments,
  ) {
    super();
    this.registerDocument(documents, TASK_DOCUMENT, async (api, key) => {
      const taskId = decodeURIComponent(key);
      const task = await api.task(taskId);
      if (!task) return `Task ${taskId} is no longer kept: the scheduler keeps the newest finished tasks only.\n`;
      const [messages, events] = await Promise.all([
        api.taskMessages(taskId),
        api.taskEvents(taskId, TASK_EVENTS_LIMIT),
      ]);
      return taskDetailText(task, messages, events);
    });
  }

  async submitTask(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const steps = 4;
    const title = (step: number) => `Submit Task (${step}/${steps})`;
    const target = await pickTarget(title(1), api).catch(showError);
    if (target === undefined) return;
    const priority = await vscode.window.showInputBox({
      title: title(2),
      value: DEFAULT_PRIORITY_TEXT,
      prompt: 'Priority: -19 is the highest, 20 the lowest; a higher-priority task preempts a running lower one.',
      validateInput: priorityProblem,
      ignoreFocusOut: true,
    });
    if (priority === undefined) return;
    const scope = await vscode.window.showInputBox({
      title: title(3),
      placeHolder: 'repo:myrepo/src/**',
      prompt: `Scope: what the task touches. ${SCOPE_SYNTAX_HINT}`,
      validateInput: scopeProblem,
      ignoreFocusOut: true,
    });
    if (scope === undefined) return;
    const params = await vscode.window.showInputBox({
      title: title(4),
      placeHolder: '{}',
      prompt: 'Parameters (JSON) the agent receives in the run command; empty means {}.',
      validateInput: paramsProblem,
      ignoreFocusOut: true,
    });
    if (params === undefined || this.api !== api) return;
    const result = await api
      .submitTask(
        { target, priority: Number(priority.trim()), scope: scope.trim(), params: paramsOf(params) },
        this.operator,
      )
      .catch((err: unknown) =>
        submitFailure(err instanceof CoordinatorApiError ? (err.sw4rmCode ?? err.code) : 'ERROR', messageOf(err)),
      );
    const answer = submitResultText(result);
    if (!answer.ok) {
      void vscode.window.showErrorMessage(answer.text);
      return;
    }
    const choice = await vscode.window.showInformationMessage(answer.text, 'Show Task Details');
    if (choice && result.accepted) await this.openDetails(result.task.taskId);
  }

  async preemptTask(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const taskId = await this.taskOf(
      node,
      api,
      'Preempt Task',
      (t) => t.state === 'RUNNING' || t.state === 'DISPATCHED',
    );
    if (!taskId) return;
    await this.run(
      () => api.preemptTask(taskId, `preempted from the editor by ${this.operator}`, this.operator),
      (t) => taskActionText('preempt', taskId, t.state),
    );
  }

  async cancelTask(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const taskId = await this.taskOf(
      node,
      api,
      'Cancel Task',
      (t) => t.state !== 'COMPLETED' && t.state !== 'FAILED' && t.state !== 'CANCELLED',
    );
    if (!taskId) return;
    const choice = await vscode.window.showWarningMessage(
      notificationText(`Cancel task ${taskId}?`),
      {
        modal: true,
        detail: 'A queued task leaves the queue; a running one is told to terminate. It ends CANCELLED.',
      },
      'Cancel Task',
    );
    if (choice !== 'Cancel Task' || this.api !== api) return;
    await this.run(
      () => api.cancelTask(taskId, `cancelled from the editor by ${this.operator}`, this.operator),
      (t) => taskActionText('cancel', taskId, t.state),
    );
  }

  /** ShutdownAgent (RFC §8.4): the agent of a row (Agents view) or picked; the grace in seconds is asked. */
  async shutdownAgent(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const agentId = asAgentRow(node)?.agentId ?? (await pickAgent(api).catch(showError));
    if (!agentId) return;
    const grace = await vscode.window.showInputBox({
      title: `Shutdown Agent ${agentId}`,
      value: DEFAULT_GRACE_TEXT,
      prompt:
        "Grace in seconds (default: the coordinator's): the agent is sent shutdown and gets no new task; past the grace it is " +
        'FAILED (agent_shutdown_timeout) and deregistered.',
      validateInput: (text) =>
        graceMsOf(text) !== null
          ? undefined
          : `"${DEFAULT_GRACE_TEXT}" or a whole number of seconds from 1 to ${MAX_SHUTDOWN_GRACE_SECONDS}.`,
      ignoreFocusOut: true,
    });
    if (grace === undefined || this.api !== api) return;
    try {
      const graceMs = graceMsOf(grace) ?? undefined;
      await api.shutdownAgent(agentId, graceMs, this.operator);
      void vscode.window.showInformationMessage(
        notificationText(
          `Agent ${agentId} is shutting down (${graceMs === undefined ? 'default grace' : `grace ${grace.trim()} s`}).`,
        ),
      );
    } catch (err) {
      void vscode.window.showErrorMessage(notificationText(`Agent ${agentId} was not shut down: ${messageOf(err)}`));
    }
  }

  async showTaskDetails(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const taskId =
      asTaskNode(node)?.id ??
      this.view.selectedTaskId() ??
      (await this.pickTask(api, 'Show Task Details', () => true).catch(showError));
    if (taskId) await this.openDetails(taskId);
  }

  private async openDetails(taskId: string): Promise<void> {
    await this.documents.open(TASK_DOCUMENT, encodeURIComponent(taskId), `${taskTitle(taskId)}.txt`);
  }

  private async taskOf(
    node: unknown,
    api: CoordinatorApi,
    title: string,
    fits: (t: TaskRecord) => boolean,
  ): Promise<string | undefined> {
    return asTaskNode(node)?.id ?? (await this.pickTask(api, title, fits).catch(showError));
  }

  private async pickTask(
    api: CoordinatorApi,
    title: string,
    fits: (t: TaskRecord) => boolean,
  ): Promise<string | undefined> {
    // The first open tasks only (there may be 100,000 queued); a task further down is picked from its row in the view.
    const tasks = (
      await api.tasks({ includeFinished: true, openLimit: PICK_TASKS_LISTED, finishedLimit: PICK_TASKS_LISTED })
    ).filter(fits);
    if (!tasks.length) {
      void vscode.window.showInformationMessage(`${title}: no task to pick.`);
      return undefined;
    }
    const counts = await api.taskCounts();
    const open = counts.queued + counts.running;
    const picked = await vscode.window.showQuickPick(
      tasks.map((t) => {
        const row = taskRow(t);
        return { label: row.label, description: row.description, taskId: t.taskId };
      }),
      {
        title,
        matchOnDescription: true,
        placeHolder:
          open > PICK_TASKS_LISTED
            ? `Pick a task (the first ${PICK_TASKS_LISTED} of ${open} open tasks are listed)`
            : 'Pick a task',
      },
    );
    return picked?.taskId;
  }

  private async run(action: () => Promise<TaskRecord>, done: (t: TaskRecord) => string): Promise<void> {
    try {
      void vscode.window.showInformationMessage(done(await action()));
    } catch (err) {
      showError(err);
    }
  }
}

/** The task's target: a registered agent, an agent type, or one typed (checked: an agent id or `type:<name>`). */
async function pickTarget(title: string, api: CoordinatorApi): Promise<string | undefined> {
  const targets = taskTargets(await api.agents());
  type Item = vscode.QuickPickItem & { target: string };
  const listed: Item[] = targets.map((t) => ({ label: t.target, description: t.description, target: t.target }));
  const quickPick = vscode.window.createQuickPick<Item>();
  quickPick.title = title;
  quickPick.placeholder = 'An agent, or type:<agent type> for any RUNNABLE agent of that type (type one to use it)';
  quickPick.items = listed;
  quickPick.ignoreFocusOut = true;
  quickPick.onDidChangeValue((value) => {
    const typed = value.trim();
    const problem = typed ? targetProblem(typed) : undefined;
    // A typed target is offered first; one that cannot be sent says why and is not accepted.
    quickPick.items =
      typed && !listed.some((i) => i.target === typed)
        ? [{ label: typed, description: problem ?? 'as typed', target: typed, alwaysShow: true }, ...listed]
        : listed;
  });
  return (await answerOf(quickPick, (item) => item !== undefined && !targetProblem(item.target)))?.target;
}

async function pickAgent(api: CoordinatorApi): Promise<string | undefined> {
  const agents = await api.agents();
  if (!agents.length) {
    void vscode.window.showInformationMessage('No agent is registered.');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    agents.map((a) => ({
      label: a.descriptor.agentId,
      description: `${a.descriptor.name} · ${a.state} · ${a.presence}`,
    })),
    { title: 'Shutdown Agent', placeHolder: 'Pick the agent to shut down', matchOnDescription: true },
  );
  return picked?.label;
}
