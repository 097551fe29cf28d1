import { MAX_RATIONALE_LENGTH } from '../../../webview/hitl/protocol';
import { RATIONALE_REQUIRED_HINT } from '../../../webview/hitl/viewModel';
import { panelDocument, type PanelPage } from './panelHtml';

/**
 * The approval panel's page (panelDocument: the CSP, the stylesheet, the bundled script by nonce): a fixed
 * skeleton. Nothing in it comes from the invocation; the script fills it in with textContent.
 */
export function hitlPanelHtml(page: PanelPage): string {
  return panelDocument(
    page,
    'SW4RM approval request',
    `<main id="content" aria-busy="true" aria-label="Approval request"><p class="muted">Loading the approval request…</p></main>
<form id="decide" hidden aria-label="Decision">
  <label for="rationale">Rationale <span class="hint">(required; recorded in the audit trail and sent to the requester)</span></label>
  <textarea id="rationale" rows="3" maxlength="${MAX_RATIONALE_LENGTH}" required aria-required="true" aria-describedby="rationale-required"></textarea>
  <p id="rationale-required" class="required-hint">${RATIONALE_REQUIRED_HINT}</p>
  <div class="buttons">
    <button type="button" id="approve" class="primary">Approve</button>
    <button type="button" id="deny">Deny</button>
    <button type="button" id="modify" aria-expanded="false" aria-controls="modify-box">Modify…</button>
    <button type="button" id="defer">Defer</button>
    <span class="operator">Deciding as <span id="operator"></span></span>
  </div>
  <div id="modify-box" class="modify-box" hidden>
    <label for="payload">Modified payload <span class="hint">(JSON, sent to the requester as the decision payload)</span></label>
    <textarea id="payload" rows="8" spellcheck="false" aria-describedby="payload-error"></textarea>
    <p id="payload-error" class="error" role="alert" hidden></p>
    <div class="buttons"><button type="button" id="send-modify" class="primary">Send Modification</button></div>
  </div>
  <p id="status" class="status" role="status" aria-live="polite"></p>
  <p id="error" class="error" role="alert" hidden></p>
</form>`,
  );
}
