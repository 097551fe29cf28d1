import { MAX_RATIONALE_LENGTH } from '../../../webview/negotiation/protocol';
import { RATIONALE_REQUIRED_HINT } from '../../../webview/negotiation/viewModel';
import { panelDocument, type PanelPage } from './panelHtml';

/**
 * The negotiation panel's page (panelDocument: the approval panel's CSP, stylesheet and script by nonce): a fixed
 * skeleton. Nothing in it comes from a debate or a room; the script fills it in with textContent.
 */
export function negotiationPanelHtml(page: PanelPage): string {
  return panelDocument(
    page,
    'SW4RM negotiation',
    `<main id="content" aria-busy="true" aria-label="Negotiation"><p class="muted">Loading…</p></main>
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
<p id="status" class="status" role="status" aria-live="polite"></p>`,
  );
}
