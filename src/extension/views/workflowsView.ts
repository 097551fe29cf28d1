import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, HandoffView, WorkflowDetail, WorkflowSummary } from '../../core/api';
import { Commands, Views } from '../contributions';
import {
  HANDOFFS_LISTED,
  NODES_SHOWN,
  WORKFLOWS_LISTED,
  WORKFLOW_SECTIONS,
  WORKFLOW_SECTION_LABELS,
  handoffRow,
  moreNodesRow,
  nodeRow,
  sectionDescription,
  shownNodes,
  sortHandoffs,
  workflowIsActive,
  workflowRow,
  type WorkflowRow,
  type WorkflowSection,
} from '../workflowsModel';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { groupItem, rowItem, themeIcon, type RowItemOptions } from './rowItem';

export type WorkflowsNode =
  | { readonly kind: 'workflowSection'; readonly section: WorkflowSection }
  | { readonly kind: 'workflow'; readonly id: string }
  | { readonly kind: 'workflowNode'; readonly workflowId: string; readonly nodeId: string }
  | { readonly kind: 'moreNodes'; readonly workflowId: string }
  | { readonly kind: 'handoff'; readonly id: string };

export type WorkflowRowNode = Extract<WorkflowsNode, { kind: 'workflow' }>;
export type WorkflowNodeRowNode = Extract<WorkflowsNode, { kind: 'workflowNode' }>;
export type HandoffRowNode = Extract<WorkflowsNode, { kind: 'handoff' }>;

/** Workflows change on every node transition; the view asks for its rows at most this often, while visible. */
const WORKFLOWS_REFRESH_MS = 500;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** The workflow row a command was run on, if it was (not from the palette). */
export function asWorkflowRow(value: unknown): WorkflowRowNode | undefined {
  return isObject(value) && value.kind === 'workflow' && typeof value.id === 'string'
    ? (value as WorkflowRowNode)
    : undefined;
}

/** The node row a command was run on, if it was. */
export function asWorkflowNodeRow(value: unknown): WorkflowNodeRowNode | undefined {
  return isObject(value) &&
    value.kind === 'workflowNode' &&
    typeof value.workflowId === 'string' &&
    typeof value.nodeId === 'string'
    ? (value as WorkflowNodeRowNode)
    : undefined;
}

/** The handoff row a command was run on, if it was. */
export function asHandoffRow(value: unknown): HandoffRowNode | undefined {
  return isObject(value) && value.kind === 'handoff' && typeof value.id === 'string'
    ? (value as HandoffRowNode)
    : undefined;
}

class WorkflowsTreeProvider extends CoordinatorRows<WorkflowsNode> {
  private readonly sectionNodes = new Map<WorkflowSection, WorkflowsNode>(
    WORKFLOW_SECTIONS.map((section) => [section, { kind: 'workflowSection', section }]),
  );
  private workflows: WorkflowSummary[] = [];
  private handoffs: HandoffView[] = [];
  /** The details read for the workflows whose nodes are shown (an expanded row asks again at each refresh). */
  private readonly details = new Map<string, WorkflowDetail>();
  private readonly nodes = new NodeCache<WorkflowsNode>();

  summary(workflowId: string): WorkflowSummary | undefined {
    return this.workflows.find((w) => w.workflowId === workflowId);
  }

  async getChildren(node?: WorkflowsNode): Promise<WorkflowsNode[]> {
    if (!node) return this.roots();
    switch (node.kind) {
      case 'workflowSection':
        return node.section === 'workflows'
          ? this.workflows.map((w) =>
              this.nodes.get(`w:${w.workflowId}`, () => ({ kind: 'workflow', id: w.workflowId })),
            )
          : this.handoffs.map((h) => this.nodes.get(`h:${h.requestId}`, () => ({ kind: 'handoff', id: h.requestId })));
      case 'workflow': {
        // The nodes shown only (the first NODES_SHOWN) and the counts: a refresh costs what it shows, not the workflow's size.
        const detail = await this.listed((api) => api.workflow(node.id, NODES_SHOWN).catch(() => undefined));
        if (!detail) return [];
        this.details.set(node.id, detail);
        const { nodes, hidden } = shownNodes(detail);
        const rows: WorkflowsNode[] = nodes.map((n) =>
          this.nodes.get(`n:${node.id}\u0000${n.definition.nodeId}`, () => ({
            kind: 'workflowNode',
            workflowId: node.id,
            nodeId: n.definition.nodeId,
          })),
        );
        if (hidden) rows.push(this.nodes.get(`m:${node.id}`, () => ({ kind: 'moreNodes', workflowId: node.id })));
        return rows;
      }
      default:
        return [];
    }
  }

  getTreeItem(node: WorkflowsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'workflowSection':
        return groupItem(
          'workflowSection',
          node.section,
          WORKFLOW_SECTION_LABELS[node.section],
          sectionDescription(node.section, this.workflows, this.handoffs),
        );
      case 'workflow': {
        const summary = this.summary(node.id);
        if (!summary) return new vscode.TreeItem(node.id);
        return workflowItem(`workflow:${node.id}`, workflowRow(summary), {
          collapsible:
            summary.nodeCount === 0
              ? vscode.TreeItemCollapsibleState.None
              : workflowIsActive(summary.state)
                ? vscode.TreeItemCollapsibleState.Expanded
                : vscode.TreeItemCollapsibleState.Collapsed,
        });
      }
      case 'workflowNode': {
        const detail = this.details.get(node.workflowId);
        const view = detail?.nodes.find((n) => n.definition.nodeId === node.nodeId);
        if (!detail || !view) return new vscode.TreeItem(node.nodeId);
        return workflowItem(
          `workflowNode:${node.workflowId}\u0000${node.nodeId}`,
          nodeRow(view, detail.summary.state, Date.now()),
          {
            command: { command: Commands.showWorkflowNode, title: 'Show Node Inputs and Outputs', arguments: [node] },
          },
        );
      }
      case 'moreNodes': {
        const detail = this.details.get(node.workflowId);
        const total = detail?.summary.nodeCount ?? 0;
        const row = moreNodesRow(detail ? shownNodes(detail).nodes.length : 0, total);
        const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
        item.id = `moreNodes:${node.workflowId}`;
        item.tooltip = row.tooltip;
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.contextValue = 'workflowMoreNodes';
        return item;
      }
      case 'handoff': {
        const handoff = this.handoffs.find((h) => h.requestId === node.id);
        if (!handoff) return new vscode.TreeItem(node.id);
        return workflowItem(`handoff:${node.id}`, handoffRow(handoff, Date.now()), {
          command: { command: Commands.showHandoff, title: 'Show Handoff', arguments: [node] },
        });
      }
    }
  }

  private async roots(): Promise<WorkflowsNode[]> {
    const listing = await this.listed((api) =>
      Promise.all([
        api.workflows(WORKFLOWS_LISTED).catch(() => [] as WorkflowSummary[]),
        api.handoffs(HANDOFFS_LISTED).catch(() => [] as HandoffView[]),
      ]),
    );
    if (!listing) return [];
    const [workflows, handoffs] = listing;
    this.workflows = workflows;
    this.handoffs = sortHandoffs(handoffs);
    const keep = new Set([...workflows.map((w) => w.workflowId)]);
    for (const id of [...this.details.keys()]) if (!keep.has(id)) this.details.delete(id);
    this.nodes.retain((node) =>
      node.kind === 'handoff'
        ? this.handoffs.some((h) => h.requestId === node.id)
        : node.kind === 'workflow'
          ? keep.has(node.id)
          : node.kind === 'workflowNode' || node.kind === 'moreNodes'
            ? keep.has(node.workflowId)
            : true,
    );
    // Nothing at all: no sections, so that the welcome (Create Workflow from File…) shows.
    return workflows.length || handoffs.length
      ? WORKFLOW_SECTIONS.map((section) => this.sectionNodes.get(section)!)
      : [];
  }
}

function workflowItem(
  id: string,
  row: WorkflowRow,
  options: Pick<RowItemOptions, 'collapsible' | 'command'>,
): vscode.TreeItem {
  const color =
    row.tone === 'passed'
      ? 'testing.iconPassed'
      : row.tone === 'failed'
        ? 'problemsErrorIcon.foreground'
        : row.tone === 'warning'
          ? 'notificationsWarningIcon.foreground'
          : undefined;
  return rowItem(id, row, { contextValue: row.contextValue, iconPath: themeIcon(row.icon, color), ...options });
}

/**
 * The Workflows view: Workflows (each with its state, `n/m done` and what runs or why it waits; under it its nodes with
 * status, agent, duration and the reason they wait or failed) and Handoffs (pending first, then accepted, completed and
 * the rest: who to whom, state, reason; those routed to a person marked `needs you`). Live: it follows the workflow
 * and handoff areas' changes, throttled, while it is visible.
 */
export class WorkflowsView extends LiveTreeView<WorkflowsNode, WorkflowsTreeProvider> {
  constructor() {
    super(new WorkflowsTreeProvider(), Views.workflows, WORKFLOWS_REFRESH_MS, { showCollapseAll: true });
  }

  /** The workflow of the last listing with this id, if it was listed. */
  summary(workflowId: string): WorkflowSummary | undefined {
    return this.rows.summary(workflowId);
  }

  /** The selected row, if any. */
  selected(): WorkflowsNode | undefined {
    return this.view.selection[0];
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeWorkflows(changed), api.onDidChangeHandoffs(changed)];
  }
}
