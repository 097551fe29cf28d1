import * as vscode from 'vscode';
import { Approvals } from './approvals';
import { Commands, OUTPUT_CHANNEL_NAME, Views } from './contributions';
import { CoordinatorController } from './coordinatorController';
import { affectsApprovals, affectsServer, readSettings } from './settings';
import { CoordinatorStatusBar } from './statusBar';
import { AgentsTreeProvider } from './views/agentsView';
import { CredentialsView } from './views/credentialsView';
import { DeadLettersView, type DeadLetterNode } from './views/deadLettersView';
import type { RecordNode } from './views/recordList';
import { Walkthrough } from './walkthrough';

let controller: CoordinatorController | undefined;

/** The composition root: builds every piece once and hands each its dependencies. */
export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel(OUTPUT_CHANNEL_NAME);
  const statusBar = new CoordinatorStatusBar();
  const agentsView = new AgentsTreeProvider();
  const deadLetters = new DeadLettersView();
  const approvals = new Approvals(context.extensionUri, output);
  const credentials = new CredentialsView(approvals.operator);
  controller = new CoordinatorController(context, output, statusBar, agentsView, deadLetters, approvals, credentials);
  const running = controller;
  const walkthrough = new Walkthrough(context);
  running.follow(walkthrough);

  context.subscriptions.push(
    output,
    statusBar,
    agentsView,
    deadLetters,
    approvals,
    credentials,
    vscode.window.createTreeView(Views.agents, { treeDataProvider: agentsView, showCollapseAll: true }),
    vscode.commands.registerCommand(Commands.start, () => running.start()),
    vscode.commands.registerCommand(Commands.stop, () => running.stop()),
    vscode.commands.registerCommand(Commands.restart, () => running.restart()),
    vscode.commands.registerCommand(Commands.copyAgentEnvironment, () => running.copyAgentEnvironment()),
    vscode.commands.registerCommand(Commands.showLog, () => output.show(true)),
    vscode.commands.registerCommand(Commands.showMetrics, () => running.showMetrics()),
    vscode.commands.registerCommand(Commands.requeueDeadLetter,
      (node?: DeadLetterNode, selected?: readonly DeadLetterNode[]) => deadLetters.requeue(asNode(node), selected?.filter(isNode))),
    vscode.commands.registerCommand(Commands.exportDeadLetters, () => deadLetters.exportBundle()),
    vscode.commands.registerCommand(Commands.filterDeadLetters, () => deadLetters.pickFilter()),
    vscode.commands.registerCommand(Commands.clearDeadLetterFilter, () => deadLetters.clearFilter()),
    vscode.commands.registerCommand(Commands.refreshDeadLetters, () => deadLetters.refresh()),
    vscode.commands.registerCommand(Commands.reviewApproval, (node?: unknown) => approvals.view.open(asRecordNode(node, 'approval'))),
    vscode.commands.registerCommand(Commands.cancelApproval, (node?: unknown) => approvals.view.cancel(asRecordNode(node, 'approval'))),
    vscode.commands.registerCommand(Commands.exportApprovalsAudit, () => approvals.view.exportAudit()),
    vscode.commands.registerCommand(Commands.refreshApprovals, () => approvals.view.refresh()),
    vscode.commands.registerCommand(Commands.pauseApprovals, () => approvals.setPaused(true)),
    vscode.commands.registerCommand(Commands.resumeApprovals, () => approvals.setPaused(false)),
    vscode.commands.registerCommand(Commands.mintAgentCredential, () => credentials.mint(running.running?.options.auth === 'none')),
    vscode.commands.registerCommand(Commands.revokeCredential, (node?: unknown) => credentials.revoke(asRecordNode(node, 'credential'))),
    walkthrough,
    vscode.commands.registerCommand(Commands.openWalkthrough, () => walkthrough.open()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (affectsApprovals(event)) approvals.settingsChanged();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!affectsServer(event) || !running.running) return;
      const choice = await vscode.window.showInformationMessage('SW4RM settings changed. Restart the coordinator to apply them?', 'Restart');
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
  return typeof value === 'object' && value !== null && (value as RecordNode<K>).kind === kind && typeof (value as RecordNode<K>).id === 'string'
    ? value as RecordNode<K> : undefined;
}
