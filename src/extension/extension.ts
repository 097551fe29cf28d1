import * as vscode from 'vscode';
import { Approvals } from './approvals';
import { Commands, OUTPUT_CHANNEL_NAME, Views } from './contributions';
import { CoordinatorController } from './coordinatorController';
import { MainThreadHold } from './mainThreadHold';
import { WorkerCoordinator } from '../server/worker/workerCoordinator';
import { coordinatorScript } from './coordinatorController';
import { affectsApprovals, affectsServer, readSettings } from './settings';
import { RouterMetricsDocument } from './metricsDocument';
import { CoordinatorStatusBar } from './statusBar';
import { AgentsTreeProvider } from './views/agentsView';
import { CredentialsView } from './views/credentialsView';
import { DeadLettersView, type DeadLetterNode } from './views/deadLettersView';
import type { RecordNode } from './views/recordList';
import { MessageCommands, asAgentRow } from './messageCommands';
import { ReadOnlyDocuments } from './readOnlyDocuments';
import { MessagesView, type MessageNode } from './views/messagesView';
import { Walkthrough } from './walkthrough';
import { WorktreeCommands } from './worktreeCommands';
import { WorktreeState } from './worktreeState';
import { WorktreesTreeProvider } from './views/worktreesView';
import { TaskCommands } from './taskCommands';
import { TasksView } from './views/tasksView';
import { ActivityView } from './views/activityView';
import { SchedulerLimits } from './schedulerSettings';
import { affectsNegotiation, affectsSchedulerLimits, readNegotiationSettings, readSchedulerSettings } from './settings';
import { NegotiationSettingsFollower } from './negotiationSettings';
import { ToolCommands } from './toolCommands';
import { ToolsView } from './views/toolsView';
import { NegotiationsView, asNegotiationNode } from './views/negotiationsView';
import { NegotiationPanels } from './panels/negotiationPanel';
import { WorkflowCommands } from './workflowCommands';
import { WorkflowsView } from './views/workflowsView';
import { LaunchCommands } from './launchCommands';
import { LaunchedTerminals } from './launchedTerminals';
import { LaunchProfileSettingsFollower } from './launchSettings';
import { affectsLaunchProfiles, readLaunchProfileSettings } from './settings';

let controller: CoordinatorController | undefined;

/** The composition root: builds every piece once and hands each its dependencies. */
export function activate(context: vscode.ExtensionContext): void {
  const activatedAt = performance.now();
  // How long this thread (the extension host's, shared with every extension) is held, from now on.
  const hold = new MainThreadHold(vscode.Uri.joinPath(context.extensionUri, 'dist', 'extension.js').fsPath);
  // The coordinator's thread loads its script while the rest of activation runs here.
  if (readSettings(context).autoStart)
    WorkerCoordinator.prewarm(coordinatorScript(context), vscode.Uri.joinPath(context.extensionUri, 'protos').fsPath);
  const output = vscode.window.createOutputChannel(OUTPUT_CHANNEL_NAME);
  const statusBar = new CoordinatorStatusBar();
  const worktreeState = new WorktreeState();
  const approvals = new Approvals(context.extensionUri, output);
  const launchedTerminals = new LaunchedTerminals(
    approvals.operator,
    output,
    vscode.Uri.joinPath(context.extensionUri, 'dist', 'sw4rm-launch.js').fsPath,
  );
  const agentsView = new AgentsTreeProvider(worktreeState, launchedTerminals);
  const deadLetters = new DeadLettersView();
  const credentials = new CredentialsView(approvals.operator);
  controller = new CoordinatorController(context, output, statusBar, agentsView, deadLetters, approvals, credentials);
  const running = controller;
  const metrics = new RouterMetricsDocument();
  const documents = new ReadOnlyDocuments();
  const messages = new MessagesView(documents);
  const messageCommands = new MessageCommands(approvals.operator, messages, documents);
  const walkthrough = new Walkthrough(context);
  running.follow(walkthrough);
  const worktreesView = new WorktreesTreeProvider(worktreeState);
  const worktreeCommands = new WorktreeCommands(approvals.operator, worktreeState, documents, output);
  running.follow(worktreeState);
  running.follow(worktreeCommands);
  const tasksView = new TasksView();
  const taskCommands = new TaskCommands(approvals.operator, tasksView, documents);
  const activityView = new ActivityView(context.workspaceState);
  const schedulerLimits = new SchedulerLimits(readSchedulerSettings, approvals.operator, (problem) =>
    output.appendLine(`SW4RM settings: ${problem}`),
  );
  running.follow(tasksView);
  running.follow(taskCommands);
  running.follow(activityView);
  running.follow(schedulerLimits);
  // sw4rm.negotiation.* applies live: a change is a new policy version on the running coordinator.
  const negotiationPolicy = new NegotiationSettingsFollower(readNegotiationSettings, (problem) =>
    output.appendLine(`SW4RM settings: ${problem}`),
  );
  running.follow(negotiationPolicy);
  const toolsView = new ToolsView();
  const toolCommands = new ToolCommands(approvals.operator, toolsView, documents);
  running.follow(toolsView);
  running.follow(toolCommands);
  const negotiationsView = new NegotiationsView();
  const negotiationPanels = new NegotiationPanels(context.extensionUri, approvals.operator);
  running.follow(negotiationsView);
  running.follow(negotiationPanels);
  const workflowsView = new WorkflowsView();
  const workflowCommands = new WorkflowCommands(approvals.operator, workflowsView, documents);
  running.follow(workflowsView);
  running.follow(workflowCommands);
  // Launched agents: their terminals (reconciled with the launches at every start), the commands, the profiles setting.
  const launchCommands = new LaunchCommands(
    approvals.operator,
    launchedTerminals,
    worktreeState,
    output,
    context.extensionUri,
  );
  const launchProfiles = new LaunchProfileSettingsFollower(readLaunchProfileSettings, (issues) =>
    launchCommands.reportIssues(issues),
  );
  running.follow(launchedTerminals);
  running.follow(launchCommands);
  running.follow(launchProfiles);

  let listening = false;
  context.subscriptions.push(
    hold,
    running.onDidChangeApi((api) => {
      if (!api || listening) return;
      listening = true;
      const ms = performance.now() - activatedAt;
      hold.started(ms);
      output.appendLine(`SW4RM: activation to a listening coordinator took ${Math.round(ms)} ms`);
    }),
    output,
    statusBar,
    agentsView,
    deadLetters,
    approvals,
    credentials,
    metrics,
    running.onDidChangeApi((api) => metrics.bind(api)),
    vscode.window.createTreeView(Views.agents, { treeDataProvider: agentsView, showCollapseAll: true }),
    vscode.commands.registerCommand(Commands.start, () => running.start()),
    vscode.commands.registerCommand(Commands.stop, () => running.stop()),
    vscode.commands.registerCommand(Commands.restart, () => running.restart()),
    vscode.commands.registerCommand(Commands.simulateCrash, () => running.simulateCrash()),
    vscode.commands.registerCommand(Commands.copyAgentEnvironment, () => running.copyAgentEnvironment()),
    vscode.commands.registerCommand(Commands.showLog, () => output.show(true)),
    vscode.commands.registerCommand(Commands.showMetrics, () => metrics.show()),
    vscode.commands.registerCommand(Commands.copyMetrics, () => metrics.copy()),
    vscode.commands.registerCommand(Commands.exportMetrics, () => metrics.export()),
    vscode.commands.registerCommand(
      Commands.requeueDeadLetter,
      (node?: DeadLetterNode, selected?: readonly DeadLetterNode[]) =>
        deadLetters.requeue(asNode(node), selected?.filter(isNode)),
    ),
    vscode.commands.registerCommand(Commands.exportDeadLetters, () => deadLetters.exportBundle()),
    vscode.commands.registerCommand(Commands.filterDeadLetters, () => deadLetters.pickFilter()),
    vscode.commands.registerCommand(Commands.clearDeadLetterFilter, () => deadLetters.clearFilter()),
    vscode.commands.registerCommand(Commands.refreshDeadLetters, () => deadLetters.refresh()),
    vscode.commands.registerCommand(Commands.reviewApproval, (node?: unknown) =>
      approvals.view.open(asRecordNode(node, 'approval')),
    ),
    vscode.commands.registerCommand(Commands.cancelApproval, (node?: unknown) =>
      approvals.view.cancel(asRecordNode(node, 'approval')),
    ),
    vscode.commands.registerCommand(Commands.exportApprovalsAudit, () => approvals.view.exportAudit()),
    vscode.commands.registerCommand(Commands.refreshApprovals, () => approvals.view.refresh()),
    vscode.commands.registerCommand(Commands.pauseApprovals, () => approvals.setPaused(true)),
    vscode.commands.registerCommand(Commands.resumeApprovals, () => approvals.setPaused(false)),
    vscode.commands.registerCommand(Commands.mintAgentCredential, () =>
      credentials.mint(running.running?.options.auth === 'none'),
    ),
    vscode.commands.registerCommand(Commands.revokeCredential, (node?: unknown) =>
      credentials.revoke(asRecordNode(node, 'credential')),
    ),
    documents,
    messages,
    running.onDidChangeApi((api) => {
      messages.bind(api);
      messageCommands.bind(api);
    }),
    vscode.commands.registerCommand(Commands.openMessage, (node?: unknown) =>
      messages.open(
        typeof node === 'object' && node !== null && (node as MessageNode).kind === 'message'
          ? (node as MessageNode)
          : undefined,
      ),
    ),
    vscode.commands.registerCommand(Commands.filterMessages, () => messages.pickFilter()),
    vscode.commands.registerCommand(Commands.clearMessageFilter, () => messages.clearFilter()),
    vscode.commands.registerCommand(Commands.refreshMessages, () => messages.refresh()),
    vscode.commands.registerCommand(Commands.sendMessage, (node?: unknown) =>
      messageCommands.sendMessage(asAgentRow(node)),
    ),
    vscode.commands.registerCommand(Commands.copyAgentId, (node?: unknown) =>
      messageCommands.copyAgentId(asAgentRow(node)),
    ),
    vscode.commands.registerCommand(Commands.showAgentMessages, (node?: unknown) =>
      messageCommands.showAgentMessages(asAgentRow(node)),
    ),
    vscode.commands.registerCommand(Commands.showAgentLogEvents, (node?: unknown) =>
      messageCommands.showAgentLogEvents(asAgentRow(node)),
    ),
    vscode.commands.registerCommand(Commands.deregisterAgent, (node?: unknown) =>
      messageCommands.deregisterAgent(asAgentRow(node)),
    ),
    walkthrough,
    vscode.commands.registerCommand(Commands.openWalkthrough, () => walkthrough.open()),
    worktreeState,
    worktreesView,
    worktreeCommands,
    vscode.window.createTreeView(Views.worktrees, { treeDataProvider: worktreesView, showCollapseAll: true }),
    vscode.commands.registerCommand(Commands.bindAgentToWorktree, (node?: unknown) => worktreeCommands.bindAgent(node)),
    vscode.commands.registerCommand(Commands.openWorktreeInNewWindow, (node?: unknown) =>
      worktreeCommands.openInNewWindow(node),
    ),
    vscode.commands.registerCommand(Commands.showWorktreeChanges, (node?: unknown) =>
      worktreeCommands.showChanges(node),
    ),
    vscode.commands.registerCommand(Commands.mergeBackWorktree, (node?: unknown) => worktreeCommands.mergeBack(node)),
    vscode.commands.registerCommand(Commands.undoWorktreeMerge, (mergeId?: unknown) =>
      worktreeCommands.undoMerge(mergeId),
    ),
    vscode.commands.registerCommand(Commands.restoreWorktreeSnapshot, (node?: unknown) =>
      worktreeCommands.restoreSnapshot(node),
    ),
    vscode.commands.registerCommand(Commands.removeWorktree, (node?: unknown) => worktreeCommands.remove(node)),
    vscode.commands.registerCommand(Commands.pruneWorktrees, () => worktreeCommands.prune()),
    vscode.commands.registerCommand(Commands.refreshWorktrees, () => worktreeState.refresh()),
    tasksView,
    activityView,
    vscode.commands.registerCommand(Commands.submitTask, () => taskCommands.submitTask()),
    vscode.commands.registerCommand(Commands.preemptTask, (node?: unknown) => taskCommands.preemptTask(node)),
    vscode.commands.registerCommand(Commands.cancelTask, (node?: unknown) => taskCommands.cancelTask(node)),
    vscode.commands.registerCommand(Commands.showTaskDetails, (node?: unknown) => taskCommands.showTaskDetails(node)),
    vscode.commands.registerCommand(Commands.refreshTasks, () => tasksView.refresh()),
    vscode.commands.registerCommand(Commands.shutdownAgent, (node?: unknown) => taskCommands.shutdownAgent(node)),
    vscode.commands.registerCommand(Commands.toggleActivityGrouping, () => activityView.toggleGrouping()),
    toolsView,
    vscode.commands.registerCommand(Commands.showToolCallDetails, (node?: unknown) =>
      toolCommands.showToolCallDetails(node),
    ),
    vscode.commands.registerCommand(Commands.cancelToolCall, (node?: unknown) => toolCommands.cancelToolCall(node)),
    vscode.commands.registerCommand(Commands.copyToolCallId, (node?: unknown) => toolCommands.copyCallId(node)),
    vscode.commands.registerCommand(Commands.refreshTools, () => toolsView.refresh()),
    negotiationsView,
    negotiationPanels,
    vscode.commands.registerCommand(Commands.openNegotiation, (node?: unknown) => {
      const row = asNegotiationNode(node) ?? negotiationsView.selected();
      if (row) negotiationPanels.open({ kind: row.kind === 'debate' ? 'debate' : 'room', id: row.id });
      else void vscode.window.showInformationMessage('Select a debate or a room in the Negotiations view to open it.');
    }),
    vscode.commands.registerCommand(Commands.refreshNegotiations, () => negotiationsView.refresh()),
    workflowsView,
    workflowCommands,
    vscode.commands.registerCommand(Commands.createWorkflowFromFile, (target?: unknown) =>
      workflowCommands.createFromFile(target),
    ),
    vscode.commands.registerCommand(Commands.startWorkflow, (node?: unknown) => workflowCommands.startWorkflow(node)),
    vscode.commands.registerCommand(Commands.runWorkflowNode, (node?: unknown) => workflowCommands.runNode(node)),
    vscode.commands.registerCommand(Commands.resumeWorkflowFromNode, (node?: unknown) =>
      workflowCommands.resumeFromNode(node),
    ),
    vscode.commands.registerCommand(Commands.cancelWorkflow, (node?: unknown) => workflowCommands.cancelWorkflow(node)),
    vscode.commands.registerCommand(Commands.showWorkflowNode, (node?: unknown) => workflowCommands.showNode(node)),
    vscode.commands.registerCommand(Commands.refreshWorkflows, () => workflowsView.refresh()),
    vscode.commands.registerCommand(Commands.showHandoff, (node?: unknown) => workflowCommands.showHandoff(node)),
    vscode.commands.registerCommand(Commands.acceptHandoff, (node?: unknown) => workflowCommands.acceptHandoff(node)),
    vscode.commands.registerCommand(Commands.rejectHandoff, (node?: unknown) => workflowCommands.rejectHandoff(node)),
    launchedTerminals,
    vscode.commands.registerCommand(Commands.launchAgent, () => launchCommands.launchAgent()),
    vscode.commands.registerCommand(Commands.relaunchAgent, (node?: unknown) => launchCommands.relaunchAgent(node)),
    vscode.commands.registerCommand(Commands.showAgentTerminal, (node?: unknown) =>
      launchCommands.showAgentTerminal(node),
    ),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (affectsLaunchProfiles(event)) void launchProfiles.settingsChanged();
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (affectsSchedulerLimits(event)) void schedulerLimits.settingsChanged();
      if (affectsNegotiation(event)) void negotiationPolicy.settingsChanged();
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (affectsApprovals(event)) approvals.settingsChanged();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!affectsServer(event) || !running.running) return;
      const choice = await vscode.window.showInformationMessage(
        'SW4RM settings changed. Restart the coordinator to apply them?',
        'Restart',
      );
      if (choice) await running.restart();
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      if (!running.running && readSettings(context).autoStart) void running.start();
    }),
  );

  if (readSettings(context).autoStart) void running.start();
  void walkthrough.openOnFirstActivation();
}

/** Drains the server and closes the store before the extension host goes away. */
export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}

/** A command run from the palette or a keybinding gets no node, or something else entirely. */
function isNode(value: unknown): value is DeadLetterNode {
  return typeof value === 'object' && value !== null && (value as DeadLetterNode).kind === 'deadLetter';
}

function asNode(value: unknown): DeadLetterNode | undefined {
  return isNode(value) ? value : undefined;
}

/** The row a command was run on, if it was run on a row of that kind (not from the palette). */
function asRecordNode<K extends string>(value: unknown, kind: K): RecordNode<K> | undefined {
  return typeof value === 'object' &&
    value !== null &&
    (value as RecordNode<K>).kind === kind &&
    typeof (value as RecordNode<K>).id === 'string'
    ? (value as RecordNode<K>)
    : undefined;
}
