import * as vscode from 'vscode';
import { AGENT_EVENTS_SCAN_WINDOW, type CoordinatorApi, type CoordinatorSendContentType } from '../core/api';
import { CoordinatorCommands, messageOf } from './coordinatorCommands';
import { agentEventsText, isJson, refusalText } from './messagesModel';
import { requireRunning } from './notRunning';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import type { MessagesView } from './views/messagesView';

/** A row of the Agents view, as its context menu hands it to a command (contextValue `agent+<presence>`). */
export interface AgentRowNode {
  readonly kind: 'agent';
  readonly agentId: string;
}

/** The agent row a command was run on, if it was run on one (not from the palette). */
export function asAgentRow(value: unknown): AgentRowNode | undefined {
  return typeof value === 'object' &&
    value !== null &&
    (value as AgentRowNode).kind === 'agent' &&
    typeof (value as AgentRowNode).agentId === 'string'
    ? (value as AgentRowNode)
    : undefined;
}

const AGENT_LOG_DOCUMENT = 'agent-log';
/** The newest events an agent's log document shows. */
const AGENT_LOG_LIMIT = 1000;

/**
 * Send Message… and the Agents view's context menu (Copy Agent Id, Show Agent's Messages, Show Agent's Log Events,
 * Deregister Agent), over the running coordinator's API.
 */
export class MessageCommands extends CoordinatorCommands {
  constructor(
    private readonly operator: string,
    private readonly messages: MessagesView,
    private readonly documents: ReadOnlyDocuments,
  ) {
    super();
    this.registerDocument(documents, AGENT_LOG_DOCUMENT, async (api, agentId) => {
      return agentEventsText(agentId, await api.agentEvents(agentId, AGENT_LOG_LIMIT), AGENT_EVENTS_SCAN_WINDOW);
    });
  }

  /**
   * Sends a DATA message as `coordinator`: the recipient (the row's agent, or picked), then the payload (typed, the
   * active editor's selection or text, or a file) and its content type (application/json or text/plain). Says
   * whether it was accepted (with the message id) or refused (the code and what it means).
   */
  async sendMessage(row?: AgentRowNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const to = row?.agentId ?? (await this.pickRecipient(api));
    if (!to) return;
    const payload = await pickPayload(to);
    if (payload === undefined) return;
    const contentType = await pickContentType(payload);
    if (!contentType || this.api !== api) return;
    const result = await api
      .sendMessage({ to, contentType, payload }, this.operator)
      .catch((err: unknown) => ({ accepted: false as const, code: '', reason: messageOf(err) }));
    if (result.accepted) {
      const choice = await vscode.window.showInformationMessage(
        `Sent message ${result.messageId} to ${to} (${contentType}).`,
        'Open Message',
      );
      if (choice) await this.messages.open({ kind: 'message', id: result.messageId });
    } else {
      void vscode.window.showWarningMessage(
        `The message to ${to} was not accepted: ${result.code ? refusalText(result.code, result.reason) : result.reason}`,
      );
    }
  }

  async copyAgentId(row?: AgentRowNode): Promise<void> {
    const agentId = row?.agentId ?? (await this.pickAgent('Copy Agent Id'));
    if (!agentId) return;
    await vscode.env.clipboard.writeText(agentId);
    vscode.window.setStatusBarMessage(`Copied agent id ${agentId}`, 3000);
  }

  async showAgentMessages(row?: AgentRowNode): Promise<void> {
    const agentId = row?.agentId ?? (await this.pickAgent("Show Agent's Messages"));
    if (agentId) await this.messages.showAgent(agentId);
  }

  /** The agent's events from the log (its own and those naming it) in a read-only document. */
  async showAgentLogEvents(row?: AgentRowNode): Promise<void> {
    const agentId = row?.agentId ?? (await this.pickAgent("Show Agent's Log Events"));
    if (!agentId) return;
    await this.documents.open(AGENT_LOG_DOCUMENT, agentId, `${agentId} log.txt`);
  }

  /** Deregisters an agent after a modal confirmation naming it, through the registry's own deregistration. */
  async deregisterAgent(row?: AgentRowNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const agentId = row?.agentId ?? (await this.pickAgent('Deregister Agent'));
    if (!agentId) return;
    const choice = await vscode.window.showWarningMessage(
      `Deregister agent ${agentId}?`,
      {
        modal: true,
        detail:
          'It leaves the registry: its inbox stream ends, and messages still waiting for it end as AGENT_UNAVAILABLE (dead letters). ' +
          'A running agent may register again.',
      },
      'Deregister',
    );
    if (choice !== 'Deregister' || this.api !== api) return;
    const done = await api.deregisterAgent(agentId, this.operator).catch(() => false);
    if (done) void vscode.window.showInformationMessage(`Deregistered agent ${agentId}.`);
    else void vscode.window.showWarningMessage(`Agent ${agentId} is not registered (any more).`);
  }

  private async pickRecipient(api: CoordinatorApi): Promise<string | undefined> {
    return this.pickAgent('Send Message: Recipient', api);
  }

  private async pickAgent(title: string, given?: CoordinatorApi): Promise<string | undefined> {
    const api = given ?? (await requireRunning(this.api));
    if (!api) return undefined;
    const agents = await api.agents();
    if (!agents.length) {
      void vscode.window.showInformationMessage(
        'No agent is registered. Start one with the environment from Copy Agent Environment.',
      );
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      agents.map((a) => ({
        label: a.descriptor.agentId,
        description: `${a.descriptor.name !== a.descriptor.agentId ? `${a.descriptor.name} · ` : ''}${a.state} · ${a.presence}`,
        detail: a.descriptor.modalitiesSupported.length
          ? `accepts ${a.descriptor.modalitiesSupported.join(', ')}`
          : 'accepts any content type',
      })),
      { title, placeHolder: 'Pick an agent', matchOnDescription: true },
    );
    return picked?.label;
  }
}

/** The payload as text: typed, the active editor's selection (or whole text), or a file's content; undefined if cancelled. */
async function pickPayload(to: string): Promise<string | undefined> {
  const editor = vscode.window.activeTextEditor;
  const sources: Array<vscode.QuickPickItem & { source: 'type' | 'editor' | 'file' }> = [
    { label: 'Type a payload…', description: 'JSON or text', source: 'type' },
    ...(editor
      ? [
          {
            label: "The active editor's text",
            description: editor.selection.isEmpty ? 'the whole document' : 'the selection',
            source: 'editor' as const,
          },
        ]
      : []),
    { label: 'A file…', description: 'its content as text', source: 'file' },
  ];
  const picked = await vscode.window.showQuickPick(sources, {
    title: `Send Message to ${to}: Payload Source`,
    placeHolder: 'Where does the payload come from?',
  });
  if (!picked) return undefined;
  if (picked.source === 'editor' && editor)
    return editor.document.getText(editor.selection.isEmpty ? undefined : editor.selection);
  if (picked.source === 'file') {
    const [file] =
      (await vscode.window.showOpenDialog({ title: `Send Message to ${to}: Payload File`, canSelectMany: false })) ??
      [];
    if (!file) return undefined;
    return new TextDecoder('utf-8').decode(await vscode.workspace.fs.readFile(file));
  }
  return vscode.window.showInputBox({
    title: `Send Message to ${to}: Type the Payload`,
    value: '{"text": "hello"}',
    ignoreFocusOut: true,
    prompt: 'JSON (sent as application/json) or any text (sent as text/plain)',
  });
}

/** application/json when the payload is JSON and the user keeps it so, text/plain otherwise; undefined if cancelled. */
async function pickContentType(payload: string): Promise<CoordinatorSendContentType | undefined> {
  const json = isJson(payload);
  const items: Array<vscode.QuickPickItem & { type: CoordinatorSendContentType }> = json
    ? [
        { label: 'application/json', description: 'the payload is valid JSON', type: 'application/json' },
        { label: 'text/plain', description: 'as text', type: 'text/plain' },
      ]
    : [{ label: 'text/plain', description: 'the payload is not JSON', type: 'text/plain' }];
  const picked = await vscode.window.showQuickPick(items, {
    title: 'Send Message: Content Type',
    placeHolder: 'Send the payload as',
  });
  return picked?.type;
}
