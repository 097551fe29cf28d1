import * as vscode from 'vscode';

/** The scheme of the extension's read-only documents (a message's detail, an agent's log events). */
export const READ_ONLY_SCHEME = 'sw4rm';

/**
 * Read-only text documents whose content the coordinator answers when the document is opened (or reopened):
 * plain text, so nothing an agent sent is ever rendered as markup. `sw4rm:/<kind>/<key>` asks the source of `kind`.
 */
export class ReadOnlyDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly sources = new Map<string, (key: string) => Promise<string>>();
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(READ_ONLY_SCHEME, this);
  }

  /** Where documents of `kind` get their text. */
  register(kind: string, source: (key: string) => Promise<string>): void {
    this.sources.set(kind, source);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const [, kind, key] = uri.path.split('/');
    const source = this.sources.get(kind);
    if (!source || !key) return `Nothing to show for ${uri.toString()}.\n`;
    try {
      return await source(key);
    } catch (err) {
      return `The coordinator could not answer: ${err instanceof Error ? err.message : String(err)}\n`;
    }
  }

  /**
   * Opens (or shows again, with fresh content) the document of `kind` and `key`, titled `title`. Keys are ids the
   * coordinator checked (message ids, agent ids: no `/`); the title is the tab's name.
   */
  async open(kind: string, key: string, title: string): Promise<void> {
    const uri = vscode.Uri.from({ scheme: READ_ONLY_SCHEME, path: `/${kind}/${key}/${title.replace(/\//g, '-')}` });
    this.changed.fire(uri);
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(document, { preview: true });
  }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
  }
}
