import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { CoordinatorApiError, type CoordinatorApi, type Disposable } from '../../core/api';
import {
  NEGOTIATION_PANEL_VIEW_TYPE, parsePanelState, parseWebviewMessage,
  type DebateJson, type HostMessage, type NegotiationTarget, type RoomJson, type WebviewMessage,
} from '../../../webview/negotiation/protocol';
import { REQUEST_REVISION_PAYLOAD, rationaleMissing } from '../../../webview/negotiation/viewModel';
import { debateJson, decidedMessage, negotiationPanelTitle, roomJson } from '../negotiationsModel';
import { negotiationPanelHtml } from './negotiationPanelHtml';

/** Where the panel's script and stylesheet are, relative to the extension (the only folder the webview may load from). */
const WEBVIEW_DIST = ['dist', 'webview'] as const;

function keyOf(target: NegotiationTarget): string {
  return `${target.kind}:${target.id}`;
}

/**
 * The negotiation panels: one webview panel per debate or room artifact (opening it again reveals it). A panel shows
 * it as it is now and follows its changes; when a person must decide (a paused debate, an escalated room) it takes
 * the decision, answered through the HITL invocation. Restored after a window reload from its target alone.
 */
export class NegotiationPanels implements vscode.Disposable {
  private readonly panels = new Map<string, NegotiationPanel>();
  private api: CoordinatorApi | undefined;
  private subscription: Disposable | undefined;
  private readonly registration: vscode.Disposable;

  constructor(private readonly extensionUri: vscode.Uri, private readonly operator: string) {
    this.registration = vscode.window.registerWebviewPanelSerializer(NEGOTIATION_PANEL_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) => this.restore(panel, state),
    });
  }

  /** Follows the API of a (new) coordinator, or none while it is stopped; open panels show the change. */
  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.api = api;
    this.subscription = api?.onDidChangeNegotiations((change) => {
      void this.panels.get(keyOf({ kind: change.kind, id: change.id }))?.push();
    });
    for (const panel of this.panels.values()) void panel.push();
  }

  /** Opens the panel of a debate or a room artifact, or reveals it if it is open. */
  open(target: NegotiationTarget): void {
    const open = this.panels.get(keyOf(target));
    if (open) {
      open.reveal();
      return;
    }
    const panel = vscode.window.createWebviewPanel(NEGOTIATION_PANEL_VIEW_TYPE, negotiationPanelTitle(target.kind, target.id), vscode.ViewColumn.Active, this.options());
    this.adopt(panel, target);
  }

  dispose(): void {
    this.subscription?.dispose();
    this.registration.dispose();
    for (const panel of [...this.panels.values()]) panel.dispose();
    this.panels.clear();
  }

  private restore(panel: vscode.WebviewPanel, state: unknown): void {
    const restored = parsePanelState(state);
    if (!restored || this.panels.has(keyOf(restored))) {
      panel.dispose();
      return;
    }
    panel.webview.options = this.options();
    this.adopt(panel, restored);
  }

  private adopt(panel: vscode.WebviewPanel, target: NegotiationTarget): void {
    const key = keyOf(target);
    this.panels.set(key, new NegotiationPanel(panel, target, this.extensionUri, this.operator, () => this.api, () => this.panels.delete(key)));
  }

  private options(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      enableCommandUris: false,
      retainContextWhenHidden: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, ...WEBVIEW_DIST)],
    };
  }
}

/** One panel: its HTML, the ready handshake, decisions, and updates when the debate or room changes. */
class NegotiationPanel {
  private ready = false;
  private readonly subscriptions: vscode.Disposable[] = [];
  private disposed = false;
  private pushes = 0;

  constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly target: NegotiationTarget,
    extensionUri: vscode.Uri,
    private readonly operator: string,
    private readonly api: () => CoordinatorApi | undefined,
    private readonly onDispose: () => void,
  ) {
    panel.webview.html = negotiationPanelHtml({
      cspSource: panel.webview.cspSource,
      scriptUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...WEBVIEW_DIST, 'negotiation.js')).toString(),
      styleUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...WEBVIEW_DIST, 'negotiation.css')).toString(),
      nonce: randomBytes(18).toString('base64'),
    });
    this.subscriptions.push(
      panel.webview.onDidReceiveMessage((raw: unknown) => this.receive(parseWebviewMessage(raw))),
      panel.onDidDispose(() => this.dispose()),
    );
  }

  reveal(): void {
    this.panel.reveal();
  }

  /** Reads the debate or room now; undefined (and why) when it cannot be. */
  private async read(): Promise<{ debate: DebateJson | null; room: RoomJson | null; unavailable?: string }> {
    const api = this.api();
    if (!api) return { debate: null, room: null, unavailable: 'The SW4RM coordinator is not running; this shows here again when it starts.' };
    try {
      if (this.target.kind === 'debate') {
        const detail = await api.negotiationDetail(this.target.id);
        return detail ? { debate: debateJson(detail), room: null } : { debate: null, room: null, unavailable: `The coordinator has no debate '${this.target.id}'.` };
      }
      const detail = await api.roomArtifactDetail(this.target.id);
      return detail ? { debate: null, room: roomJson(detail) } : { debate: null, room: null, unavailable: `The coordinator has no room artifact '${this.target.id}'.` };
    } catch (err) {
      return { debate: null, room: null, unavailable: `It could not be read: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  /** Sends the debate or room as it is now (after `ready` only). */
  async push(): Promise<void> {
    if (this.disposed) return;
    const push = ++this.pushes;
    const read = await this.read();
    if (this.disposed || push !== this.pushes) return;
    this.panel.title = negotiationPanelTitle(this.target.kind, this.target.id, read.debate?.topic);
    if (!this.ready) return;
    this.post({ type: 'show', target: this.target, debate: read.debate, room: read.room, operator: this.operator, ...(read.unavailable ? { unavailable: read.unavailable } : {}) });
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const subscription of this.subscriptions) subscription.dispose();
    this.onDispose();
    this.panel.dispose();
  }

  private receive(message: WebviewMessage | undefined): void {
    if (!message) return;
    if (message.type === 'ready') {
      this.ready = true;
      void this.push();
    } else {
      void this.decide(message);
    }
  }

  private async decide(message: Extract<WebviewMessage, { type: 'decide' }>): Promise<void> {
    const fail = (text: string) => this.post({ type: 'error', requestId: message.requestId, message: text });
    // The webview keeps the buttons disabled without a rationale; a message without one is refused here all the same.
    if (rationaleMissing(message.rationale)) return fail('A rationale is required: say why before you decide.');
    const api = this.api();
    if (!api) return fail('The SW4RM coordinator is not running; start it and decide again.');
    // The invocation is read now, not taken from the webview: the one pending at this moment is decided.
    const read = await this.read();
    const invocationId = read.debate ? (read.debate.state === 'paused' ? read.debate.pending?.invocationId : undefined)
      : read.room?.state === 'escalated' ? read.room.invocationId ?? undefined : undefined;
    if (!invocationId) {
      void this.push();
      return fail(read.unavailable ?? 'Nothing waits for a decision here any more (decided elsewhere, or by a rule).');
    }
    let payload = message.payload;
    if (message.action === 'modify' && payload === undefined) {
      if (this.target.kind === 'debate') return fail('Modify needs the payload to decide with (JSON).');
      payload = REQUEST_REVISION_PAYLOAD;
    }
    if (message.action !== 'modify') payload = undefined;
    try {
      await api.decideApproval(invocationId, { action: message.action, rationale: message.rationale, ...(payload === undefined ? {} : { payload }) }, this.operator);
      this.post({ type: 'result', requestId: message.requestId, message: decidedMessage(this.target.kind, message.action) });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      fail(err instanceof CoordinatorApiError ? text : `The decision was not recorded: ${text}`);
    }
    void this.push();
  }

  private post(message: HostMessage): void {
    if (!this.disposed) void this.panel.webview.postMessage(message);
  }
}
