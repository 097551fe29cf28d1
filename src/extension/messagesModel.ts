import type { MessageDetail, MessageQuery, MessageSummary, StoredEvent } from '../core/api';
import { formatEvent } from '../core/api';

/** What the operator chose in "Filter Messages"; each field set must match. */
export interface MessagesViewFilter {
  /** The producer or the recipient. */
  readonly agentId?: string;
  readonly correlationId?: string;
  readonly state?: string;
  readonly messageType?: string;
}

export const NO_MESSAGE_FILTER: MessagesViewFilter = {};

/** The lifecycle states of RFC §11, in their order, for the filter. */
export const MESSAGE_STATES = [
  'SENT',
  'RECEIVED',
  'READ',
  'FULFILLED',
  'REJECTED',
  'FAILED',
  'TIMED_OUT',
  'RETRYING',
] as const;

export function isMessageFilterSet(filter: MessagesViewFilter): boolean {
  return describeMessageFilter(filter) !== undefined;
}

/** The core's query for `filter`. */
export function messageQuery(filter: MessagesViewFilter, limit: number): MessageQuery {
  return {
    ...(filter.agentId ? { agentId: filter.agentId } : {}),
    ...(filter.correlationId ? { correlationId: filter.correlationId } : {}),
    ...(filter.state ? { state: filter.state } : {}),
    ...(filter.messageType ? { messageType: filter.messageType } : {}),
    limit,
  };
}

/** A short text for the view's description, e.g. "agent echo-1 · FULFILLED · DATA"; undefined without a filter. */
export function describeMessageFilter(filter: MessagesViewFilter): string | undefined {
  const parts: string[] = [];
  if (filter.agentId) parts.push(`agent ${filter.agentId}`);
  if (filter.state) parts.push(filter.state);
  if (filter.messageType) parts.push(filter.messageType);
  if (filter.correlationId) parts.push(`correlation ${clip(filter.correlationId, 24)}`);
  return parts.length ? parts.join(' · ') : undefined;
}

/** "4 s", "3 min", "2 h", "5 d": how long ago `then` was at `now`. */
export function age(then: number, now: number): string {
  const s = Math.max(0, Math.floor((now - then) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

/** The row of a message: the facts that matter first (type and state), the rest in the description. */
export function messageRow(m: MessageSummary, now: number): { label: string; description: string; tooltip: string } {
  const state = m.errorCode ? `${m.state} ${m.errorCode}` : m.state;
  return {
    label: `${m.messageType} · ${state}`,
    description: `${m.producerId} → ${m.recipientId} · ${age(m.acceptedAt, now)} · ${shortId(m.correlationId)}`,
    tooltip: [
      `${m.messageType} · ${state}${m.tracked ? '' : ' (not tracked: no protocol ACKs)'}`,
      `message ${m.messageId}`,
      `from ${m.producerId} to ${m.recipientId}`,
      `correlation ${m.correlationId}`,
      `${m.contentType || 'no content type'}, ${m.size} bytes`,
      `accepted ${new Date(m.acceptedAt).toLocaleString()} · last change ${new Date(m.updatedAt).toLocaleString()}`,
    ].join('\n'),
  };
}

/** The first 8 characters of an id (a UUID's first group), for narrow rows. */
export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

/** A message's detail as plain text for a read-only document: envelope, payload and lifecycle history. */
export function messageDetailText(d: MessageDetail): string {
  const lines: string[] = [];
  lines.push(`${d.messageType} message ${d.messageId}`);
  lines.push(
    `state        ${d.state}${d.errorCode ? ` (${d.errorCode})` : ''}${d.tracked ? '' : ' — not tracked: no protocol ACKs'}`,
  );
  lines.push(`from         ${d.producerId}`);
  lines.push(`to           ${d.recipientId}`);
  lines.push(`correlation  ${d.correlationId}`);
  if (d.ackFor) lines.push(`${d.messageType === 'ACKNOWLEDGEMENT' ? 'acknowledges' : 'copy of    '}  ${d.ackFor}`);
  lines.push(`accepted     ${iso(d.acceptedAt)}`);
  lines.push(`last change  ${iso(d.updatedAt)}`);
  lines.push(
    `delivery     ${d.delivery}${d.deliverySeq !== null ? `, seq ${d.deliverySeq}` : ''}, ${d.deliveryAttempts} attempt${d.deliveryAttempts === 1 ? '' : 's'}${d.deliveredAt !== null ? `, delivered ${iso(d.deliveredAt)}` : ''}`,
  );
  lines.push(`lane         ${d.lane}`);
  if (d.ackDeadline !== null) lines.push(`ACK due      ${iso(d.ackDeadline)}`);
  if (d.expiresAt !== null) lines.push(`expires      ${iso(d.expiresAt)}`);
  lines.push('');
  lines.push('Lifecycle');
  const width = Math.max(9, ...d.history.map((s) => (s.state ?? '').length));
  for (const step of d.history) {
    const cause = step.ackMessageId ? ` — caused by ACK ${step.ackMessageId}` : '';
    const detail =
      step.detail && !step.ackMessageId
        ? ` — ${step.detail}`
        : step.ackMessageId && step.detail && step.detail !== `ACK ${step.ackMessageId}`
          ? ` (${step.detail.replace(`ACK ${step.ackMessageId} `, '')})`
          : '';
    lines.push(`  ${step.time}  ${(step.state ?? '·').padEnd(width)}  ${step.event}${cause}${detail}`);
  }
  lines.push('');
  lines.push('Envelope');
  for (const [name, value] of Object.entries(d.envelope))
    lines.push(`  ${name.padEnd(22)} ${value === null || value === '' ? '—' : String(value)}`);
  lines.push('');
  lines.push(
    `Payload (${d.contentType || 'no content type'}, ${d.payload.bytes} bytes${d.payload.encoding === 'base64' ? ', base64' : ''})`,
  );
  if (d.payload.note) lines.push(`  [${d.payload.note}]`);
  if (d.payload.text !== undefined && d.payload.text !== '') lines.push(d.payload.text);
  return lines.join('\n') + '\n';
}

/** An agent's log events as text, one line each (the Output channel's format), oldest first. */
export function agentEventsText(agentId: string, events: readonly StoredEvent[], scanWindow: number): string {
  const header = [
    `Log events about agent ${agentId}: its own, and those that name it (agent_id, to, producer_id),`,
    `among the newest ${scanWindow.toLocaleString('en-US')} events of the log; ${events.length} found, oldest first.`,
    '',
  ];
  return [...header, ...events.map((e) => formatEvent(e))].join('\n') + '\n';
}

/** What a SendMessage refusal means for the person who sent it. */
export const SEND_ERROR_MEANINGS: Readonly<Record<string, string>> = {
  VALIDATION_ERROR: 'the message is malformed (e.g. the payload is not valid JSON)',
  NO_ROUTE: 'no such agent is registered',
  PERMISSION_DENIED: 'the coordinator may not send this',
  UNSUPPORTED_MESSAGE_TYPE: 'the agent does not accept this content type (see its modalities in the Agents view)',
  OVERSIZE_PAYLOAD: 'the payload is larger than a DATA message may be',
  TTL_EXPIRED: 'the message expired before it could be accepted',
  BUFFER_FULL:
    "the agent's inbox is full (too many messages not yet READ) or the store is at its disk budget; try again later",
  DUPLICATE_DETECTED: 'the same message was already sent',
  ALREADY_IN_PROGRESS: 'the same message is already under way',
  INTERNAL_ERROR: 'a fault in the coordinator; see the SW4RM log',
};

/** The text of a refusal for a notification: the code, what it means, and the router's reason. */
export function refusalText(code: string, reason: string): string {
  const meaning = SEND_ERROR_MEANINGS[code];
  const detail = reason.startsWith(`${code}: `) ? reason.slice(code.length + 2) : reason;
  // The reason may carry agent-supplied text: without brackets, a notification renders no link from it.
  return `${code}${meaning ? ` — ${meaning}` : ''}. ${clip(detail, 300)}`.replace(/[[\]]/g, '');
}

/** Whether `text` is a JSON document (what application/json requires). */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
