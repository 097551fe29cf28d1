import { isoUtc } from '../../../core/clock';
import type { Coordinator } from '../../../core/coordinator';
import type { Disposable } from '../../../core/events';
import { ackPayload, agentEnvelope, derivedToken } from '../../../core/router/agentEnvelope';
import { baseContentType, decodeUtf8, type Envelope } from '../../../core/router/envelope';
import { NOT_READ } from '../../../core/router/inbox';
import { isTerminal } from '../../../core/router/lifecycle';
import { StreamRefusal, type InboxSink, type SendResult } from '../../../core/router/router';
import { refusal } from './errors';
import {
  BridgeToolError,
  type BridgeCaller,
  type BridgeTool,
  type BridgeToolContext,
  type BridgeToolOutput,
} from '../model';

/** list_agents answers at most this many agents (ordered by id), with `more` when there are others. */
export const LIST_AGENTS_MAX = 500;
/** read_inbox: the most messages one call returns, and the longest it waits for the first one. */
export const READ_MAX = 50;
export const READ_DEFAULT = 10;
export const READ_WAIT_MAX_MS = 30_000;
/**
 * A message whose payload is a file (1 MiB or more) reaches the inbox after the file is read; a read that finds
 * such messages queued and none delivered yet waits this long for them even with wait_ms 0.
 */
export const READ_LOAD_GRACE_MS = 5_000;
/** read_inbox returns at most this many acknowledgements of the caller's own messages per call (the rest are counted). */
export const READ_ACKS_MAX = 200;

/** An idempotency key or correlation id the agent names (bounded like the envelope's identifiers). */
const IDENTIFIER = { type: 'string', minLength: 1, maxLength: 200 } as const;
const AGENT_ID = { type: 'string', minLength: 1, maxLength: 128 } as const;
const MESSAGE_ID = { type: 'string', minLength: 1, maxLength: 64 } as const;

/** The envelope the caller sends through the router: producer_id is always the caller. */
function envelopeFrom(
  coordinator: Coordinator,
  caller: BridgeCaller,
  messageType: string,
  payload: Uint8Array,
  contentType: string,
  correlationId: string,
  idempotencyToken: string,
): Envelope {
  return agentEnvelope(coordinator, caller.agentId, messageType, payload, contentType, correlationId, idempotencyToken);
}

/**
 * The router's answer (Router.submit, as SendMessage calls it), once durable (as SendMessage answers: answerWhenDurable)
 * unless `durably` is false (the caller waits once for several).
 */
async function submit(
  tool: BridgeToolContext,
  envelope: Envelope,
  to: string | undefined,
  durably = true,
): Promise<SendResult> {
  const { coordinator, ctx } = tool;
  let result: SendResult;
  try {
    result = await coordinator.router.submit(envelope, ctx, { to, receivedAt: coordinator.clock.now() });
  } catch (err) {
    coordinator.log.internalError('router', ctx.correlationId, err);
    throw new BridgeToolError('INTERNAL_ERROR', `the message was not accepted: ${(err as Error).message}`, true);
  }
  if (durably) await durable(coordinator);
  return result;
}

async function durable(coordinator: Coordinator): Promise<void> {
  try {
    await coordinator.store.whenDurable();
  } catch (err) {
    throw new BridgeToolError('INTERNAL_ERROR', `the store could not commit: ${(err as Error).message}`, true);
  }
}

/** A router refusal as the tool's error: the router's code, its reason without the code prefix (errors.ts decides retryable). */
function routerRefusal(result: Extract<SendResult, { accepted: false }>): BridgeToolError {
  const prefix = `${result.code}: `;
  return refusal(result.code, result.reason.startsWith(prefix) ? result.reason.slice(prefix.length) : result.reason);
}

/** The payload's bytes and content type from send_message's arguments. */
export function payloadOf(payload: unknown, contentType: string | undefined): { bytes: Buffer; contentType: string } {
  if (typeof payload === 'string')
    return { bytes: Buffer.from(payload, 'utf8'), contentType: contentType ?? 'text/plain; charset=utf-8' };
  const type = contentType ?? 'application/json';
  const base = baseContentType(type);
  if (base !== undefined && base !== 'application/json' && !base.endsWith('+json')) {
    throw new BridgeToolError(
      'VALIDATION_ERROR',
      `send_message: a JSON payload (object or array) needs a JSON content_type, not ${type}; send text as a string`,
    );
  }
  return { bytes: Buffer.from(JSON.stringify(payload), 'utf8'), contentType: type };
}

/** A delivered payload for the model: JSON parsed, UTF-8 text as text, anything else base64. */
export function renderPayload(
  bytes: Uint8Array,
  contentType: string,
): { payload: unknown; payload_encoding: 'json' | 'text' | 'base64' } {
  const base = baseContentType(contentType) ?? '';
  let text: string | undefined;
  try {
    text = decodeUtf8(bytes);
  } catch {
    text = undefined;
  }
  if (text !== undefined && (base === 'application/json' || base.endsWith('+json'))) {
    try {
      return { payload: JSON.parse(text) as unknown, payload_encoding: 'json' };
    } catch {
      return { payload: text, payload_encoding: 'text' };
    }
  }
  if (
    text !== undefined &&
    (base.startsWith('text/') || base === '' || base.endsWith('+xml') || base === 'application/xml')
  ) {
    return { payload: text, payload_encoding: 'text' };
  }
  return { payload: Buffer.from(bytes).toString('base64'), payload_encoding: 'base64' };
}

// ---------------------------------------------------------------------------------------------------------------

const listAgents: BridgeTool = {
  name: 'list_agents',
  description:
    'Lists the agents registered in the swarm: id, name, capabilities, lifecycle state and presence (online, unavailable, ' +
    "disconnected). Use the ids as send_message's `to`.",
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: true, openWorldHint: false },
  run(_args, { coordinator, caller }) {
    const agents = coordinator.registry.list();
    return {
      agents: agents.slice(0, LIST_AGENTS_MAX).map((agent) => ({
        agent_id: agent.descriptor.agentId,
        name: agent.descriptor.name,
        description: agent.descriptor.description,
        capabilities: agent.descriptor.capabilities,
        state: agent.state,
        presence: agent.presence,
        ...(agent.descriptor.agentId === caller.agentId ? { you: true } : {}),
      })),
      total: agents.length,
      ...(agents.length > LIST_AGENTS_MAX
        ? { more: true, note: `only the first ${LIST_AGENTS_MAX} agents (by id) are listed` }
        : {}),
    };
  },
};

const sendMessage: BridgeTool = {
  name: 'send_message',
  description:
    'Sends a message to another agent (a DATA envelope from you through the router). `payload` is text (a string) or JSON (an ' +
    "object or array). Give an `idempotency_key` when you may retry: a retry with the same key answers the first call's outcome " +
    "instead of sending twice. Refusals carry the router's code (NO_ROUTE: no such agent; BUFFER_FULL: its inbox is full, retry later).",
  inputSchema: {
    type: 'object',
    properties: {
      to: { ...AGENT_ID, description: "The recipient's agent id (list_agents)." },
      payload: {
        description: 'The message: a string (sent as text/plain) or a JSON object or array (sent as application/json).',
        anyOf: [{ type: 'string' }, { type: 'object' }, { type: 'array' }],
      },
      content_type: {
        type: 'string',
        minLength: 3,
        maxLength: 256,
        description: 'MIME type; default text/plain for a string, application/json otherwise.',
      },
      correlation_id: {
        ...IDENTIFIER,
        description:
          'The conversation this message belongs to (e.g. the correlation_id of the message you answer); default a new one.',
      },
      idempotency_key: {
        ...IDENTIFIER,
        description: 'Names this send: a retry with the same key is answered with the first outcome (RFC §11.2).',
      },
    },
    required: ['to', 'payload'],
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(args, tool) {
    const { coordinator, caller } = tool;
    const to = String(args.to);
    const { bytes, contentType } = payloadOf(args.payload, args.content_type as string | undefined);
    const key = args.idempotency_key as string | undefined;
    const token =
      key !== undefined
        ? derivedToken('send', caller.agentId, key)
        : derivedToken('send', caller.agentId, coordinator.ids.uuid());
    const correlationId = (args.correlation_id as string | undefined) ?? coordinator.ids.uuid();
    const envelope = envelopeFrom(coordinator, caller, 'DATA', bytes, contentType, correlationId, token);
    const result = await submit(tool, envelope, to);
    if (result.accepted) return { accepted: true, message_id: result.messageId, correlation_id: correlationId };
    // The same operation again (RFC §11.2): the first call's message, as it stands.
    if (key !== undefined && (result.code === 'DUPLICATE_DETECTED' || result.code === 'ALREADY_IN_PROGRESS')) {
      const original = result.details?.original_message_id;
      if (typeof original === 'string') {
        return {
          accepted: true,
          message_id: original,
          correlation_id: coordinator.router.message(original)?.envelope.correlationId ?? correlationId,
          duplicate: true,
          state: result.details?.original_status ?? '',
          reason: `a send with idempotency_key ${JSON.stringify(key)} was accepted before; this is its outcome`,
        };
      }
    }
    throw routerRefusal(result);
  },
};

/** Bridge reads in progress, per coordinator: one at a time per agent (ReadState). */
const reading = new WeakMap<Coordinator, Map<string, ReadState>>();

interface Delivered {
  readonly seq: number;
  readonly envelope: Envelope;
}

/**
 * Attaches a temporary inbox sink for the caller with a delivery window of `max` (the router hands it at most `max`
 * messages that need an answer; the rest stay queued, costing no delivery attempt), collects what the router delivers
 * (waiting up to `waitMs` on the coordinator's Clock for the first message), then detaches.
 */
async function collect(tool: BridgeToolContext, max: number, waitMs: number): Promise<Delivered[]> {
  const { coordinator, caller, ctx, signal } = tool;
  const { router, clock } = coordinator;
  const delivered: Delivered[] = [];
  let wake: (() => void) | undefined;
  let closed: string | undefined;
  // A message the router keeps; live-only envelopes (the coordinator's heartbeats and join/leave notices, written only to
  // an open stream and never stored) are not pending messages, and acknowledgements are answered apart.
  const isMessage = (d: Delivered) =>
    d.envelope.messageType !== 'ACKNOWLEDGEMENT' && router.message(d.envelope.messageId) !== undefined;
  const isAck = (d: Delivered) => d.envelope.messageType === 'ACKNOWLEDGEMENT';
  const sink: InboxSink = {
    deliver(seq, envelope) {
      delivered.push({ seq, envelope });
      // A message, or an acknowledgement of one the caller sent (what an agent waiting for an answer waits for), ends the wait.
      const last = delivered[delivered.length - 1];
      if (isMessage(last) || isAck(last)) wake?.();
    },
    close(reason, detail) {
      closed = `${reason}: ${detail}`;
      wake?.();
    },
  };
  let attached: Disposable;
  try {
    attached = router.attach(caller.agentId, sink, ctx, undefined, max);
  } catch (err) {
    if (err instanceof StreamRefusal) throw new BridgeToolError('FAILED_PRECONDITION', err.message);
    throw err;
  }
  try {
    // Deliveries reach a sink after their commit: once durable, everything dispatched now has arrived.
    await durable(coordinator);
    const messages = () => delivered.filter((d) => isMessage(d) || isAck(d)).length;
    let wait = waitMs;
    if (messages() === 0 && router.inboxStats(caller.agentId).queued > 0) wait = Math.max(wait, READ_LOAD_GRACE_MS);
    if (messages() === 0 && wait > 0 && closed === undefined && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = clock.setTimer(wait, () => done());
        // Aborted (the client cancelled, the request closed, the credential was revoked): the sink is detached at once,
        // so nothing sent from now on is delivered to this read.
        const onAbort = () => {
          attached.dispose();
          done();
        };
        function done() {
          wake = undefined;
          timer.dispose();
          signal.removeEventListener('abort', onAbort);
          resolve();
        }
        wake = done;
        signal.addEventListener('abort', onAbort);
      });
      // A delivery that woke the wait may have company in the same commit.
      if (!signal.aborted) await durable(coordinator);
    }
  } finally {
    attached.dispose();
  }
  // What the router keeps, in seq order: the messages (at most `max` tracked ones, by the window; the coordinator's own
  // untracked replies, which the window does not limit, with them) and the acknowledgements. Live-only envelopes need
  // no answer.
  const kept = delivered.filter((d) => isAck(d) || isMessage(d)).sort((a, b) => a.seq - b.seq);
  if (signal.aborted)
    throw new BridgeToolError(
      'CANCELLED',
      'the read was cancelled (the request closed); nothing was confirmed: the messages are delivered again',
    );
  return kept;
}

const readInbox: BridgeTool = {
  name: 'read_inbox',
  description:
    'Reads your pending messages (oldest first) and acknowledges them as READ. Call it when you start, after each step of work ' +
    'and whenever you wait; `wait_ms` waits up to 30 s for the first message or acknowledgement of a message you sent. Each message has a message_id: when you are done with ' +
    'it, answer it with ack_message (fulfilled / rejected / failed). `acknowledgements` tells you what happened to messages you sent.',
  inputSchema: {
    type: 'object',
    properties: {
      max: {
        type: 'integer',
        minimum: 1,
        maximum: READ_MAX,
        description: `At most this many messages (default ${READ_DEFAULT}).`,
      },
      wait_ms: {
        type: 'integer',
        minimum: 0,
        maximum: READ_WAIT_MAX_MS,
        description:
          'Wait up to this long for a first message (or an acknowledgement of one you sent) when none is pending (default 0).',
      },
    },
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(args, tool) {
    const { coordinator, caller } = tool;
    const { router } = coordinator;
    const agentId = caller.agentId;
    if (coordinator.registry.get(agentId) === undefined) {
      throw new BridgeToolError(
        'FAILED_PRECONDITION',
        `agent '${agentId}' is not registered: an agent started by SW4RM: Launch Agent… is registered for you; an SDK agent calls RegisterAgent first`,
      );
    }
    const reads = reading.get(coordinator) ?? new Map<string, ReadState>();
    reading.set(coordinator, reads);
    // The agent's previous read answered and is being confirmed: this read waits for that (else it would take the
    // same messages again), a bounded while.
    const previous = reads.get(agentId);
    if (previous !== undefined && previous !== 'reading') await settledOrAfter(tool, previous);
    const current = reads.get(agentId);
    if (current === 'reading')
      throw new BridgeToolError(
        'FAILED_PRECONDITION',
        'another read_inbox of yours is in progress; call again when it has answered',
        true,
      );
    if (router.inboxStats(agentId).streaming) {
      throw new BridgeToolError(
        'FAILED_PRECONDITION',
        `agent '${agentId}' has an inbox stream open (StreamIncoming): its messages go there; read_inbox would take them from it`,
      );
    }
    reads.set(agentId, 'reading');
    let kept: Delivered[] = [];
    const messages: BridgeToolOutput[] = [];
    const acknowledgements: BridgeToolOutput[] = [];
    const toRead: Envelope[] = [];
    let acksOmitted = 0;
    let unread = 0;
    try {
      kept = await collect(
        tool,
        (args.max as number | undefined) ?? READ_DEFAULT,
        (args.wait_ms as number | undefined) ?? 0,
      );
      for (const { envelope } of kept) {
        const record = router.message(envelope.messageId);
        if (envelope.messageType === 'ACKNOWLEDGEMENT') {
          if (acknowledgements.length >= READ_ACKS_MAX) acksOmitted++;
          else acknowledgements.push(acknowledgementOf(envelope));
          continue;
        }
        // A tracked message is acknowledged READ once this answer is written (below); one that ended meanwhile (timed
        // out, failed) is still returned, with its state and why it is not acknowledged.
        const ended = record?.tracked && isTerminal(record.state) ? record.state : undefined;
        if (record?.tracked && ended === undefined) {
          toRead.push(envelope);
          if (NOT_READ.has(record.state)) unread++;
        }
        messages.push({
          message_id: envelope.messageId,
          from: envelope.producerId,
          message_type: envelope.messageType,
          correlation_id: envelope.correlationId,
          content_type: envelope.contentType,
          ...renderPayload(envelope.payload, envelope.contentType),
          sent_at: isoUtc(envelope.timestampMs ?? record?.acceptedAt ?? coordinator.clock.now()),
          ...(record?.tracked ? { needs_ack: true } : {}),
          ...(ended !== undefined
            ? { state: ended, note: `not acknowledged READ: the message is ${ended} already` }
            : {}),
        });
      }
    } catch (err) {
      if (reads.get(agentId) === 'reading') reads.delete(agentId);
      throw err;
    }
    // Nothing is confirmed before the answer reaches the agent's connection: confirmed then (each delivery, then READ
    // for a tracked message, durably), or, when it never will (revoked, cancelled, the connection closed first), left
    // unconfirmed: the agent's next read (any credential of it) gets them again.
    if (kept.length === 0) reads.delete(agentId);
    else {
      const settled: Promise<void> = settle(tool, kept, toRead).finally(() => {
        if (reads.get(agentId) === settled) reads.delete(agentId);
      });
      reads.set(agentId, settled);
    }
    return {
      messages,
      // Still waiting after this read: the messages returned here are READ once it is written.
      remaining: Math.max(0, router.inboxStats(agentId).queueDepth - unread),
      ...(acknowledgements.length > 0 ? { acknowledgements } : {}),
      ...(acksOmitted > 0 ? { acknowledgements_omitted: acksOmitted } : {}),
    };
  },
};

/** Per coordinator and agent: a read collecting (`reading`), or one that answered and is being confirmed (its promise). */
type ReadState = 'reading' | Promise<void>;

/** How long a read waits, on the coordinator's Clock, for the agent's previous read to be confirmed before it goes on. */
export const READ_SETTLE_WAIT_MS = 3_000;

/** Waits for `previous` to settle, at most READ_SETTLE_WAIT_MS or until this call is aborted (then it goes on: a duplicate at worst). */
async function settledOrAfter(tool: BridgeToolContext, previous: Promise<void>): Promise<void> {
  let timer: Disposable | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      previous,
      new Promise<void>((resolve) => {
        timer = tool.coordinator.clock.setTimer(READ_SETTLE_WAIT_MS, resolve);
        onAbort = resolve;
        if (tool.signal.aborted) resolve();
        else tool.signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    timer?.dispose();
    if (onAbort !== undefined) tool.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Once the read's answer is written (tool.answerWritten true): confirms each delivery (AckDelivery) and acknowledges
 * each of `toRead` READ, all of it durable together. Not written: nothing is confirmed (logged `bridge.read_returned`):
 * the deliveries stay unconfirmed and go to the agent's next read, or again after their lease.
 */
async function settle(tool: BridgeToolContext, kept: readonly Delivered[], toRead: readonly Envelope[]): Promise<void> {
  const { coordinator, caller, ctx } = tool;
  const written = tool.answerWritten === undefined ? true : await tool.answerWritten;
  if (!written) {
    coordinator.log.record({
      correlationId: ctx.correlationId,
      actor: 'bridge',
      eventType: 'bridge.read_returned',
      details: {
        agent_id: caller.agentId,
        deliveries: kept.length,
        message_ids: kept.slice(0, 50).map((d) => d.envelope.messageId),
        reason: tool.signal.aborted
          ? 'the call ended before it answered (revoked or cancelled)'
          : 'the answer did not reach the connection',
      },
    });
    return;
  }
  try {
    for (const { seq, envelope } of kept)
      coordinator.router.ackDelivery(caller.agentId, seq, envelope.messageId, 'DELIVERED', ctx);
    for (const envelope of toRead) {
      try {
        await acknowledge(tool, envelope, 'READ', {}, false);
      } catch {
        // The router logged its refusal (message.refused): the message ended after the answer was written.
      }
    }
    await durable(coordinator);
  } catch (err) {
    coordinator.log.internalError('bridge', ctx.correlationId, err);
  }
}

/** An ACK (or NACK) of a message the caller sent, as read_inbox shows it. */
function acknowledgementOf(envelope: Envelope): BridgeToolOutput {
  const { payload } = renderPayload(envelope.payload, envelope.contentType);
  const ack = (typeof payload === 'object' && payload !== null ? payload : {}) as Record<string, unknown>;
  const code =
    typeof ack.error_code === 'string' && ack.error_code !== 'ERROR_CODE_UNSPECIFIED' ? ack.error_code : undefined;
  return {
    for_message_id: ack.ack_for_message_id ?? '',
    from: typeof ack.recipient_id === 'string' ? ack.recipient_id : envelope.producerId,
    stage: ack.ack_stage ?? '',
    ...(code ? { error_code: code } : {}),
    ...(typeof ack.note === 'string' && ack.note !== '' ? { note: ack.note } : {}),
  };
}

/**
 * A protocol ACK by the caller (an ACKNOWLEDGEMENT envelope through the router, as an SDK agent sends it). Its token
 * is derived from the message and the stage: acknowledging the same message at the same stage again is the same
 * operation (answered DUPLICATE_DETECTED / ALREADY_IN_PROGRESS by the router, which counts as done).
 */
export async function acknowledge(
  tool: BridgeToolContext,
  target: Pick<Envelope, 'messageId' | 'correlationId'>,
  stage: 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED',
  extra: Record<string, unknown> = {},
  durably = true,
): Promise<{ messageId: string; duplicate: boolean }> {
  const { coordinator, caller } = tool;
  const body = ackPayload(target.messageId, stage, extra);
  const envelope = envelopeFrom(
    coordinator,
    caller,
    'ACKNOWLEDGEMENT',
    body,
    'application/json',
    target.correlationId || coordinator.ids.uuid(),
    derivedToken('ack', caller.agentId, target.messageId, stage),
  );
  const result = await submit(tool, envelope, undefined, durably);
  if (result.accepted) return { messageId: result.messageId, duplicate: false };
  if (result.code === 'DUPLICATE_DETECTED' || result.code === 'ALREADY_IN_PROGRESS')
    return { messageId: String(result.details?.original_message_id ?? ''), duplicate: true };
  throw routerRefusal(result);
}

const OUTCOME_STAGES = { fulfilled: 'FULFILLED', rejected: 'REJECTED', failed: 'FAILED' } as const;

const ackMessage: BridgeTool = {
  name: 'ack_message',
  description:
    'Gives your final answer on a message you read: `fulfilled` (done; `result` goes back to the sender), `rejected` (you will ' +
    "not do it) or `failed` (you tried and could not); `reason` explains. Only the message's recipient may acknowledge it.",
  inputSchema: {
    type: 'object',
    properties: {
      message_id: { ...MESSAGE_ID, description: 'The message_id read_inbox gave.' },
      outcome: { type: 'string', enum: ['fulfilled', 'rejected', 'failed'] },
      result: {
        description: 'Any JSON value: what you produced (sent to the sender with a fulfilled acknowledgement).',
      },
      reason: { type: 'string', maxLength: 1024, description: 'Why, in a sentence (the note the sender reads).' },
    },
    required: ['message_id', 'outcome'],
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, tool) {
    const messageId = String(args.message_id);
    const stage = OUTCOME_STAGES[args.outcome as keyof typeof OUTCOME_STAGES];
    const record = tool.coordinator.router.message(messageId);
    const extra: Record<string, unknown> = {};
    if (typeof args.reason === 'string' && args.reason !== '') extra.note = args.reason;
    if (args.result !== undefined) extra.result = args.result;
    const answer = await acknowledge(
      tool,
      { messageId, correlationId: record?.envelope.correlationId ?? '' },
      stage,
      extra,
    );
    const after = tool.coordinator.router.message(messageId);
    return {
      acknowledged: true,
      message_id: messageId,
      outcome: args.outcome,
      ack_message_id: answer.messageId,
      ...(answer.duplicate ? { duplicate: true } : {}),
      ...(after ? { state: after.state } : {}),
    };
  },
};

/** list_agents, send_message, read_inbox, ack_message (README, "The MCP bridge"). */
export const MESSAGING_TOOLS: readonly BridgeTool[] = [listAgents, sendMessage, readInbox, ackMessage];
