import * as path from 'node:path';
import * as vscode from 'vscode';
import type {
  CoordinatorApi,
  HandoffView,
  WorkflowDetail,
  WorkflowFileIssue,
  WorkflowNodeView,
  WorkflowSummary,
} from '../core/api';
import { WORKFLOW_DIAGNOSTICS } from './contributions';
import { CoordinatorCommands, showError } from './coordinatorCommands';
import { notificationText } from './notificationText';
import { answerOf } from './quickPick';
import { requireRunning } from './notRunning';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import {
  HANDOFFS_LISTED,
  NODES_SHOWN,
  WORKFLOWS_LISTED,
  cancelReasonProblem,
  createdText,
  dataProblem,
  definitionFileName,
  handoffActionText,
  handoffDetailText,
  handoffNeedsYou,
  handoffRow,
  isDefinitionDocument,
  issueMessage,
  issueRange,
  nodeDetailText,
  nodeDocumentKey,
  nodeDocumentTitle,
  nodeNeedsYou,
  nodeRow,
  parseNodeDocumentKey,
  reasonProblem,
  refusalText,
  sortHandoffs,
  workflowActionText,
  workflowIsActive,
  workflowRow,
} from './workflowsModel';
import { asHandoffRow, asWorkflowNodeRow, asWorkflowRow, type WorkflowsView } from './views/workflowsView';

const NODE_DOCUMENT = 'workflowNode';
const HANDOFF_DOCUMENT = 'handoff';
const START_WORKFLOW = 'Start Workflow…';

/**
 * The Workflows view's commands: Create Workflow from File… (a JSON or YAML definition; refusals as problems in the file),
 * Start Workflow…, Run Node (MANUAL), Resume from Node…, Cancel Workflow…, Show Node Inputs and Outputs (a read-only
 * document); for handoffs routed to a person, Accept Handoff and Reject Handoff…, and Show Handoff. From the palette,
 * the workflow, node or handoff is picked.
 */
export class WorkflowCommands extends CoordinatorCommands implements vscode.Disposable {
  private readonly diagnostics = vscode.languages.createDiagnosticCollection(WORKFLOW_DIAGNOSTICS);

  constructor(
    private readonly operator: string,
    private readonly view: WorkflowsView,
    private readonly documents: ReadOnlyDocuments,
  ) {
    super();
    this.registerDocument(documents, NODE_DOCUMENT, async (api, key) => {
      const ids = parseNodeDocumentKey(key);
      if (!ids) return `Nothing to show for ${key}.\n`;
      // One node with its inputs (the coordinator works them out for this node only).
      const detail = await api.workflowNode(ids.workflowId, ids.nodeId);
      if (detail) return nodeDetailText(detail, Date.now());
      return (await api.workflow(ids.workflowId, 0))
        ? `Workflow ${ids.workflowId} has no node ${ids.nodeId}.\n`
        : `Workflow ${ids.workflowId} is not known to the coordinator.\n`;
    });
    this.registerDocument(documents, HANDOFF_DOCUMENT, async (api, key) => {
      const requestId = decodeURIComponent(key);
      const handoff = await api.handoff(requestId);
      return handoff
        ? handoffDetailText(handoff)
        : `Handoff ${requestId} is not known to the coordinator (ended handoffs are pruned after a while).\n`;
    });
  }

  /**
   * Create Workflow from File…: the file given (a URI), else the active editor's JSON or YAML document (its text as it is
   * in the editor, saved or not), else one picked. A refusal puts every issue on the file (Problems view) and names the
   * first error; success clears them (warnings stay, as warnings) and offers to start the workflow.
   */
  async createFromFile(target?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const document = await this.definitionDocument(target).catch(showError);
    if (!document) return;
    const shown = path.basename(document.uri.path) || 'untitled';
    let result;
    try {
      result = await api.createWorkflowFromText(
        document.getText(),
        definitionFileName(shown, document.languageId),
        this.operator,
      );
    } catch (err) {
      showError(err);
      return;
    }
    if (!result.ok) {
      this.diagnostics.set(
        document.uri,
        result.issues.map((issue) => diagnostic(document, issue)),
      );
      const choice = await vscode.window.showErrorMessage(refusalText(shown, result.issues), 'Show Problems');
      if (choice) await vscode.commands.executeCommand('workbench.actions.view.problems');
      return;
    }
    if (result.warnings.length)
      this.diagnostics.set(
        document.uri,
        result.warnings.map((issue) => diagnostic(document, issue)),
      );
    else this.diagnostics.delete(document.uri);
    this.view.refresh();
    const choice = await vscode.window.showInformationMessage(
      createdText(result.workflowId, result.warnings.length),
      START_WORKFLOW,
    );
    if (choice === START_WORKFLOW) await this.startWorkflow({ kind: 'workflow', id: result.workflowId });
  }

  /** Start Workflow…: the workflow of the row (or a DEFINED one picked), with initial workflow_data typed as JSON. */
  async startWorkflow(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const workflowId = await this.workflowOf(node, api, 'Start Workflow', (w) => w.state === 'DEFINED');
    if (!workflowId) return;
    const data = await vscode.window.showInputBox({
      title: notificationText(`Start Workflow ${workflowId}`),
      placeHolder: '{}',
      prompt: "Initial workflow_data (a JSON object): the nodes' input_mapping reads from it. Empty means {}.",
      validateInput: dataProblem,
      ignoreFocusOut: true,
    });
    if (data === undefined || this.api !== api) return;
    await this.report(
      () => api.startWorkflow(workflowId, data.trim(), this.operator),
      (d) => workflowActionText('start', d),
      `Workflow ${workflowId} was not started`,
    );
  }

  /** Run Node: a MANUAL node that is READY (its row's context menu, or picked). */
  async runNode(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const picked = await this.nodeOf(
      node,
      api,
      'Run Node',
      (w) => workflowIsActive(w.state),
      (n, d) => nodeNeedsYou(n, d.summary.state),
    );
    if (!picked) return;
    await this.report(
      () => api.runWorkflowNode(picked.workflowId, picked.nodeId, this.operator),
      (d) => workflowActionText('run', d, picked.nodeId),
      `Node ${picked.nodeId} did not run`,
    );
  }

  /** Resume from Node…: the node and what depends on it run again; the data typed (a JSON object) is merged over workflow_data. */
  async resumeFromNode(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const picked = await this.nodeOf(
      node,
      api,
      'Resume from Node',
      (w) => w.state !== 'DEFINED',
      () => true,
    );
    if (!picked) return;
    const data = await vscode.window.showInputBox({
      title: notificationText(`Resume ${picked.workflowId} from ${picked.nodeId}`),
      placeHolder: '{}',
      prompt:
        'Data merged over workflow_data before the node runs again (a JSON object; empty: none). The node and every node that ' +
        'depends on it run again; the other nodes keep their outputs.',
      validateInput: dataProblem,
      ignoreFocusOut: true,
    });
    if (data === undefined || this.api !== api) return;
    await this.report(
      () => api.resumeWorkflow(picked.workflowId, picked.nodeId, data.trim(), this.operator),
      (d) => workflowActionText('resume', d, picked.nodeId),
      `Workflow ${picked.workflowId} was not resumed`,
    );
  }

  /** Cancel Workflow…: running tasks cancelled, unfinished nodes SKIPPED, the workflow CANCELLED with the reason typed. */
  async cancelWorkflow(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const workflowId = await this.workflowOf(
      node,
      api,
      'Cancel Workflow',
      (w) => w.state === 'DEFINED' || workflowIsActive(w.state),
    );
    if (!workflowId) return;
    const reason = await vscode.window.showInputBox({
      title: notificationText(`Cancel Workflow ${workflowId}`),
      value: `cancelled from the editor by ${this.operator}`,
      prompt:
        'Why (kept with the workflow). Its running tasks are cancelled and its unfinished nodes SKIPPED. Escape keeps it running.',
      validateInput: cancelReasonProblem,
      ignoreFocusOut: true,
    });
    if (reason === undefined || this.api !== api) return;
    await this.report(
      () => api.cancelWorkflow(workflowId, reason.trim(), this.operator),
      (d) => workflowActionText('cancel', d),
      `Workflow ${workflowId} was not cancelled`,
    );
  }

  /** Show Node Inputs and Outputs: a read-only document (definition, state, runs, times, inputs, output, workflow data). */
  async showNode(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const picked = await this.nodeOf(
      node,
      api,
      'Show Node Inputs and Outputs',
      () => true,
      () => true,
    );
    if (picked)
      await this.documents.open(
        NODE_DOCUMENT,
        nodeDocumentKey(picked.workflowId, picked.nodeId),
        nodeDocumentTitle(picked.workflowId, picked.nodeId),
      );
  }

  async showHandoff(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const handoff = await this.handoffOf(node, api, 'Show Handoff', () => true);
    if (handoff)
      await this.documents.open(
        HANDOFF_DOCUMENT,
        encodeURIComponent(handoff.requestId),
        `handoff ${handoff.requestId.slice(0, 40)}.txt`,
      );
  }

  /** Accept Handoff: the operator takes a handoff that policy routed to a person. */
  async acceptHandoff(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const handoff = await this.handoffOf(node, api, 'Accept Handoff', handoffNeedsYou);
    if (!handoff) return;
    try {
      void vscode.window.showInformationMessage(
        handoffActionText('accept', await api.acceptHandoff(handoff.requestId, this.operator)),
      );
    } catch (err) {
      showError(err, `Handoff ${handoff.requestId} was not accepted`);
    }
  }

  /** Reject Handoff…: the reason (required) goes back to the requesting agent. */
  async rejectHandoff(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const handoff = await this.handoffOf(node, api, 'Reject Handoff', handoffNeedsYou);
    if (!handoff) return;
    const reason = await vscode.window.showInputBox({
      title: notificationText(`Reject Handoff ${handoff.requestId} from ${handoff.fromAgent}`),
      prompt: 'Why (required): the requesting agent receives this reason.',
      validateInput: reasonProblem,
      ignoreFocusOut: true,
    });
    if (reason === undefined || this.api !== api) return;
    try {
      void vscode.window.showInformationMessage(
        handoffActionText('reject', await api.rejectHandoff(handoff.requestId, reason.trim(), this.operator)),
      );
    } catch (err) {
      showError(err, `Handoff ${handoff.requestId} was not rejected`);
    }
  }

  dispose(): void {
    this.diagnostics.dispose();
  }

  // ---------------------------------------------------------------- what a command acts on

  private async definitionDocument(target: unknown): Promise<vscode.TextDocument | undefined> {
    if (target instanceof vscode.Uri) return await vscode.workspace.openTextDocument(target);
    const active = vscode.window.activeTextEditor?.document;
    if (active && active.uri.scheme !== 'output' && isDefinitionDocument(active.fileName, active.languageId))
      return active;
    const picked = await vscode.window.showOpenDialog({
      title: 'Create Workflow from File',
      canSelectMany: false,
      openLabel: 'Create Workflow',
      filters: { 'Workflow definitions (JSON, YAML)': ['json', 'yaml', 'yml'] },
      defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
    });
    return picked?.[0] ? await vscode.workspace.openTextDocument(picked[0]) : undefined;
  }

  /** The workflow of the row the command was run on, else of the selected row, else one picked among those that fit. */
  private async workflowOf(
    node: unknown,
    api: CoordinatorApi,
    title: string,
    fits: (w: WorkflowSummary) => boolean,
  ): Promise<string | undefined> {
    const row = asWorkflowRow(node);
    if (row) return row.id;
    // From the palette: the selected workflow when the command applies to it, else one picked.
    const selected = asWorkflowRow(this.view.selected());
    const summary = selected && this.view.summary(selected.id);
    if (summary && fits(summary)) return summary.workflowId;
    try {
      const workflows = (await api.workflows(WORKFLOWS_LISTED)).filter(fits);
      if (!workflows.length) {
        void vscode.window.showInformationMessage(`${title}: no workflow to pick.`);
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(
        workflows.map((w) => {
          const text = workflowRow(w);
          return { label: text.label, description: text.description, workflowId: w.workflowId };
        }),
        { title, placeHolder: 'Pick a workflow', matchOnDescription: true },
      );
      return picked?.workflowId;
    } catch (err) {
      return showError(err);
    }
  }

  /**
   * The node of the row the command was run on, else of the selected row, else one picked: a workflow among those that
   * fit, then one of its nodes that fit (the first NODES_SHOWN listed; typing an id finds any node).
   */
  private async nodeOf(
    node: unknown,
    api: CoordinatorApi,
    title: string,
    workflowFits: (w: WorkflowSummary) => boolean,
    nodeFits: (n: WorkflowNodeView, d: WorkflowDetail) => boolean,
  ): Promise<{ workflowId: string; nodeId: string } | undefined> {
    const row = asWorkflowNodeRow(node) ?? asWorkflowNodeRow(this.view.selected());
    if (row) return { workflowId: row.workflowId, nodeId: row.nodeId };
    const workflowId = await this.workflowOf(undefined, api, title, workflowFits);
    if (!workflowId) return undefined;
    try {
      const detail = await api.workflow(workflowId);
      if (!detail) {
        void vscode.window.showInformationMessage(
          notificationText(`Workflow ${workflowId} is not known to the coordinator.`),
        );
        return undefined;
      }
      const nodes = detail.nodes.filter((n) => nodeFits(n, detail));
      if (!nodes.length) {
        void vscode.window.showInformationMessage(notificationText(`${title}: no node of ${workflowId} to pick.`));
        return undefined;
      }
      const nodeId = await pickNode(`${title}: ${workflowId}`, nodes, detail);
      return nodeId ? { workflowId, nodeId } : undefined;
    } catch (err) {
      return showError(err);
    }
  }

  private async handoffOf(
    node: unknown,
    api: CoordinatorApi,
    title: string,
    fits: (h: HandoffView) => boolean,
  ): Promise<HandoffView | undefined> {
    const requestId = asHandoffRow(node)?.id ?? asHandoffRow(this.view.selected())?.id;
    try {
      if (requestId) {
        const handoff = await api.handoff(requestId);
        if (!handoff)
          void vscode.window.showInformationMessage(
            notificationText(`Handoff ${requestId} is not known to the coordinator.`),
          );
        return handoff;
      }
      const handoffs = sortHandoffs((await api.handoffs(HANDOFFS_LISTED)).filter(fits));
      if (!handoffs.length) {
        void vscode.window.showInformationMessage(`${title}: no handoff to pick.`);
        return undefined;
      }
      const now = Date.now();
      const picked = await vscode.window.showQuickPick(
        handoffs.map((h) => {
          const text = handoffRow(h, now);
          return { label: text.label, description: text.description, handoff: h };
        }),
        { title, placeHolder: 'Pick a handoff', matchOnDescription: true },
      );
      return picked?.handoff;
    } catch (err) {
      return showError(err);
    }
  }

  private async report(
    action: () => Promise<WorkflowDetail>,
    done: (d: WorkflowDetail) => string,
    failed: string,
  ): Promise<void> {
    try {
      const detail = await action();
      this.view.refresh();
      void vscode.window.showInformationMessage(done(detail));
    } catch (err) {
      showError(err, failed);
    }
  }
}

/** A node picked by id: the first NODES_SHOWN listed, any node found by typing (a workflow may have 100,000). */
async function pickNode(
  title: string,
  nodes: readonly WorkflowNodeView[],
  detail: WorkflowDetail,
): Promise<string | undefined> {
  type Item = vscode.QuickPickItem & { nodeId: string };
  const now = Date.now();
  const item = (n: WorkflowNodeView): Item => {
    const row = nodeRow(n, detail.summary.state, now);
    return { label: row.label, description: row.description, nodeId: n.definition.nodeId };
  };
  const first = nodes.slice(0, NODES_SHOWN).map(item);
  const quickPick = vscode.window.createQuickPick<Item>();
  quickPick.title = notificationText(title);
  quickPick.placeholder =
    nodes.length > NODES_SHOWN
      ? `Pick a node (the first ${NODES_SHOWN} of ${nodes.length} are listed; type to find any)`
      : 'Pick a node';
  quickPick.matchOnDescription = true;
  quickPick.items = first;
  if (nodes.length > NODES_SHOWN) {
    quickPick.onDidChangeValue((value) => {
      const typed = value.trim();
      quickPick.items = typed
        ? nodes
            .filter((n) => n.definition.nodeId.includes(typed))
            .slice(0, NODES_SHOWN)
            .map(item)
        : first;
    });
  }
  return (await answerOf(quickPick))?.nodeId;
}

/** One refusal or warning of a definition file as a problem on it. */
function diagnostic(document: vscode.TextDocument, issue: WorkflowFileIssue): vscode.Diagnostic {
  const range = issueRange(issue, (line) => (line < document.lineCount ? document.lineAt(line).text.length : 0));
  const found = new vscode.Diagnostic(
    new vscode.Range(range.startLine, range.startColumn, range.endLine, range.endColumn),
    issueMessage(issue),
    issue.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
  );
  found.source = WORKFLOW_DIAGNOSTICS;
  found.code = issue.code;
  return found;
}
