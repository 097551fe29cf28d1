import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { CoordinatorApiError, invocationJson, type CoordinatorApi, type HitlInvocation } from '../../core/api';
import {
  HITL_PANEL_VIEW_TYPE, parseInvocationJson, parsePanelState, parseWebviewMessage,
  type HostMessage, type InvocationJson, type WebviewMessage,
} from '../../../webview/hitl/protocol';
import { panelTitle } from '../approvalsModel';
import { hitlPanelHtml } from './hitlPanelHtml';

/** Where the panel's script and stylesheet are, relative to the extension (the only folder the webview may load from). */
const WEBVIEW_DIST = ['dist', 'webview'] as const;

/**
 * The approval panels: one webview panel per invocation (opening it again reveals it). A panel shows the
 * invocation and takes the operator's decision; it follows the invocation's changes, and it is restored
 * after a window reload from its invocation id alone, re-read from the coordinator.
 */
export class HitlPanels implements vscode.Disposable {
  private readonly panels = new Map<string, HitlPanel>();
  private api: CoordinatorApi | undefined;
  private readonly registration: vscode.Disposable;

  constructor(private readonly extensionUri: vscode.Uri, private readonly operator: string) {
    this.registration = vscode.window.registerWebviewPanelSerializer(HITL_PANEL_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) => this.restore(panel, state),
    });
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped; open panels show the change. */
  bind(api: CoordinatorApi | undefined): void {
    this.api = api;
    for (const panel of this.panels.values()) void panel.push();
  }

  /** Opens the panel of an invocation, or reveals it if it is open. */
  async open(id: string): Promise<void> {
    if (this.reveal(id)) return;
    const invocation = await this.api?.approval(id).catch(() => undefined);
    // Another open of the same invocation may have won the race.
    if (this.reveal(id)) return;
    const panel = vscode.window.createWebviewPanel(HITL_PANEL_VIEW_TYPE, panelTitle(invocation, id), vscode.ViewColumn.Active,
      this.options());
    this.adopt(panel, id);
  }

  /** An invocation changed: its panel, if open, shows it. */
  changed(invocation: HitlInvocation): void {
    void this.panels.get(invocation.id)?.push();
  }

  dispose(): void {
    this.registration.dispose();
    for (const panel of [...this.panels.values()]) panel.dispose();
    this.panels.clear();
  }

  private restore(panel: vscode.WebviewPanel, state: unknown): void {
    const restored = parsePanelState(state);
    if (!restored || this.panels.has(restored.invocationId)) {
      panel.dispose();
      return;
    }
    panel.webview.options = this.options();
    this.adopt(panel, restored.invocationId);
  }

  private reveal(id: string): boolean {
    const open = this.panels.get(id);
    open?.reveal();
    return open !== undefined;
  }

  private adopt(panel: vscode.WebviewPanel, id: string): void {
    const owned = new HitlPanel(panel, id, this.extensionUri, this.operator, () => this.api, () => this.panels.delete(id));
    this.panels.set(id, owned);
  }

  private options(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      enableCommandUris: false,
      // A rationale being typed survives switching to another editor tab and back.
      retainContextWhenHidden: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, ...WEBVIEW_DIST)],
    };
  }
}

/** One panel: its HTML, the ready handshake, decisions, and updates when the invocation changes. */
class HitlPanel {
  private ready = false;
  private readonly subscriptions: vscode.Disposable[] = [];
  private disposed = false;
  /** Pushes started; only the latest one is sent. */
  private pushes = 0;

  constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly id: string,
    private readonly extensionUri: vscode.Uri,
    private readonly operator: string,
    private readonly api: () => CoordinatorApi | undefined,
    private readonly onDispose: () => void,
  ) {
    panel.webview.html = panelHtml(panel.webview, extensionUri, newNonce());
    this.subscriptions.push(
      panel.webview.onDidReceiveMessage((raw: unknown) => this.receive(parseWebviewMessage(raw))),
      panel.onDidDispose(() => this.dispose()),
    );
  }

  reveal(): void {
    this.panel.reveal();
  }

  /** Sends the invocation as it is now (after `ready` only; the webview asks when it is listening). */
  async push(): Promise<void> {
    if (this.disposed) return;
    const push = ++this.pushes;
    const api = this.api();
    let invocation: HitlInvocation | undefined;
    let failure: string | undefined;
    try {
      invocation = await api?.approval(this.id);
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err);
    }
    if (this.disposed || push !== this.pushes) return;
    if (invocation) this.panel.title = panelTitle(invocation, this.id);
    if (!this.ready) return;
    const unavailable = !api ? 'The SW4RM coordinator is not running; the request shows here again when it starts.'
      : failure !== undefined ? `The approval request could not be read: ${failure}`
        : !invocation ? `The coordinator has no approval request '${this.id}'.` : undefined;
    this.post({
      type: 'invocation', invocationId: this.id, invocation: invocation ? toWire(invocation) : null, operator: this.operator, now: Date.now(),
      ...(unavailable ? { unavailable } : {}),
    });
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
    switch (message.type) {
      case 'ready':
        this.ready = true;
        void this.push();
        break;
      case 'decide':
        void this.decide(message);
        break;
    }
  }

  private async decide(message: Extract<WebviewMessage, { type: 'decide' }>): Promise<void> {
    const api = this.api();
    if (!api) {
      this.post({ type: 'error', requestId: message.requestId, message: 'The SW4RM coordinator is not running; start it and decide again.' });
      return;
    }
    try {
      const decided = await api.decideApproval(this.id, { action: message.action, rationale: message.rationale, payload: message.payload }, this.operator);
      this.post({ type: 'result', requestId: message.requestId, invocation: toWire(decided) });
    } catch (err) {
      const known = err instanceof CoordinatorApiError;
      const text = err instanceof Error ? err.message : String(err);
      this.post({ type: 'error', requestId: message.requestId, message: known ? text : `The decision was not recorded: ${text}` });
      void this.push();
    }
  }

  private post(message: HostMessage): void {
    if (!this.disposed) void this.panel.webview.postMessage(message);
  }
}

/** The invocation in the protocol's shape (the coordinator's own `invocationJson`, checked). */
function toWire(invocation: HitlInvocation): InvocationJson {
  // A JSON round trip drops `undefined` members as postMessage would, so the check sees what the webview gets.
  const wire = parseInvocationJson(JSON.parse(JSON.stringify(invocationJson(invocation))));
  if (!wire) throw new Error(`invocation ${invocation.id} does not have the panel protocol's shape`);
  return wire;
}

function newNonce(): string {
  return randomBytes(18).toString('base64');
}

function panelHtml(webview: vscode.Webview, extensionUri: vscode.Uri, nonce: string): string {
  return hitlPanelHtml({
    cspSource: webview.cspSource,
    scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...WEBVIEW_DIST, 'hitl.js')).toString(),
    styleUri: webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...WEBVIEW_DIST, 'hitl.css')).toString(),
    nonce,
  });
}
