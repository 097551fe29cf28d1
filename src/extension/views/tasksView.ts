import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, TaskCounts, TaskRecord } from '../../core/api';
import { Commands, Views } from '../contributions';
import {
  TASK_GROUPS,
  TASK_GROUP_LABELS,
  groupTasks,
  taskContextValue,
  taskGroupDescription,
  taskRow,
  type TaskGroup,
} from '../tasksModel';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { groupItem, rowItem } from './rowItem';

export type TasksNode =
  { readonly kind: 'taskGroup'; readonly group: TaskGroup } | { readonly kind: 'task'; readonly id: string };

/** The scheduler fires on every submission, dispatch and ACK; the view asks for its rows at most this often, while visible. */
const TASKS_REFRESH_MS = 500;
/** Finished tasks the Done group lists (newest ended first). */
const DONE_TASKS_LISTED = 50;
/** Open tasks the view lists at most, the first in dispatch order (the queue may hold 100,000); the groups say how many there are. */
const OPEN_TASKS_LISTED = 200;

/** The task row a command was run on, if it was run on one (not from the palette). */
export function asTaskNode(value: unknown): Extract<TasksNode, { kind: 'task' }> | undefined {
  return typeof value === 'object' &&
    value !== null &&
    (value as TasksNode).kind === 'task' &&
    typeof (value as { id: unknown }).id === 'string'
    ? (value as Extract<TasksNode, { kind: 'task' }>)
    : undefined;
}

class TasksTreeProvider extends CoordinatorRows<TasksNode> {
  private readonly groupNodes = new Map<TaskGroup, TasksNode>(
    TASK_GROUPS.map((group) => [group, { kind: 'taskGroup', group }]),
  );
  private readonly taskNodes = new NodeCache<TasksNode>();
  /** The tasks of the last listing, by group: the groups' children come from the same listing as their counts. */
  private groups: Record<TaskGroup, TaskRecord[]> = { running: [], queued: [], done: [] };
  /** How many tasks are running and queued, listed or not. */
  private counts: TaskCounts = { queued: 0, running: 0 };
  private readonly records = new Map<string, TaskRecord>();

  record(taskId: string): TaskRecord | undefined {
    return this.records.get(taskId);
  }

  async getChildren(node?: TasksNode): Promise<TasksNode[]> {
    if (node?.kind === 'task') return [];
    if (node?.kind === 'taskGroup')
      return this.groups[node.group].map((t) => this.taskNodes.get(t.taskId, () => ({ kind: 'task', id: t.taskId })));
    const listing = await this.listed((api) =>
      Promise.all([
        api
          .tasks({ includeFinished: true, openLimit: OPEN_TASKS_LISTED, finishedLimit: DONE_TASKS_LISTED })
          .catch(() => [] as TaskRecord[]),
        api.taskCounts().catch(() => undefined),
      ]),
    );
    if (!listing) return [];
    const [tasks, counts] = listing;
    this.groups = groupTasks(tasks);
    this.counts = counts ?? { queued: this.groups.queued.length, running: this.groups.running.length };
    this.records.clear();
    for (const t of tasks) this.records.set(t.taskId, t);
    this.taskNodes.keepOnly(this.records);
    // No task at all: no groups, so that the welcome (Submit Task…) shows.
    return tasks.length ? TASK_GROUPS.map((group) => this.groupNodes.get(group)!) : [];
  }

  getTreeItem(node: TasksNode): vscode.TreeItem {
    if (node.kind === 'taskGroup') {
      const count = this.groups[node.group].length;
      return groupItem(
        'taskGroup',
        node.group,
        TASK_GROUP_LABELS[node.group],
        taskGroupDescription(
          node.group,
          count,
          node.group === 'done' ? undefined : this.counts[node.group],
          DONE_TASKS_LISTED,
        ),
      );
    }
    const task = this.records.get(node.id);
    if (!task) return new vscode.TreeItem(`task ${node.id}`);
    return rowItem(`task:${task.taskId}`, taskRow(task), {
      contextValue: taskContextValue(task),
      iconPath: stateIcon(task),
      command: { command: Commands.showTaskDetails, title: 'Show Task Details', arguments: [node] },
    });
  }
}

function stateIcon(task: TaskRecord): vscode.ThemeIcon {
  switch (task.state) {
    case 'COMPLETED':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'FAILED':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
    case 'CANCELLED':
      return new vscode.ThemeIcon('circle-slash');
    case 'QUEUED':
      return new vscode.ThemeIcon(task.waiting ? 'watch' : 'clock');
    case 'PREEMPTING':
      return new vscode.ThemeIcon('debug-pause');
    default:
      return new vscode.ThemeIcon('sync~spin');
  }
}

/**
 * The Tasks view: Running, Queued (in dispatch order, with why each waits) and Done (newest first); each row the task
 * id, priority, agent, state and scope. Live: it follows the scheduler's task changes, throttled, while it is visible.
 */
export class TasksView extends LiveTreeView<TasksNode, TasksTreeProvider> {
  constructor() {
    super(new TasksTreeProvider(), Views.tasks, TASKS_REFRESH_MS, { showCollapseAll: true });
  }

  /** The task of the selected row, if a task row is selected. */
  selectedTaskId(): string | undefined {
    const node = this.view.selection[0];
    return node?.kind === 'task' ? node.id : undefined;
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeTasks(changed)];
  }
}
