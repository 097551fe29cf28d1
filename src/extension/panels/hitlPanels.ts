import { randomBytes, randomUUID } from 'node:crypto';
import * as vscode from 'vscode';
import { HitlStateError, invocationJson, type HitlService } from '../../core/hitl/hitlService';
import type { HitlInvocation } from '../../core/hitl/model';
import { HitlRequestError } from '../../core/hitl/request';
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
  private hitl: HitlService | undefined;
  private readonly registration: vscode.Disposable;

  constructor(private readonly extensionUri: vscode.Uri, private readonly operator: string) {
    this.registration = vscode.window.registerWebviewPanelSerializer(HITL_PANEL_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) => this.restore(panel, state),
    });
  }

  /** Follows a (new) HITL service, or none while the coordinator is stopped; open panels show the change. */
  bind(hitl: HitlService | undefined): void {
    this.hitl = hitl;
    for (const panel of this.panels.values()) panel.push();
  }

  /** Opens the panel of an invocation, or reveals it if it is open. */
  open(id: string): void {
    const open = this.panels.get(id);
    if (open) {
      open.reveal();
      return;
    }
    const panel = vscode.window.createWebviewPanel(HITL_PANEL_VIEW_TYPE, panelTitle(this.hitl?.get(id), id), vscode.ViewColumn.Active,
      this.options());
    this.adopt(panel, id);
  }

  /** An invocation changed: its panel, if open, shows it. */
  changed(invocation: HitlInvocation): void {
    this.panels.get(invocation.id)?.push();
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

  private adopt(panel: vscode.WebviewPanel, id: string): void {
    const owned = new HitlPanel(panel, id, this.extensionUri, this.operator, () => this.hitl, () => this.panels.delete(id));
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

  constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly id: string,
    private readonly extensionUri: vscode.Uri,
    private readonly operator: string,
    private readonly hitl: () => HitlService | undefined,
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
  push(): void {
    if (this.disposed) return;
    const hitl = this.hitl();
    const invocation = hitl?.get(this.id);
    if (invocation) this.panel.title = panelTitle(invocation, this.id);
    if (!this.ready) return;
    const unavailable = !hitl ? 'The SW4RM coordinator is not running; the request shows here again when it starts.'
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
        this.push();
        break;
      case 'decide':
        this.decide(message);
        break;
    }
  }

  private decide(message: Extract<WebviewMessage, { type: 'decide' }>): void {
    const hitl = this.hitl();
    if (!hitl) {
      this.post({ type: 'error', requestId: message.requestId, message: 'The SW4RM coordinator is not running; start it and decide again.' });
      return;
    }
    try {
      const invocation = hitl.get(this.id);
      const decided = hitl.decide(this.id, { action: message.action, rationale: message.rationale, payload: message.payload },
        this.operator, { correlationId: invocation?.correlationId || randomUUID() });
      this.post({ type: 'result', requestId: message.requestId, invocation: toWire(decided) });
    } catch (err) {
      const known = err instanceof HitlStateError || err instanceof HitlRequestError;
      const text = err instanceof Error ? err.message : String(err);
      this.post({ type: 'error', requestId: message.requestId, message: known ? text : `The decision was not recorded: ${text}` });
      this.push();
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
