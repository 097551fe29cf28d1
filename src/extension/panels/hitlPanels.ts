import * as vscode from 'vscode';
import { CoordinatorApiError, invocationJson, type HitlInvocation } from '../../core/api';
import {
  HITL_PANEL_VIEW_TYPE,
  parseInvocationJson,
  parsePanelState,
  parseWebviewMessage,
  type HostMessage,
  type InvocationJson,
  type WebviewMessage,
} from '../../../webview/hitl/protocol';
import { panelTitle } from '../approvalsModel';
import { CoordinatorPanel, CoordinatorPanels, type PanelHost } from './coordinatorPanels';
import { hitlPanelHtml } from './hitlPanelHtml';

/**
 * The approval panels: one webview panel per invocation (opening it again reveals it). A panel shows the
 * invocation and takes the operator's decision; it follows the invocation's changes, and it is restored
 * after a window reload from its invocation id alone, re-read from the coordinator.
 */
export class HitlPanels extends CoordinatorPanels<string, HitlPanel> {
  constructor(extensionUri: vscode.Uri, operator: string) {
    super(HITL_PANEL_VIEW_TYPE, extensionUri, operator);
  }

  /** Opens the panel of an invocation, or reveals it if it is open. */
  async open(id: string): Promise<void> {
    if (this.reveal(id)) return;
    const invocation = await this.api?.approval(id).catch(() => undefined);
    // Another open of the same invocation may have won the race.
    if (this.reveal(id)) return;
    this.create(id, panelTitle(invocation, id));
  }

  /** An invocation changed: its panel, if open, shows it. */
  changed(invocation: HitlInvocation): void {
    void this.opened(invocation.id)?.push();
  }

  protected keyOf(id: string): string {
    return id;
  }

  protected restored(state: unknown): string | undefined {
    return parsePanelState(state)?.invocationId;
  }

  protected adopted(panel: vscode.WebviewPanel, id: string, onDispose: () => void): HitlPanel {
    return new HitlPanel(panel, id, this.host, onDispose);
  }
}

/** The invocation as read now, and why it is missing. */
interface InvocationRead {
  readonly invocation: HitlInvocation | undefined;
  readonly unavailable: string | undefined;
}

/** One panel: the invocation, updates when it changes, and decisions. */
class HitlPanel extends CoordinatorPanel<InvocationRead, WebviewMessage, HostMessage> {
  constructor(
    panel: vscode.WebviewPanel,
    private readonly id: string,
    host: PanelHost,
    onDispose: () => void,
  ) {
    super(panel, host, { name: 'hitl', html: hitlPanelHtml, parse: parseWebviewMessage }, onDispose);
  }

  protected async read(): Promise<InvocationRead> {
    const api = this.host.api();
    let invocation: HitlInvocation | undefined;
    let failure: string | undefined;
    try {
      invocation = await api?.approval(this.id);
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err);
    }
    const unavailable = !api
      ? 'The SW4RM coordinator is not running; the request shows here again when it starts.'
      : failure !== undefined
        ? `The approval request could not be read: ${failure}`
        : !invocation
          ? `The coordinator has no approval request '${this.id}'.`
          : undefined;
    return { invocation, unavailable };
  }

  protected title({ invocation }: InvocationRead): string | undefined {
    return invocation ? panelTitle(invocation, this.id) : undefined;
  }

  protected shown({ invocation, unavailable }: InvocationRead): HostMessage {
    return {
      type: 'invocation',
      invocationId: this.id,
      invocation: invocation ? toWire(invocation) : null,
      operator: this.host.operator,
      now: Date.now(),
      ...(unavailable ? { unavailable } : {}),
    };
  }

  protected async decide(message: Extract<WebviewMessage, { type: 'decide' }>): Promise<void> {
    const api = this.host.api();
    if (!api) {
      this.post({
        type: 'error',
        requestId: message.requestId,
        message: 'The SW4RM coordinator is not running; start it and decide again.',
      });
      return;
    }
    try {
      const decided = await api.decideApproval(
        this.id,
        { action: message.action, rationale: message.rationale, payload: message.payload },
        this.host.operator,
      );
      this.post({ type: 'result', requestId: message.requestId, invocation: toWire(decided) });
    } catch (err) {
      const known = err instanceof CoordinatorApiError;
      const text = err instanceof Error ? err.message : String(err);
      this.post({
        type: 'error',
        requestId: message.requestId,
        message: known ? text : `The decision was not recorded: ${text}`,
      });
      void this.push();
    }
  }
}

/** The invocation in the protocol's shape (the coordinator's own `invocationJson`, checked). */
function toWire(invocation: HitlInvocation): InvocationJson {
  // A JSON round trip drops `undefined` members as postMessage would, so the check sees what the webview gets.
  const wire = parseInvocationJson(JSON.parse(JSON.stringify(invocationJson(invocation))));
  if (!wire) throw new Error(`invocation ${invocation.id} does not have the panel protocol's shape`);
  return wire;
}
