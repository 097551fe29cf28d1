import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import type { CoordinatorApi } from '../../core/api';
import type { PanelPage } from './panelHtml';

/** Where the panels' scripts and stylesheets are, relative to the extension (the only folder a webview may load from). */
const WEBVIEW_DIST = ['dist', 'webview'] as const;

/** What every panel of a kind shares. */
export interface PanelHost {
  readonly extensionUri: vscode.Uri;
  /** The name decisions made in a panel are recorded under, e.g. `editor:alice`. */
  readonly operator: string;
  /** The running coordinator's API, or undefined while it is stopped. */
  readonly api: () => CoordinatorApi | undefined;
}

/** A webview screen: its bundle in dist/webview (`<name>.js`, `<name>.css`), its page, and its messages' check. */
export interface PanelScreen<M> {
  readonly name: string;
  readonly html: (page: PanelPage) => string;
  readonly parse: (raw: unknown) => M | undefined;
}

/**
 * One webview panel showing something of the coordinator: its page (a new nonce per render), the ready handshake (the
 * webview asks when it is listening), pushes of what it shows now (only the latest one started is sent), the
 * webview's other messages (`decide`), and disposal.
 */
export abstract class CoordinatorPanel<R, M extends { readonly type: string }, H> {
  private ready = false;
  private readonly subscriptions: vscode.Disposable[] = [];
  private disposed = false;
  /** Pushes started; only the latest one is sent. */
  private pushes = 0;

  constructor(
    private readonly panel: vscode.WebviewPanel,
    protected readonly host: PanelHost,
    screen: PanelScreen<M>,
    private readonly onDispose: () => void,
  ) {
    const webview = panel.webview;
    const uri = (file: string) =>
      webview.asWebviewUri(vscode.Uri.joinPath(host.extensionUri, ...WEBVIEW_DIST, file)).toString();
    webview.html = screen.html({
      cspSource: webview.cspSource,
      scriptUri: uri(`${screen.name}.js`),
      styleUri: uri(`${screen.name}.css`),
      nonce: randomBytes(18).toString('base64'),
    });
    this.subscriptions.push(
      webview.onDidReceiveMessage((raw: unknown) => this.receive(screen.parse(raw))),
      panel.onDidDispose(() => this.dispose()),
    );
  }

  reveal(): void {
    this.panel.reveal();
  }

  /** Sends what the panel shows as it is now (after `ready` only); the title follows it before that too. */
  async push(): Promise<void> {
    if (this.disposed) return;
    const push = ++this.pushes;
    const read = await this.read();
    if (this.disposed || push !== this.pushes) return;
    const title = this.title(read);
    if (title !== undefined) this.panel.title = title;
    if (!this.ready) return;
    this.post(this.shown(read));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const subscription of this.subscriptions) subscription.dispose();
    this.onDispose();
    this.panel.dispose();
  }

  /** What the panel shows, read from the coordinator now. */
  protected abstract read(): Promise<R>;
  /** The panel's title for what was read; undefined keeps the title it has. */
  protected abstract title(read: R): string | undefined;
  /** The message that shows what was read. */
  protected abstract shown(read: R): H;
  /** A message of the webview other than `ready`. */
  protected abstract decide(message: Exclude<M, { readonly type: 'ready' }>): Promise<void>;

  protected post(message: H): void {
    if (!this.disposed) void this.panel.webview.postMessage(message);
  }

  private receive(message: M | undefined): void {
    if (!message) return;
    if (message.type === 'ready') {
      this.ready = true;
      void this.push();
    } else {
      void this.decide(message as Exclude<M, { readonly type: 'ready' }>);
    }
  }
}

/**
 * The panels of one kind: one per target (opening it again reveals it), each following the coordinator bound, and
 * restored after a window reload from the target its webview state names.
 */
export abstract class CoordinatorPanels<T, P extends CoordinatorPanel<unknown, { readonly type: string }, unknown>>
  implements vscode.Disposable
{
  private readonly panels = new Map<string, P>();
  private current: CoordinatorApi | undefined;
  private readonly registration: vscode.Disposable;
  protected readonly host: PanelHost;

  constructor(
    private readonly viewType: string,
    extensionUri: vscode.Uri,
    operator: string,
  ) {
    this.host = { extensionUri, operator, api: () => this.current };
    this.registration = vscode.window.registerWebviewPanelSerializer(viewType, {
      deserializeWebviewPanel: async (panel, state) => this.restore(panel, state),
    });
  }

  protected get api(): CoordinatorApi | undefined {
    return this.current;
  }

  /** Follows the API of a (new) coordinator, or none while it is stopped; open panels show the change. */
  bind(api: CoordinatorApi | undefined): void {
    this.current = api;
    for (const panel of this.panels.values()) void panel.push();
  }

  dispose(): void {
    this.registration.dispose();
    for (const panel of [...this.panels.values()]) panel.dispose();
    this.panels.clear();
  }

  protected abstract keyOf(target: T): string;
  /** The target a restored panel's state names, if it names one. */
  protected abstract restored(state: unknown): T | undefined;
  protected abstract adopted(panel: vscode.WebviewPanel, target: T, onDispose: () => void): P;

  /** The open panel of `target`, if one is open. */
  protected opened(target: T): P | undefined {
    return this.panels.get(this.keyOf(target));
  }

  /** Reveals the panel of `target`; false when none is open. */
  protected reveal(target: T): boolean {
    const open = this.opened(target);
    open?.reveal();
    return open !== undefined;
  }

  /** Opens a new panel of `target`, titled `title`. */
  protected create(target: T, title: string): void {
    this.adopt(
      vscode.window.createWebviewPanel(this.viewType, title, vscode.ViewColumn.Active, this.options()),
      target,
    );
  }

  private restore(panel: vscode.WebviewPanel, state: unknown): void {
    const target = this.restored(state);
    if (target === undefined || this.opened(target)) {
      panel.dispose();
      return;
    }
    panel.webview.options = this.options();
    this.adopt(panel, target);
  }

  private adopt(panel: vscode.WebviewPanel, target: T): void {
    const key = this.keyOf(target);
    this.panels.set(
      key,
      this.adopted(panel, target, () => this.panels.delete(key)),
    );
  }

  private options(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return {
      enableScripts: true,
      enableCommandUris: false,
      // A rationale being typed survives switching to another editor tab and back.
      retainContextWhenHidden: true,
      localResourceRoots: [vscode.Uri.joinPath(this.host.extensionUri, ...WEBVIEW_DIST)],
    };
  }
}
