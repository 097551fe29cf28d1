import * as vscode from 'vscode';
import type { CoordinatorApi, ToolCallRecord } from '../core/api';
import { CoordinatorCommands, showError } from './coordinatorCommands';
import { notificationText } from './notificationText';
import { requireRunning } from './notRunning';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import { RECENT_CALLS_LISTED, callDetailText, callRow, callTitle, cancelResultText, isOpenCall } from './toolsModel';
import { asToolCallNode, type ToolsView } from './views/toolsView';

const TOOL_CALL_DOCUMENT = 'toolCall';

/**
 * The Tools view's commands: Show Tool Call Details (a read-only document: record, policy, args, frames, error),
 * Cancel Tool Call (as the caller would: RFC §18.6) and Copy Call Id. From the palette, a call is picked.
 */
export class ToolCommands extends CoordinatorCommands {
  constructor(
    private readonly operator: string,
    private readonly view: ToolsView,
    private readonly documents: ReadOnlyDocuments,
  ) {
    super();
    this.registerDocument(documents, TOOL_CALL_DOCUMENT, async (api, key) => {
      const callId = decodeURIComponent(key);
      const details = await api.toolCallDetails(callId);
      if (!details) return `Tool call ${callId} is no longer kept: the coordinator keeps the newest calls only.\n`;
      return callDetailText(details, Date.now());
    });
  }

  async showToolCallDetails(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const call = await this.callOf(node, api, 'Show Tool Call Details', () => true);
    if (call) await this.documents.open(TOOL_CALL_DOCUMENT, encodeURIComponent(call.callId), `${callTitle(call)}.txt`);
  }

  async cancelToolCall(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const call = await this.callOf(node, api, 'Cancel Tool Call', isOpenCall);
    if (!call) return;
    const choice = await vscode.window.showWarningMessage(
      notificationText(`Cancel tool call ${call.providerId}/${call.toolName} of ${call.callerAgentId}?`),
      {
        modal: true,
        detail:
          'The provider is told to stop; the caller gets a terminal frame saying the call was cancelled (with what it produced so far).',
      },
      'Cancel Tool Call',
    );
    if (choice !== 'Cancel Tool Call' || this.api !== api) return;
    try {
      const answer = cancelResultText(call.callId, await api.cancelToolCall(call.callId, this.operator));
      if (answer.ok) void vscode.window.showInformationMessage(notificationText(answer.text));
      else void vscode.window.showWarningMessage(notificationText(answer.text));
    } catch (err) {
      showError(err);
    }
  }

  async copyCallId(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const call = await this.callOf(node, api, 'Copy Call Id', () => true);
    if (!call) return;
    await vscode.env.clipboard.writeText(call.callId);
    void vscode.window.setStatusBarMessage(`Copied call id ${call.callId}`, 3_000);
  }

  /** The call of the row the command was run on, else the selected one, else one picked from the newest calls that fit. */
  private async callOf(
    node: unknown,
    api: CoordinatorApi,
    title: string,
    fits: (c: ToolCallRecord) => boolean,
  ): Promise<ToolCallRecord | undefined> {
    const callId = asToolCallNode(node)?.id ?? this.view.selectedCallId();
    try {
      if (callId) {
        const details = await api.toolCallDetails(callId);
        if (details) return details.record;
        void vscode.window.showInformationMessage(notificationText(`Tool call ${callId} is no longer kept.`));
        return undefined;
      }
      const calls = (await api.toolCalls(RECENT_CALLS_LISTED)).filter(fits);
      if (!calls.length) {
        void vscode.window.showInformationMessage(`${title}: no tool call to pick.`);
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(
        calls.map((c) => {
          const row = callRow(c);
          return { label: row.label, description: row.description, detail: c.callId, call: c };
        }),
        {
          title,
          placeHolder: 'Pick a tool call (the newest are listed)',
          matchOnDescription: true,
          matchOnDetail: true,
        },
      );
      return picked?.call;
    } catch (err) {
      return showError(err);
    }
  }
}
