export interface PanelPage {
  /** The webview's own origin (`webview.cspSource`): the only place styles and images may come from. */
  readonly cspSource: string;
  /** `webview.asWebviewUri` of the screen's bundled script and stylesheet in dist/webview/. */
  readonly scriptUri: string;
  readonly styleUri: string;
  /** New for every render. */
  readonly nonce: string;
}

/** A panel's Content-Security-Policy: scripts by nonce only, styles and images from the extension only. */
export function panelCsp(cspSource: string, nonce: string): string {
  return `default-src 'none'; script-src 'nonce-${nonce}'; style-src ${cspSource}; img-src ${cspSource}`;
}

/**
 * A panel's page: the Content-Security-Policy, the stylesheet, `body` (a fixed skeleton: no inline styles, no inline
 * handlers, nothing from the coordinator; the script fills it in with textContent) and the bundled script by nonce.
 */
export function panelDocument(page: PanelPage, title: string, body: string): string {
  const attr = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${attr(panelCsp(page.cspSource, page.nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${attr(page.styleUri)}">
<title>${title}</title>
</head>
<body>
${body}
<script nonce="${attr(page.nonce)}" src="${attr(page.scriptUri)}"></script>
</body>
</html>`;
}
