import * as vscode from 'vscode';
import { CoordinatorApiError, type CoordinatorApi, type Disposable } from '../../core/api';
import {
  NEGOTIATION_PANEL_VIEW_TYPE,
  parsePanelState,
  parseWebviewMessage,
  type DebateJson,
  type HostMessage,
  type NegotiationTarget,
  type RoomJson,
  type WebviewMessage,
} from '../../../webview/negotiation/protocol';
import { REQUEST_REVISION_PAYLOAD, rationaleMissing } from '../../../webview/negotiation/viewModel';
import { debateJson, decidedMessage, negotiationPanelTitle, roomJson } from '../negotiationsModel';
import { CoordinatorPanel, CoordinatorPanels, type PanelHost } from './coordinatorPanels';
import { negotiationPanelHtml } from './negotiationPanelHtml';

/**
 * The negotiation panels: one webview panel per debate or room artifact (opening it again reveals it). A panel shows
 * it as it is now and follows its changes; when a person must decide (a paused debate, an escalated room) it takes
 * the decision, answered through the HITL invocation. Restored after a window reload from its target alone.
 */
export class NegotiationPanels extends CoordinatorPanels<NegotiationTarget, NegotiationPanel> {
  private subscription: Disposable | undefined;

  constructor(extensionUri: vscode.Uri, operator: string) {
    super(NEGOTIATION_PANEL_VIEW_TYPE, extensionUri, operator);
  }

  /** Follows the API of a (new) coordinator, or none while it is stopped; open panels show the change. */
  override bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.subscription = api?.onDidChangeNegotiations((change) => {
      void this.opened({ kind: change.kind, id: change.id })?.push();
    });
    super.bind(api);
  }

  /** Opens the panel of a debate or a room artifact, or reveals it if it is open. */
  open(target: NegotiationTarget): void {
    if (!this.reveal(target)) this.create(target, negotiationPanelTitle(target.kind, target.id));
  }

  override dispose(): void {
    this.subscription?.dispose();
    super.dispose();
  }

  protected keyOf(target: NegotiationTarget): string {
    return `${target.kind}:${target.id}`;
  }

  protected restored(state: unknown): NegotiationTarget | undefined {
    return parsePanelState(state);
  }

  protected adopted(panel: vscode.WebviewPanel, target: NegotiationTarget, onDispose: () => void): NegotiationPanel {
    return new NegotiationPanel(panel, target, this.host, onDispose);
  }
}

/** A debate or room as read now; null (and why) when it cannot be. */
interface NegotiationRead {
  readonly debate: DebateJson | null;
  readonly room: RoomJson | null;
  readonly unavailable?: string;
}

/** One panel: the debate or room, updates when it changes, and decisions. */
class NegotiationPanel extends CoordinatorPanel<NegotiationRead, WebviewMessage, HostMessage> {
  constructor(
    panel: vscode.WebviewPanel,
    private readonly target: NegotiationTarget,
    host: PanelHost,
    onDispose: () => void,
  ) {
    super(panel, host, { name: 'negotiation', html: negotiationPanelHtml, parse: parseWebviewMessage }, onDispose);
  }

  /** Reads the debate or room now; undefined (and why) when it cannot be. */
  protected async read(): Promise<NegotiationRead> {
    const api = this.host.api();
    if (!api)
      return {
        debate: null,
        room: null,
        unavailable: 'The SW4RM coordinator is not running; this shows here again when it starts.',
      };
    try {
      if (this.target.kind === 'debate') {
        const detail = await api.negotiationDetail(this.target.id);
        return detail
          ? { debate: debateJson(detail), room: null }
          : { debate: null, room: null, unavailable: `The coordinator has no debate '${this.target.id}'.` };
      }
      const detail = await api.roomArtifactDetail(this.target.id);
      return detail
        ? { debate: null, room: roomJson(detail) }
        : { debate: null, room: null, unavailable: `The coordinator has no room artifact '${this.target.id}'.` };
    } catch (err) {
      return {
        debate: null,
        room: null,
        unavailable: `It could not be read: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  protected title(read: NegotiationRead): string {
    return negotiationPanelTitle(this.target.kind, this.target.id, read.debate?.topic);
  }

  protected shown(read: NegotiationRead): HostMessage {
    return {
      type: 'show',
      target: this.target,
      debate: read.debate,
      room: read.room,
      operator: this.host.operator,
      ...(read.unavailable ? { unavailable: read.unavailable } : {}),
    };
  }

  protected async decide(message: Extract<WebviewMessage, { type: 'decide' }>): Promise<void> {
    const fail = (text: string) => this.post({ type: 'error', requestId: message.requestId, message: text });
    // The webview keeps the buttons disabled without a rationale; a message without one is refused here all the same.
    if (rationaleMissing(message.rationale)) return fail('A rationale is required: say why before you decide.');
    const api = this.host.api();
    if (!api) return fail('The SW4RM coordinator is not running; start it and decide again.');
    // The invocation is read now, not taken from the webview: the one pending at this moment is decided.
    const read = await this.read();
    const invocationId = read.debate
      ? read.debate.state === 'paused'
        ? read.debate.pending?.invocationId
        : undefined
      : read.room?.state === 'escalated'
        ? (read.room.invocationId ?? undefined)
        : undefined;
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
      await api.decideApproval(
        invocationId,
        { action: message.action, rationale: message.rationale, ...(payload === undefined ? {} : { payload }) },
        this.host.operator,
      );
      this.post({
        type: 'result',
        requestId: message.requestId,
        message: decidedMessage(this.target.kind, message.action),
      });
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      fail(err instanceof CoordinatorApiError ? text : `The decision was not recorded: ${text}`);
    }
    void this.push();
  }
}
