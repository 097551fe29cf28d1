import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable } from '../core/api';
import { METRICS_SCHEME, metricsDocumentText, metricsExportFileName } from './metricsModel';
import { requireRunning } from './notRunning';
import { KeyedThrottle } from './throttle';

/** Router events come in bursts (every delivery); the open document follows at most this often. */
export const METRICS_REFRESH_MS = 1000;
/** Ages (the oldest waiting message) grow without an event: the open document is read again this often. */
export const METRICS_POLL_MS = 5000;

/**
 * Show Router Metrics: a read-only document (`sw4rm-metrics:` scheme) with the router's back-pressure metrics in
 * the Prometheus text format, read from the coordinator each time it is shown and refreshed (throttled) while it is
 * open; Copy and Export on its title bar give the same text to the clipboard or a file.
 */
export class RouterMetricsDocument implements vscode.TextDocumentContentProvider, vscode.Disposable {
  static readonly uri = vscode.Uri.from({ scheme: METRICS_SCHEME, path: '/SW4RM Router Metrics' });
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private api: CoordinatorApi | undefined;
  private subscriptions: Disposable[] = [];
  private readonly throttle = new KeyedThrottle<'metrics'>(METRICS_REFRESH_MS, () => this.refresh());
  private readonly registration: vscode.Disposable;
  private readonly poll: ReturnType<typeof setInterval>;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(METRICS_SCHEME, this);
    this.poll = setInterval(() => this.refresh(), METRICS_POLL_MS);
    this.poll.unref?.();
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped; an open document shows the change. */
  bind(api: CoordinatorApi | undefined): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.throttle.cancel();
    this.api = api;
    if (api) {
      const schedule = () => this.throttle.schedule('metrics');
      this.subscriptions.push(
        api.onDidChangeInbox(schedule),
        api.onDidChangeAgents(schedule),
        api.onDidChangeDeadLetters(schedule),
      );
    }
    this.refresh();
  }

  async provideTextDocumentContent(): Promise<string> {
    const api = this.api;
    if (!api) return metricsDocumentText(undefined, Date.now());
    try {
      return metricsDocumentText(await api.metricsText(), Date.now());
    } catch {
      return metricsDocumentText(undefined, Date.now());
    }
  }

  /** Opens (or shows again, freshly read) the metrics document. */
  async show(): Promise<void> {
    if (!(await requireRunning(this.api))) return;
    this.refresh();
    const document = await vscode.workspace.openTextDocument(RouterMetricsDocument.uri);
    await vscode.window.showTextDocument(document, { preview: false });
  }

  /** Copies the metrics, as of now, in the Prometheus text format. */
  async copy(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    await vscode.env.clipboard.writeText(metricsDocumentText(await api.metricsText(), Date.now(), 'export'));
    void vscode.window.showInformationMessage('Copied the SW4RM router metrics (Prometheus text format).');
  }

  /** Saves the metrics, as of now, to a file the user picks. */
  async export(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const now = Date.now();
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const name = metricsExportFileName(now);
    const target = await vscode.window.showSaveDialog({
      title: 'Export SW4RM Router Metrics',
      defaultUri: folder ? vscode.Uri.joinPath(folder, name) : undefined,
      filters: { 'Prometheus text': ['prom', 'txt'] },
    });
    if (!target) return;
    const text = metricsDocumentText(await api.metricsText(), now, 'export');
    await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(text));
    void vscode.window.showInformationMessage(`Exported the SW4RM router metrics to ${target.fsPath}.`);
  }

  dispose(): void {
    clearInterval(this.poll);
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.throttle.dispose();
    this.registration.dispose();
    this.changed.dispose();
  }

  /** Reads the document again, only while it is open. */
  private refresh(): void {
    const uri = RouterMetricsDocument.uri.toString();
    if (vscode.workspace.textDocuments.some((document) => document.uri.toString() === uri))
      this.changed.fire(RouterMetricsDocument.uri);
  }
}
