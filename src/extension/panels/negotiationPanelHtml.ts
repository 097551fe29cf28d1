import { MAX_RATIONALE_LENGTH } from '../../../webview/negotiation/protocol';
import { RATIONALE_REQUIRED_HINT } from '../../../webview/negotiation/viewModel';
import { panelCsp, type PanelPage } from './hitlPanelHtml';

export type { PanelPage };

/**
 * The negotiation panel's page: a fixed skeleton (no inline styles, no inline handlers), the bundled script by nonce
 * and the stylesheet, under the same Content-Security-Policy as the approval panel (scripts by nonce only). Nothing in
 * it comes from a debate or a room; the script fills it in with textContent.
 */
export function negotiationPanelHtml(page: PanelPage): string {
  const attr = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${attr(panelCsp(page.cspSource, page.nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${attr(page.styleUri)}">
<title>SW4RM negotiation</title>
</head>
<body>
<main id="content" aria-busy="true" aria-label="Negotiation"><p class="muted">Loading…</p></main>
<form id="decide" hidden aria-label="Decision">
  <label for="rationale">Rationale <span class="hint">(required; recorded in the audit trail and sent to the agents)</span></label>
  <textarea id="rationale" rows="3" maxlength="${MAX_RATIONALE_LENGTH}" required aria-required="true" aria-describedby="rationale-required"></textarea>
  <p id="rationale-required" class="required-hint">${RATIONALE_REQUIRED_HINT}</p>
  <div class="buttons">
    <button type="button" id="approve" class="primary" disabled>Approve</button>
    <button type="button" id="modify" disabled aria-controls="modify-box">Request Revision</button>
    <button type="button" id="deny" disabled>Reject</button>
    <span class="operator">Deciding as <span id="operator"></span></span>
  </div>
  <div id="modify-box" class="modify-box" hidden>
    <label for="payload">Payload to decide with <span class="hint">(JSON)</span></label>
    <textarea id="payload" rows="8" spellcheck="false" aria-describedby="payload-error">{}</textarea>
    <p id="payload-error" class="error" role="alert" hidden></p>
    <div class="buttons"><button type="button" id="send-modify" class="primary" disabled>Decide with this payload</button></div>
  </div>
  <p id="error" class="error" role="alert" hidden></p>
</form>
<p id="status" class="status" role="status" aria-live="polite"></p>
<script nonce="${attr(page.nonce)}" src="${attr(page.scriptUri)}"></script>
</body>
</html>`;
}
