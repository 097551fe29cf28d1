// The negotiation panel: a debate (its policy, its rounds as a timeline of diffs, why it stopped, the decision) or a
// room artifact (the artifact and its diff, each critic's vote, the aggregate against the thresholds, the decision),
// and — when a person must decide — the decision form. Everything an agent sent is inserted with textContent only,
// never parsed as HTML.
import { create as createJsonDiffer } from 'jsondiffpatch';
import { h, byId, section } from '../shared/dom';
import { jsonChangesList, linesBlock } from '../shared/diffView';
import {
  parseHostMessage,
  type DebateJson,
  type HostMessage,
  type NegotiationAction,
  type NegotiationTarget,
  type PanelState,
  type RoomJson,
  type WebviewMessage,
} from './protocol';
import {
  REQUEST_REVISION_PAYLOAD,
  debateActionLabels,
  ROOM_ACTION_LABELS,
  aggregateRows,
  bestRound,
  debateDecidable,
  decisionText,
  payloadNote,
  policyRows,
  proposalDiff,
  rationaleMissing,
  roomDecidable,
  roomHeadline,
  roundFacts,
  roundHeadline,
  stopText,
  num,
  thresholdRows,
  time,
  voteHeadline,
  type ProposalDiff,
} from './viewModel';

interface VsCodeApi {
  postMessage(message: WebviewMessage): void;
  getState(): unknown;
  setState(state: PanelState): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const jsonDiffer = createJsonDiffer({ arrays: { detectMove: true, includeValueOnMove: false } });
const differ = (before: unknown, after: unknown): unknown => jsonDiffer.diff(before, after);

function facts(rows: ReadonlyArray<{ key: string; text: string }>): HTMLElement {
  const list = h('dl', { class: 'facts' });
  for (const row of rows) list.append(h('dt', {}, row.key), h('dd', {}, row.text));
  return list;
}

function textList(title: string, items: readonly string[]): HTMLElement | null {
  if (!items.length) return null;
  return h('div', { class: 'vote-list' }, h('h4', {}, title), h('ul', {}, ...items.map((item) => h('li', {}, item))));
}

// ---------------------------------------------------------------- diffs

function diffBlock(diff: ProposalDiff, label: string): HTMLElement {
  switch (diff.kind) {
    case 'initial':
      return h('pre', { class: 'payload', attrs: { 'aria-label': label, tabindex: '0' } }, diff.text);
    case 'json':
      return jsonChangesList(diff.changes, `${label}: JSON changes`);
    case 'text':
      return linesBlock(diff.lines, `${label}: line diff`);
    case 'same':
      return h('p', { class: 'muted' }, 'Identical to the previous version.');
    case 'binary':
      return h('p', { class: 'muted' }, diff.note);
  }
}

// ---------------------------------------------------------------- a debate

function renderDebate(debate: DebateJson): HTMLElement[] {
  const best = bestRound(debate);
  const header = h(
    'header',
    { class: 'header' },
    h('h1', {}, `Debate: ${debate.topic}`),
    h(
      'p',
      { class: 'summary' },
      `${debate.participants.join(', ')} · ${debate.state} · ${debate.rounds.length} round${debate.rounds.length === 1 ? '' : 's'}` +
        ` · ${debate.tokensUsed} tokens · opened by ${debate.openedBy} ${time(debate.openedAt)}`,
    ),
    h('p', { class: `status-line state-${debate.state}`, id: 'stop' }, stopText(debate)),
  );
  const timeline = h('ol', { class: 'timeline', attrs: { 'aria-label': 'Rounds' } });
  debate.rounds.forEach((round, index) => {
    const previous = index > 0 ? debate.rounds[index - 1]!.payload : null;
    const evaluations = round.evaluations.map((e) =>
      h(
        'li',
        {},
        h('span', { class: 'critic' }, e.from),
        ` · score ${num(e.score)}${e.llmConfidence === null ? '' : ` · inference ${num(e.llmConfidence)}`} · ${e.source}`,
        e.notes ? h('p', { class: 'notes' }, e.notes) : null,
      ),
    );
    timeline.append(
      h(
        'li',
        { class: `round${round.n === best ? ' best' : ''}`, attrs: { 'aria-label': `Round ${round.n}` } },
        h('h3', {}, roundHeadline(round), round.n === best ? h('span', { class: 'badge' }, 'best score') : null),
        facts(roundFacts(round)),
        h('p', { class: 'muted' }, payloadNote(round.payload)),
        diffBlock(
          proposalDiff(previous, round.payload, differ),
          `Round ${round.n}${previous ? ` against round ${round.n - 1}` : ''}`,
        ),
        evaluations.length
          ? h('div', {}, h('h4', {}, 'Evaluations'), h('ul', { class: 'evaluations' }, ...evaluations))
          : h('p', { class: 'muted' }, 'Not evaluated yet.'),
      ),
    );
  });
  const parts: HTMLElement[] = [header, section('Effective policy', 'policy', facts(policyRows(debate)))];
  parts.push(
    section('Rounds', 'rounds', debate.rounds.length ? timeline : h('p', { class: 'muted' }, 'No proposal yet.')),
  );
  const decided = decisionText(debate);
  if (decided && debate.decision) {
    parts.push(
      section(
        'Decision',
        'decision',
        h('p', {}, decided),
        debate.decision.rationale ? h('p', { class: 'rationale' }, debate.decision.rationale) : null,
        h('p', { class: 'muted' }, `Result: ${payloadNote(debate.decision.result)}`),
        diffBlock(proposalDiff(null, debate.decision.result, differ), 'Decided result'),
      ),
    );
  }
  return parts;
}

// ---------------------------------------------------------------- a room

function renderRoom(room: RoomJson): HTMLElement[] {
  const header = h(
    'header',
    { class: 'header' },
    h('h1', {}, roomHeadline(room)),
    h(
      'p',
      { class: 'summary' },
      `room ${room.roomId} · critics ${room.requestedCritics.join(', ')} · submitted ${time(room.submittedAt)} · policy version ${room.policyVersion}`,
    ),
  );
  const artifact = section(
    room.previous ? `Artifact (revision ${room.revision} against ${room.revision - 1})` : 'Artifact',
    'artifact',
    h('p', { class: 'muted' }, payloadNote(room.artifact)),
    diffBlock(proposalDiff(room.previous, room.artifact, differ), 'Artifact'),
  );
  const votes = h('div', { class: 'votes' });
  for (const vote of room.votes) {
    votes.append(
      h(
        'article',
        { class: `vote ${vote.passed ? 'passed' : 'failed'}`, attrs: { 'aria-label': `Vote of ${vote.criticId}` } },
        h('h3', {}, h('span', { class: 'critic' }, vote.criticId), ' · ', voteHeadline(vote)),
        textList('Strengths', vote.strengths),
        textList('Weaknesses', vote.weaknesses),
        textList('Recommendations', vote.recommendations),
      ),
    );
  }
  const pending = room.requestedCritics.filter((c) => !room.votes.some((v) => v.criticId === c));
  if (pending.length) votes.append(h('p', { class: 'muted' }, `Not voted yet: ${pending.join(', ')}`));
  const thresholds = h(
    'table',
    { class: 'thresholds' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { attrs: { scope: 'col' } }, 'Threshold'),
        h('th', { attrs: { scope: 'col' } }, 'Value'),
        h('th', { attrs: { scope: 'col' } }, 'Result'),
      ),
    ),
  );
  const body = h('tbody');
  for (const row of thresholdRows(room)) {
    body.append(
      h(
        'tr',
        { class: row.pass === null ? 'unchecked' : row.pass ? 'pass' : 'fail' },
        h('td', {}, row.label),
        h('td', {}, row.text),
        h('td', { class: 'mark' }, row.pass === null ? '' : row.pass ? '✓ ' : '✗ ', row.mark),
      ),
    );
  }
  thresholds.append(body);
  const parts = [
    header,
    artifact,
    section('Votes', 'votes', votes),
    section(
      'Aggregate',
      'aggregate',
      room.aggregate ? facts(aggregateRows(room)) : h('p', { class: 'muted' }, 'No vote yet.'),
      thresholds,
    ),
  ];
  if (room.decision) {
    parts.push(
      section(
        'Decision',
        'decision',
        h(
          'p',
          {},
          `${room.decision.outcome}${room.decision.final ? '' : ' (not final)'} · decided by ${room.decision.decidedBy} · ${time(room.decision.decidedAt)}`,
        ),
        h('p', { class: 'rationale' }, room.decision.reason),
        room.decision.escalation.length ? textList('Escalated because', room.decision.escalation) : null,
      ),
    );
  }
  return parts;
}

// ---------------------------------------------------------------- the decision form

const content = byId<HTMLElement>('content');
const form = byId<HTMLFormElement>('decide');
const rationale = byId<HTMLTextAreaElement>('rationale');
const payload = byId<HTMLTextAreaElement>('payload');
const modifyBox = byId<HTMLElement>('modify-box');
const payloadError = byId<HTMLElement>('payload-error');
const status = byId<HTMLElement>('status');
const errorBox = byId<HTMLElement>('error');
const buttons: Record<NegotiationAction, HTMLButtonElement> = {
  approve: byId('approve'),
  modify: byId('modify'),
  deny: byId('deny'),
};
const sendModify = byId<HTMLButtonElement>('send-modify');
const requiredHint = byId<HTMLElement>('rationale-required');

let target: NegotiationTarget | undefined;
let decidable = false;
let inFlight: number | undefined;
let nextRequestId = 1;

function updateButtons(): void {
  const missing = rationaleMissing(rationale.value);
  requiredHint.hidden = !missing;
  for (const button of [...Object.values(buttons), sendModify])
    button.disabled = !decidable || inFlight !== undefined || missing;
}

function showError(text: string): void {
  errorBox.textContent = text;
  errorBox.hidden = text === '';
}

function show(message: Extract<HostMessage, { type: 'show' }>): void {
  target = message.target;
  vscode.setState(message.target);
  byId('operator').textContent = message.operator;
  const parts = message.debate
    ? renderDebate(message.debate)
    : message.room
      ? renderRoom(message.room)
      : [h('p', { class: 'muted' }, message.unavailable ?? 'Nothing to show.')];
  content.replaceChildren(...parts);
  content.setAttribute('aria-busy', 'false');
  decidable = message.debate ? debateDecidable(message.debate) : message.room ? roomDecidable(message.room) : false;
  const labels = message.debate ? debateActionLabels(message.debate) : ROOM_ACTION_LABELS;
  for (const action of Object.keys(buttons) as NegotiationAction[]) buttons[action].textContent = labels[action];
  buttons.modify.setAttribute('aria-expanded', String(!modifyBox.hidden));
  form.hidden = !decidable;
  if (!decidable) modifyBox.hidden = true;
  updateButtons();
}

function decide(action: NegotiationAction, withPayload: boolean): void {
  if (!target || !decidable || inFlight !== undefined) return;
  if (rationaleMissing(rationale.value)) {
    updateButtons();
    rationale.focus();
    return;
  }
  showError('');
  const message: {
    type: 'decide';
    requestId: number;
    action: NegotiationAction;
    rationale: string;
    payload?: unknown;
  } = {
    type: 'decide',
    requestId: nextRequestId++,
    action,
    rationale: rationale.value,
  };
  if (target.kind === 'room' && action === 'modify') message.payload = REQUEST_REVISION_PAYLOAD;
  if (withPayload) {
    try {
      message.payload = JSON.parse(payload.value);
    } catch (err) {
      payloadError.textContent = `The payload is not valid JSON: ${err instanceof Error ? err.message : String(err)}`;
      payloadError.hidden = false;
      payload.focus();
      return;
    }
  }
  payloadError.hidden = true;
  inFlight = message.requestId;
  updateButtons();
  status.textContent = 'Sending the decision…';
  vscode.postMessage(message);
}

function receive(message: HostMessage): void {
  switch (message.type) {
    case 'show':
      show(message);
      break;
    case 'result':
      if (inFlight !== message.requestId) return;
      inFlight = undefined;
      status.textContent = message.message;
      updateButtons();
      break;
    case 'error':
      if (inFlight !== message.requestId) return;
      inFlight = undefined;
      status.textContent = '';
      showError(message.message);
      updateButtons();
      break;
  }
}

form.addEventListener('submit', (event) => event.preventDefault());
buttons.approve.addEventListener('click', () => decide('approve', false));
buttons.deny.addEventListener('click', () => decide('deny', false));
buttons.modify.addEventListener('click', () => {
  if (target?.kind === 'room') {
    decide('modify', false);
    return;
  }
  const open = modifyBox.hidden;
  modifyBox.hidden = !open;
  buttons.modify.setAttribute('aria-expanded', String(open));
  if (open) payload.focus();
});
sendModify.addEventListener('click', () => decide('modify', true));
rationale.addEventListener('input', updateButtons);
payload.addEventListener('input', () => {
  payloadError.hidden = true;
});
window.addEventListener('message', (event: MessageEvent) => {
  const message = parseHostMessage(event.data);
  if (message) receive(message);
});
vscode.postMessage({ type: 'ready' });
