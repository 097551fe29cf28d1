import type { CallContext } from '../context';
import { DisposableStore, type Disposable, type Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { Refusal } from '../router/envelope';
import type { CoordinatorMailbox, CoordinatorOutbox } from '../router/model';
import { parsePolicyJson } from './policy';
import {
  DEFAULT_EXECUTION_POLICY,
  ToolCallError,
  type CallInput,
  type ExecutionPolicy,
  type FrameSink,
  type ToolCallRecord,
  type ToolFrame,
} from './model';

/**
 * Tool calls by envelope (README, "Write a tool provider"): a TOOL_CALL envelope from an agent to `coordinator` runs
 * through the same engine as ToolService.Call (`Tools.start`, via `envelope`). The caller gets its frames back as
 * TOOL_RESULT envelopes from `coordinator` (CoordinatorOutbox.sendToAgent, tracked, in its STANDARD lane, correlation_id =
 * the TOOL_CALL's), the final frame the same way, in order after the others (it FULFILLS the TOOL_CALL with the final
 * frame as its cached result: a retry with the same idempotency token gets the cached answer), and an error as a
 * TOOL_ERROR `{"call_id","error_code","note"}`, sent the same way. A malformed payload is refused at
 * admission (VALIDATION_ERROR naming the field); what the engine refuses (an unknown tool, args against the schema, a
 * policy needing a human who denies it…) is a TOOL_ERROR reply.
 */

/** What the bridge needs of the engine (tools.ts `Tools`). */
export interface EnvelopeToolEngine {
  start(callerAgentId: string, input: CallInput, ctx: CallContext, sink: FrameSink): { readonly callId: string };
  /** The caller can no longer be answered: abort the call, send nothing more. */
  abandon(callId: string): void;
  /**
   * Fired by `restore` for each call a restart interrupted (its record already ended as error INTERRUPTED), so that the
   * caller of an envelope call (record.via = envelope, record.messageId) gets its TOOL_ERROR reply.
   */
  readonly onDidInterrupt: Event<ToolCallRecord>;
}

/** A TOOL_CALL payload read from an envelope's JSON. */
export interface EnvelopeToolCall {
  readonly callId: string;
  readonly providerId: string;
  readonly toolName: string;
  readonly contentType: string;
  readonly args: Buffer;
  readonly policy: ExecutionPolicy;
  readonly stream: boolean;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Reads a TOOL_CALL payload (contract "the caller side by envelope"): `provider_id` and `tool_name` (strings, required),
 * `call_id` (string, optional), `args` (any JSON value; absent = `{}`) or `args_b64` (base64 of the args' bytes, for a
 * content_type other than JSON), `content_type` (default application/json), `execution_policy` or `policy` (an object, read
 * by parsePolicyJson), `stream` (boolean). Answers the call, or the refusal naming the field.
 */
export function parseToolCallPayload(json: Record<string, unknown> | undefined): EnvelopeToolCall | Refusal {
  const invalid = (detail: string): Refusal => ({ code: 'VALIDATION_ERROR', detail });
  if (!json)
    return invalid('a TOOL_CALL to the coordinator carries a JSON object payload (content_type application/json)');
  const text = (field: string, required: boolean): string | Refusal => {
    const value = json[field];
    if (value === undefined || value === null)
      return required ? invalid(`${field} is required (a non-empty string)`) : '';
    if (typeof value !== 'string') return invalid(`${field} must be a string`);
    if (required && value.trim() === '') return invalid(`${field} is required (a non-empty string)`);
    return value;
  };
  const providerId = text('provider_id', true);
  if (typeof providerId !== 'string') return providerId;
  const toolName = text('tool_name', true);
  if (typeof toolName !== 'string') return toolName;
  const callId = text('call_id', false);
  if (typeof callId !== 'string') return callId;
  const contentType = text('content_type', false);
  if (typeof contentType !== 'string') return contentType;

  let args: Buffer;
  if (json.args !== undefined && json.args_b64 !== undefined) return invalid('give args or args_b64, not both');
  if (json.args_b64 !== undefined) {
    if (typeof json.args_b64 !== 'string' || !BASE64.test(json.args_b64) || json.args_b64.length % 4 !== 0) {
      return invalid('args_b64 must be a base64 string (standard alphabet, padded)');
    }
    args = Buffer.from(json.args_b64, 'base64');
  } else {
    args = Buffer.from(JSON.stringify(json.args === undefined ? {} : json.args), 'utf8');
  }

  if (json.execution_policy !== undefined && json.policy !== undefined)
    return invalid('give execution_policy or policy, not both');
  const rawPolicy = json.execution_policy ?? json.policy;
  if (rawPolicy !== undefined && rawPolicy !== null && (typeof rawPolicy !== 'object' || Array.isArray(rawPolicy))) {
    return invalid(`${json.execution_policy !== undefined ? 'execution_policy' : 'policy'} must be a JSON object`);
  }
  const policy = rawPolicy === undefined || rawPolicy === null ? DEFAULT_EXECUTION_POLICY : parsePolicyJson(rawPolicy);
  if ('refused' in policy) return invalid(policy.refused);

  if (json.stream !== undefined && typeof json.stream !== 'boolean') return invalid('stream must be true or false');
  return {
    callId,
    providerId,
    toolName,
    contentType: contentType === '' ? 'application/json' : contentType,
    args,
    policy,
    stream: json.stream === true,
  };
}

/** A frame as a TOOL_RESULT payload: `result` when it is JSON, else `result_b64`; `summary` when there is one. */
export function framePayload(frame: ToolFrame): Record<string, unknown> {
  const payload: Record<string, unknown> = {
    call_id: frame.callId,
    frame_no: frame.frameNo,
    final: frame.final,
    content_type: frame.contentType || 'application/json',
    status: 'OK',
  };
  const json = isJson(frame.contentType) ? parseJson(frame.data) : undefined;
  if (json !== undefined) payload.result = json.value;
  else payload.result_b64 = frame.data.toString('base64');
  if (frame.summary.length > 0) {
    const summary = parseJson(frame.summary);
    if (summary !== undefined) payload.summary = summary.value;
  }
  return payload;
}

/** The TOOL_ERROR payload of a failed call. */
export function errorPayload(callId: string, code: string, note: string): Record<string, unknown> {
  return { call_id: callId, error_code: code, note };
}

function isJson(contentType: string): boolean {
  const base = contentType.split(';')[0].trim().toLowerCase();
  return base === '' || base === 'application/json';
}

function parseJson(bytes: Buffer): { readonly value: unknown } | undefined {
  if (bytes.length === 0) return undefined;
  try {
    return { value: JSON.parse(bytes.toString('utf8')) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * Binds TOOL_CALL envelopes addressed to `coordinator` to the engine. Frames go back through `router` (TOOL_RESULT
 * envelopes, then the reply), interrupted calls are answered when the engine restores (INTERRUPTED).
 */
export function bindToolCallsToRouter(
  tools: EnvelopeToolEngine,
  router: CoordinatorMailbox & CoordinatorOutbox,
  log: EventLog,
): Disposable {
  const bindings = new DisposableStore();
  bindings.add(
    router.handleAtCoordinator('TOOL_CALL', (envelope, json, ctx): Refusal | undefined => {
      const call = parseToolCallPayload(json);
      if ('code' in call) return call;
      const caller = envelope.producerId;
      let callId = call.callId;
      // The log's correlation id of a call is its call_id (known once the engine assigned one).
      const replyCtx = (): CallContext => ({ correlationId: callId || envelope.correlationId });
      let ended = false;
      // Every answer to the caller (each frame, the final frame, a TOOL_ERROR) goes the same way, tracked in the
      // caller's STANDARD lane through sendToAgent, so that it arrives in the order sent (frame_no 0, 1, … then the end).
      const send = (messageType: 'TOOL_RESULT' | 'TOOL_ERROR', payload: Record<string, unknown>) =>
        router.sendToAgent(
          {
            to: caller,
            messageType,
            contentType: 'application/json',
            correlationId: envelope.correlationId,
            payload: Buffer.from(JSON.stringify(payload), 'utf8'),
            ackTimeout: false,
          },
          replyCtx(),
        );
      const reply = (messageType: 'TOOL_RESULT' | 'TOOL_ERROR', payload: Record<string, unknown>): void => {
        if (ended) return;
        ended = true;
        // The TOOL_CALL is FULFILLED with the answer as its cached result (a retry with the same token gets it). When the
        // caller cannot take it in its lane (inbox full, it left), it goes as the coordinator's persisted reply instead.
        if (send(messageType, payload).accepted) router.settleAtCoordinator(envelope.messageId, replyCtx(), payload);
        else router.replyFromCoordinator(envelope.messageId, messageType, payload, replyCtx());
      };
      const sink: FrameSink = {
        frame: (frame) => {
          if (ended) return;
          const sent = send('TOOL_RESULT', framePayload(frame));
          if (!sent.accepted) {
            // The caller cannot take this frame (its inbox is full, it left, the frame is too large): the call is abandoned
            // and the TOOL_CALL answered with the reason, rather than the caller missing a frame without knowing.
            log.record({
              correlationId: frame.callId,
              actor: 'coordinator',
              eventType: 'tool.envelope.frame_refused',
              level: 'WARN',
              details: {
                call_id: frame.callId,
                frame_no: frame.frameNo,
                to: caller,
                code: sent.code,
                reason: sent.reason.slice(0, 500),
              },
            });
            reply(
              'TOOL_ERROR',
              errorPayload(
                frame.callId,
                sent.code,
                `frame ${frame.frameNo} could not be sent to ${caller}: ${sent.reason}`,
              ),
            );
            tools.abandon(frame.callId);
          }
        },
        end: (frame) => reply('TOOL_RESULT', framePayload(frame)),
        fail: (error) => reply('TOOL_ERROR', errorPayload(callId, error.code, error.message)),
      };
      try {
        callId = tools.start(
          caller,
          {
            callId: call.callId,
            providerId: call.providerId,
            toolName: call.toolName,
            contentType: call.contentType,
            args: call.args,
            policy: call.policy,
            stream: call.stream,
            via: 'envelope',
            messageId: envelope.messageId,
          },
          ctx,
          sink,
        ).callId;
      } catch (err) {
        // A check that failed at once (unknown provider or tool, args against the schema…): the TOOL_CALL is accepted and
        // answered with the TOOL_ERROR, as a check that fails later would be.
        if (!(err instanceof ToolCallError)) throw err;
        reply('TOOL_ERROR', errorPayload(callId, err.code, err.message));
      }
      return undefined;
    }),
  );
  bindings.add(
    tools.onDidInterrupt((record) => {
      if (record.via !== 'envelope' || record.messageId === '') return;
      router.replyFromCoordinator(
        record.messageId,
        'TOOL_ERROR',
        errorPayload(
          record.callId,
          'INTERRUPTED',
          record.errorMessage || 'the coordinator restarted while the call ran: call again if it is safe to',
        ),
        { correlationId: record.callId },
      );
    }),
  );
  return bindings;
}
