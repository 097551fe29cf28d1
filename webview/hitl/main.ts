// The approval panel: shows one HITL invocation and sends the operator's decision to the extension.
// Everything the requester supplied (summary, facts, diffs, notes, payloads) is data: it is inserted with
// textContent only, never parsed as HTML.
import { create as createJsonDiffer } from 'jsondiffpatch';
import { h, byId, section } from '../shared/dom';
import { jsonChangesList, linesBlock } from '../shared/diffView';
import { formatJsonValue, jsonDeltaChanges, jsonDiffRefusal, textDiffLines, unifiedDiffLines } from './diffModel';
import {
  parseHostMessage,
  type DecisionAction,
  type DiffJson,
  type HostMessage,
  type InvocationJson,
  type PanelState,
  type WebviewMessage,
} from './protocol';
import {
  decisionHeadline,
  factRows,
  formatRemaining,
  parsePayloadText,
  rationaleMissing,
  reasonLabel,
  subjectText,
  suggestedPayloadText,
} from './viewModel';

interface VsCodeApi {
  postMessage(message: WebviewMessage): void;
  getState(): unknown;
  setState(state: PanelState): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const jsonDiffer = createJsonDiffer({ arrays: { detectMove: true, includeValueOnMove: false } });

function definitionList(rows: ReadonlyArray<{ key: string; text: string; block: boolean }>): HTMLElement {
  const list = h('dl', { class: 'facts' });
  for (const row of rows) {
    list.append(h('dt', {}, row.key), h('dd', {}, row.block ? h('pre', { class: 'json' }, row.text) : row.text));
  }
  return list;
}

// ---------------------------------------------------------------- rendering the invocation

function renderDiff(diff: DiffJson, index: number): HTMLElement {
  const parts: HTMLElement[] = [];
  if (diff.unified !== undefined) {
    parts.push(linesBlock(unifiedDiffLines(diff.unified), `${diff.title}: unified diff`));
  }
  if (diff.before !== undefined || diff.after !== undefined) {
    const lines = textDiffLines(diff.before ?? '', diff.after ?? '');
    parts.push(
      lines.length
        ? linesBlock(lines, `${diff.title}: line diff`)
        : h('p', { class: 'muted' }, 'The texts are identical.'),
    );
  }
  if (diff.beforeJson !== undefined || diff.afterJson !== undefined) {
    const before = diff.beforeJson ?? null;
    const after = diff.afterJson ?? null;
    // Never an unbounded structural diff: jsondiffpatch's array tables grow with items before × items after.
    const tooLarge = jsonDiffRefusal(before, after);
    if (tooLarge !== undefined) {
      parts.push(
        h(
          'p',
          { class: 'muted' },
          `The JSON values are too large to compare here (${tooLarge}); both are shown as they are.`,
        ),
        h('pre', { class: 'json', attrs: { 'aria-label': `${diff.title}: JSON before` } }, formatJsonValue(before)),
        h('pre', { class: 'json', attrs: { 'aria-label': `${diff.title}: JSON after` } }, formatJsonValue(after)),
      );
    } else {
      const changes = jsonDeltaChanges(jsonDiffer.diff(before, after));
      parts.push(
        changes.length
          ? jsonChangesList(changes, `${diff.title}: JSON changes`)
          : h('p', { class: 'muted' }, 'The JSON values are identical.'),
      );
    }
  }
  return h(
    'article',
    { class: 'diff', attrs: { 'aria-labelledby': `diff-${index}-title` } },
    h('h3', { id: `diff-${index}-title` }, diff.title),
    ...parts,
  );
}

function renderDecision(invocation: InvocationJson): HTMLElement | null {
  const decision = invocation.decision;
  if (!decision) return null;
  const rows = [
    { key: 'Decision', text: decision.decision, block: false },
    { key: 'By', text: decision.decided_by, block: false },
    { key: 'Automatic', text: decision.automatic ? 'yes' : 'no', block: false },
    ...(decision.rule ? [{ key: 'Rule', text: decision.rule, block: false }] : []),
    ...(decision.fallback
      ? [
          {
            key: 'Fallback',
            text: `${decision.fallback.policy ?? '?'} (${decision.fallback.trigger ?? '?'})`,
            block: false,
          },
        ]
      : []),
    { key: 'Rationale', text: decision.rationale || '—', block: decision.rationale.includes('\n') },
    { key: 'Decided at', text: new Date(decision.decided_at).toLocaleString(), block: false },
    ...(decision.decision_payload !== null && decision.decision_payload !== undefined
      ? [{ key: 'Payload', text: formatJsonValue(decision.decision_payload), block: true }]
      : []),
  ];
  return h(
    'section',
    {
      class: `section decision ${decision.decision}`,
      id: 'decision',
      attrs: { 'aria-labelledby': 'decision-title', tabindex: '-1' },
    },
    h('h2', { id: 'decision-title' }, decisionHeadline(decision)),
    definitionList(rows),
  );
}

function renderInvocation(invocation: InvocationJson): DocumentFragment {
  const { context } = invocation;
  const fragment = document.createDocumentFragment();
  const subject = subjectText(invocation.subject);
  fragment.append(
    h(
      'header',
      { class: 'head' },
      h(
        'h1',
        {},
        reasonLabel(invocation.reason_type),
        ' ',
        h('span', { class: `state ${invocation.state}` }, invocation.state.replace('_', ' ')),
      ),
      h('p', { class: 'summary' }, context.summary || '(no summary given)'),
      h(
        'p',
        { class: 'meta' },
        h('code', { class: 'reason' }, invocation.reason_type),
        ' from ',
        h('strong', { class: 'requester' }, invocation.requester),
        ` · priority ${invocation.priority} · opened ${new Date(invocation.created_at).toLocaleString()}`,
      ),
      subject ? h('p', { class: 'meta subject' }, subject) : null,
      h(
        'p',
        { class: 'meta ids' },
        `invocation ${invocation.invocation_id} · correlation ${invocation.correlation_id}`,
      ),
      h('p', { class: 'deadline', id: 'deadline', attrs: { role: 'timer' } }),
    ),
  );

  fragment.append(renderDecision(invocation) ?? '');
  if (context.risk.level || context.risk.notes.length) {
    fragment.append(
      section(
        'Risk',
        'risk',
        context.risk.level
          ? h(
              'p',
              { class: 'risk' },
              'Level: ',
              h('span', { class: `risk-level ${riskClass(context.risk.level)}` }, context.risk.level),
            )
          : null,
        context.risk.notes.length ? h('ul', {}, ...context.risk.notes.map((note) => h('li', {}, note))) : null,
      ),
    );
  }
  if (context.diffs.length)
    fragment.append(section(`Changes (${context.diffs.length})`, 'diffs', ...context.diffs.map(renderDiff)));
  const facts = factRows(context.facts);
  if (facts.length) fragment.append(section('Facts', 'facts', definitionList(facts)));
  if (context.prior_attempts.length) {
    fragment.append(
      section(
        'Prior attempts',
        'prior',
        h(
          'ol',
          {},
          ...context.prior_attempts.map((attempt) =>
            h('li', {}, typeof attempt === 'string' ? attempt : h('pre', { class: 'json' }, formatJsonValue(attempt))),
          ),
        ),
      ),
    );
  }
  const inference = factRows(context.inference);
  if (inference.length || context.score !== null) {
    fragment.append(
      section(
        'Inference',
        'inference',
        context.score !== null ? h('p', {}, `Score: ${context.score}`) : null,
        inference.length ? definitionList(inference) : null,
      ),
    );
  }
  if (invocation.proposed_actions.length || invocation.suggested_action) {
    fragment.append(
      section(
        'Proposed actions',
        'actions',
        invocation.suggested_action ? h('p', {}, 'Suggested: ', h('strong', {}, invocation.suggested_action)) : null,
        invocation.proposed_actions.length
          ? h('ul', {}, ...invocation.proposed_actions.map((action) => h('li', {}, action)))
          : null,
      ),
    );
  }
  return fragment;
}

function riskClass(level: string): string {
  const normalized = level.trim().toLowerCase();
  return ['low', 'medium', 'high', 'critical'].includes(normalized) ? `risk-${normalized}` : 'risk-other';
}

// ---------------------------------------------------------------- the page and its state

let current: InvocationJson | null = null;
let clockOffset = 0;
let nextRequestId = 1;
/** The latest decision sent: its error is shown even if an update about the invocation came first. */
let lastRequestId = 0;
let inFlight: { requestId: number; action: DecisionAction } | undefined;
/** Once the decision form was shown it stays (disabled after the decision), so its status is still read out. */
let formShown = false;

const content = byId<HTMLElement>('content');
const form = byId<HTMLFormElement>('decide');
const rationale = byId<HTMLTextAreaElement>('rationale');
const rationaleRequired = byId<HTMLElement>('rationale-required');
const modifyBox = byId<HTMLElement>('modify-box');
const payload = byId<HTMLTextAreaElement>('payload');
const payloadError = byId<HTMLElement>('payload-error');
const status = byId<HTMLElement>('status');
const errorBox = byId<HTMLElement>('error');
const buttons = {
  approve: byId<HTMLButtonElement>('approve'),
  deny: byId<HTMLButtonElement>('deny'),
  modify: byId<HTMLButtonElement>('modify'),
  defer: byId<HTMLButtonElement>('defer'),
  send: byId<HTMLButtonElement>('send-modify'),
};

/** The decision buttons: none while a decision is not possible, and none but Modify… (which only opens the editor) without a rationale. */
let formEnabled = false;

function setEnabled(enabled: boolean): void {
  formEnabled = enabled;
  rationale.disabled = !enabled;
  payload.disabled = !enabled;
  updateDecisionButtons();
}

function updateDecisionButtons(): void {
  const missing = rationaleMissing(rationale.value);
  for (const button of [buttons.approve, buttons.deny, buttons.defer, buttons.send])
    button.disabled = !formEnabled || missing;
  buttons.modify.disabled = !formEnabled;
  rationaleRequired.hidden = !formEnabled || !missing;
  rationale.setAttribute('aria-invalid', String(formEnabled && missing));
}

function showError(message: string): void {
  errorBox.textContent = message;
  errorBox.hidden = message === '';
}

function updateCountdown(): void {
  const deadline = document.getElementById('deadline');
  if (!deadline || !current) return;
  const at = Date.parse(current.deadline_ts);
  const when = new Date(at).toLocaleTimeString();
  deadline.textContent =
    current.state === 'pending'
      ? `Deadline ${when} · ${formatRemaining(at - (Date.now() + clockOffset))}${current.extensions ? ` · extended ${current.extensions}×` : ''}`
      : `Deadline was ${when}`;
  deadline.classList.toggle('urgent', current.state === 'pending' && at - (Date.now() + clockOffset) < 60_000);
}

function show(invocation: InvocationJson | null, unavailable?: string): void {
  const wasPending = current?.state === 'pending';
  current = invocation;
  content.setAttribute('aria-busy', 'false');
  if (!invocation) {
    content.replaceChildren(h('p', { class: 'muted' }, unavailable ?? 'The invocation is not available.'));
    form.hidden = true;
    return;
  }
  content.replaceChildren(renderInvocation(invocation));
  updateCountdown();
  const pending = invocation.state === 'pending';
  formShown ||= pending;
  form.hidden = !formShown;
  if (!pending) {
    setEnabled(false);
    modifyBox.hidden = true;
    buttons.modify.setAttribute('aria-expanded', 'false');
    inFlight = undefined;
    if (wasPending && invocation.decision) status.textContent = `${decisionHeadline(invocation.decision)}.`;
  } else if (!inFlight) {
    setEnabled(true);
  }
  if (!payload.dataset.touched) payload.value = suggestedPayloadText(invocation);
}

function decide(action: DecisionAction): void {
  if (!current || current.state !== 'pending' || inFlight) return;
  if (rationaleMissing(rationale.value)) {
    updateDecisionButtons();
    rationale.focus();
    return;
  }
  showError('');
  const message: { type: 'decide'; requestId: number; action: DecisionAction; rationale: string; payload?: unknown } = {
    type: 'decide',
    requestId: nextRequestId++,
    action,
    rationale: rationale.value,
  };
  if (action === 'modify') {
    const parsed = parsePayloadText(payload.value);
    if (!parsed.ok) {
      payloadError.textContent = parsed.error;
      payloadError.hidden = false;
      payload.setAttribute('aria-invalid', 'true');
      payload.focus();
      return;
    }
    message.payload = parsed.value;
  }
  payloadError.hidden = true;
  payload.removeAttribute('aria-invalid');
  inFlight = { requestId: message.requestId, action };
  lastRequestId = message.requestId;
  setEnabled(false);
  status.textContent = `Sending ${action}…`;
  vscode.postMessage(message);
}

function receive(message: HostMessage): void {
  switch (message.type) {
    case 'invocation':
      clockOffset = message.now - Date.now();
      vscode.setState({ invocationId: message.invocationId });
      byId('operator').textContent = message.operator;
      show(message.invocation, message.unavailable);
      break;
    case 'result':
      if (inFlight?.requestId === message.requestId) inFlight = undefined;
      show(message.invocation);
      if (message.invocation.decision) status.textContent = `${decisionHeadline(message.invocation.decision)}.`;
      document.getElementById('decision')?.focus();
      break;
    case 'error':
      if (message.requestId !== lastRequestId) return;
      inFlight = undefined;
      status.textContent = '';
      showError(message.message);
      if (current?.state === 'pending') setEnabled(true);
      break;
  }
}

form.addEventListener('submit', (event) => event.preventDefault());
buttons.approve.addEventListener('click', () => decide('approve'));
buttons.deny.addEventListener('click', () => decide('deny'));
buttons.defer.addEventListener('click', () => decide('defer'));
buttons.send.addEventListener('click', () => decide('modify'));
buttons.modify.addEventListener('click', () => {
  const open = modifyBox.hidden;
  modifyBox.hidden = !open;
  buttons.modify.setAttribute('aria-expanded', String(open));
  if (open) payload.focus();
});
rationale.addEventListener('input', updateDecisionButtons);
payload.addEventListener('input', () => {
  payload.dataset.touched = 'true';
  payloadError.hidden = true;
  payload.removeAttribute('aria-invalid');
});
window.addEventListener('message', (event: MessageEvent) => {
  const message = parseHostMessage(event.data);
  if (message) receive(message);
});
setInterval(updateCountdown, 1000);
vscode.postMessage({ type: 'ready' });
