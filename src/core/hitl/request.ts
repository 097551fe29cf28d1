import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { jsonBoundsRefusal } from '../json';
import {
  REASON_TYPES,
  type HitlContext,
  type HitlDiff,
  type HitlSubject,
  type InvocationRequest,
  type ReasonType,
} from './records';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** RFC §5.4 / message-types.txt: a HITL_INVOCATION carries at most 256 KB. */
export const MAX_INVOCATION_BYTES = 256 * 1024;
const MAX_ID = FIELD_LIMITS.hitl.invocation_id;
const MAX_FIELD = FIELD_LIMITS.hitl.requester;
const MAX_ACTIONS = FIELD_LIMITS.hitl.proposed_actions;

/** An invocation request or decision that cannot be accepted; `code` is the SW4RM error code. */
export class HitlRequestError extends SwarmError {
  constructor(
    readonly code: 'VALIDATION_ERROR' | 'OVERSIZE_PAYLOAD' | 'PERMISSION_DENIED' | 'BUFFER_FULL',
    message: string,
  ) {
    super(message);
    this.name = 'HitlRequestError';
  }

  override get errorKind(): ErrorKind {
    return this.code === 'PERMISSION_DENIED'
      ? 'permission'
      : this.code === 'VALIDATION_ERROR'
        ? 'invalid'
        : 'exhausted';
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}

/** Everything the transport knows about a request besides its JSON body. */
export interface RequestFrame {
  /** The reason type given outside the body (the proto's enum); the body's `reason_type` is used otherwise. */
  readonly reasonType?: string;
  readonly proposedActions?: readonly string[];
  readonly priority?: number;
  /** Who asks: the envelope's producer, or the RPC caller's `sw4rm-agent-id`. Else the body's agent_id/requester. */
  readonly requester?: string;
  readonly correlationId: string;
  readonly now: number;
}

/**
 * Reads an invocation from a JSON body: the HitlInvocation's `context` bytes (RPC) or a HITL_INVOCATION
 * envelope's payload (RFC §15.2 shape, message-types.txt shape). Known fields are read from the top level
 * and from a nested `context` object; every other field of the context is kept as a fact.
 */
export function parseInvocationRequest(body: Record<string, unknown>, frame: RequestFrame): InvocationRequest {
  const nested = isRecord(body.context) ? body.context : {};
  const consumed = new Set<string>();
  const pick = (...names: string[]): unknown => {
    for (const name of names) {
      for (const source of [body, nested]) {
        if (source[name] !== undefined && source[name] !== null) {
          consumed.add(name);
          return source[name];
        }
      }
    }
    return undefined;
  };

  const reasonText =
    (frame.reasonType && frame.reasonType !== 'HITL_REASON_UNSPECIFIED' ? frame.reasonType : undefined) ??
    pick('reason_type', 'reasonType');
  if (typeof reasonText !== 'string' || !(REASON_TYPES as readonly string[]).includes(reasonText.toUpperCase())) {
    throw new HitlRequestError(
      'VALIDATION_ERROR',
      `reason_type must be one of ${REASON_TYPES.join(', ')}; got ${JSON.stringify(reasonText ?? null)}`,
    );
  }
  const reasonType = reasonText.toUpperCase() as ReasonType;

  const invocationId = optionalText(pick('invocation_id', 'invocationId'), 'invocation_id', MAX_ID);
  if (invocationId !== undefined && !/^[A-Za-z0-9._:-]+$/.test(invocationId)) {
    throw new HitlRequestError('VALIDATION_ERROR', 'invocation_id may hold letters, digits and . _ : - only');
  }
  const requester =
    frame.requester?.trim() ||
    identifier(pick('requester', 'agent_id', 'agentId'), 'requester', FIELD_LIMITS.hitl.requester) ||
    'anonymous';
  const correlationId =
    identifier(pick('correlation_id', 'correlationId'), 'correlation_id', FIELD_LIMITS.hitl.correlation_id) ||
    frame.correlationId;

  const subjectRaw = pick('subject');
  const subjectSource = isRecord(subjectRaw) ? subjectRaw : {};
  const subjectField = (snake: string, camel: string): string => {
    const value = subjectSource[snake] ?? subjectSource[camel] ?? pick(snake);
    return identifier(value, `subject.${snake}`, FIELD_LIMITS.hitl.subject_field) ?? '';
  };
  const subject: HitlSubject = {
    repoId: subjectField('repo_id', 'repoId'),
    worktreeId: subjectField('worktree_id', 'worktreeId'),
    taskId: subjectField('task_id', 'taskId'),
  };

  const proposedRaw =
    frame.proposedActions && frame.proposedActions.length > 0
      ? frame.proposedActions
      : pick('proposed_actions', 'proposedActions');
  const proposedActions = proposedRaw === undefined ? [] : stringList(proposedRaw, 'proposed_actions');
  const suggestedAction =
    optionalText(pick('suggested_action', 'suggestedAction'), 'suggested_action', MAX_FIELD) ?? '';

  const priorityRaw = frame.priority !== undefined && frame.priority !== 0 ? frame.priority : pick('priority');
  const priority = priorityRaw === undefined ? 0 : Number(priorityRaw);
  if (!Number.isInteger(priority) || priority < -1000 || priority > 1000) {
    throw new HitlRequestError('VALIDATION_ERROR', 'priority must be an integer from -1000 to 1000');
  }

  const deadlineAt = readDeadline(
    pick('deadline_ts', 'deadlineTs', 'approval_required_by'),
    pick('deadline_ms', 'deadlineMs'),
    frame.now,
  );
  const fallbackRaw = pick('auto_timeout_action', 'fallback');
  const requestedFallback = typeof fallbackRaw === 'string' ? fallbackRaw.trim().toLowerCase() : '';

  const summary =
    optionalText(
      pick('summary', 'title', 'description', 'operation', 'conflict_description'),
      'summary',
      FIELD_LIMITS.hitl.summary,
    ) ?? '';
  const diffs = readDiffs(pick('diffs'), pick('diff', 'patch'));
  const risk = readRisk(pick('risk'), pick('risk_level', 'riskLevel'), pick('risk_notes', 'riskNotes'));
  const priorRaw = pick('prior_attempts', 'priorAttempts');
  const priorAttempts = priorRaw === undefined ? [] : Array.isArray(priorRaw) ? priorRaw : [priorRaw];
  const inferenceRaw = pick('inference', 'inference_metadata', 'inferenceMetadata');
  const inference = isRecord(inferenceRaw) ? inferenceRaw : inferenceRaw === undefined ? {} : { value: inferenceRaw };
  const score = readScore(pick('score', 'confidence') ?? inference.confidence ?? inference.score);
  const factsRaw = pick('facts');
  const facts: Record<string, unknown> = isRecord(factsRaw)
    ? { ...factsRaw }
    : factsRaw === undefined
      ? {}
      : { facts: factsRaw };
  // What the requester sent and no field above took is still context the operator should see.
  for (const source of [nested, body]) {
    for (const [key, value] of Object.entries(source)) {
      if (!consumed.has(key) && key !== 'context' && key !== 'to' && !(key in facts)) facts[key] = value;
    }
  }

  const context: HitlContext = { summary, facts, diffs, risk, priorAttempts, inference, score };
  return {
    invocationId,
    reasonType,
    requester,
    correlationId,
    subject,
    context,
    proposedActions,
    suggestedAction,
    priority,
    deadlineAt,
    requestedFallback,
  };
}

/** Parses a JSON body; non-JSON text becomes the summary; anything else is refused. */
export function parseBody(bytes: Uint8Array | string): Record<string, unknown> {
  const size = typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.byteLength;
  if (size > MAX_INVOCATION_BYTES) {
    throw new HitlRequestError(
      'OVERSIZE_PAYLOAD',
      `a HITL invocation carries at most ${MAX_INVOCATION_BYTES} bytes of context, not ${size}`,
    );
  }
  const text = typeof bytes === 'string' ? bytes : new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (text.trim() === '') return {};
  if (/^\s*[[{]/.test(text)) {
    // Depth before JSON.parse: a context nested deeper than MAX_JSON_DEPTH is refused, not walked.
    const tooDeep = jsonBoundsRefusal(text, { what: 'the context' });
    if (tooDeep !== undefined) throw new HitlRequestError('VALIDATION_ERROR', tooDeep);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    if (text.includes('\uFFFD'))
      throw new HitlRequestError('VALIDATION_ERROR', 'the context is neither JSON nor UTF-8 text');
    return { summary: text };
  }
  if (!isRecord(parsed)) throw new HitlRequestError('VALIDATION_ERROR', 'the context must be a JSON object');
  return parsed;
}

function readDeadline(absolute: unknown, relative: unknown, now: number): number | undefined {
  if (absolute !== undefined) {
    const at = typeof absolute === 'number' ? absolute : typeof absolute === 'string' ? Date.parse(absolute) : NaN;
    if (!Number.isFinite(at))
      throw new HitlRequestError(
        'VALIDATION_ERROR',
        `deadline_ts must be an ISO-8601 time, not ${JSON.stringify(absolute)}`,
      );
    if (at <= now)
      throw new HitlRequestError('VALIDATION_ERROR', `deadline_ts ${JSON.stringify(absolute)} has already passed`);
    return at;
  }
  if (relative !== undefined) {
    const ms = Number(relative);
    if (!Number.isFinite(ms) || ms <= 0)
      throw new HitlRequestError('VALIDATION_ERROR', 'deadline_ms must be a positive number of milliseconds');
    return now + ms;
  }
  return undefined;
}

function readDiffs(list: unknown, single: unknown): HitlDiff[] {
  const diffs: HitlDiff[] = [];
  if (typeof single === 'string') diffs.push({ title: 'diff', unified: single });
  if (list === undefined) return diffs;
  if (!Array.isArray(list))
    throw new HitlRequestError(
      'VALIDATION_ERROR',
      'diffs must be a list of {title, before, after} or {title, unified} or {title, before_json, after_json}',
    );
  list.forEach((raw, i) => {
    if (!isRecord(raw)) throw new HitlRequestError('VALIDATION_ERROR', `diffs[${i}] must be an object`);
    const title = String(raw.title ?? raw.path ?? raw.file ?? `diff ${i + 1}`);
    const text = (v: unknown, name: string): string | undefined => {
      if (v === undefined || v === null) return undefined;
      if (typeof v !== 'string') throw new HitlRequestError('VALIDATION_ERROR', `diffs[${i}].${name} must be text`);
      return v;
    };
    const diff: HitlDiff = {
      title,
      before: text(raw.before, 'before'),
      after: text(raw.after, 'after'),
      unified: text(raw.unified ?? raw.patch, 'unified'),
      beforeJson: raw.before_json ?? raw.beforeJson,
      afterJson: raw.after_json ?? raw.afterJson,
    };
    if (
      diff.before === undefined &&
      diff.after === undefined &&
      diff.unified === undefined &&
      diff.beforeJson === undefined &&
      diff.afterJson === undefined
    ) {
      throw new HitlRequestError(
        'VALIDATION_ERROR',
        `diffs[${i}] has nothing to show: give before/after, unified, or before_json/after_json`,
      );
    }
    diffs.push(diff);
  });
  return diffs;
}

function readRisk(risk: unknown, level: unknown, notes: unknown): HitlContext['risk'] {
  const source = isRecord(risk) ? risk : {};
  const levelValue = source.level ?? level ?? (typeof risk === 'string' ? risk : undefined);
  const notesValue = source.notes ?? notes;
  const noteList =
    notesValue === undefined ? [] : Array.isArray(notesValue) ? notesValue.map(String) : [String(notesValue)];
  return { level: levelValue === undefined ? '' : String(levelValue).slice(0, MAX_FIELD), notes: noteList };
}

function readScore(value: unknown): number | null {
  if (value === undefined || value === null) return null;
  const score = Number(value);
  if (!Number.isFinite(score) || score < 0 || score > 1)
    throw new HitlRequestError(
      'VALIDATION_ERROR',
      `score/confidence must be a number in [0,1], not ${JSON.stringify(value)}`,
    );
  return score;
}

function optionalText(value: unknown, name: string, max: number): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' && typeof value !== 'number')
    throw new HitlRequestError('VALIDATION_ERROR', `${name} must be text`);
  const text = String(value).trim();
  if (text.length > max) throw new HitlRequestError('VALIDATION_ERROR', `${name} is longer than ${max} characters`);
  return text;
}

/** An optional identifier: text within `max` characters, without control characters or U+FFFD (invalid UTF-8). */
function identifier(value: unknown, name: string, max: number): string | undefined {
  const text = optionalText(value, name, max);
  const refusal = text === undefined ? undefined : identifierRefusal(name, text, max);
  if (refusal !== undefined) throw new HitlRequestError('VALIDATION_ERROR', refusal);
  return text;
}

function stringList(value: unknown, name: string): string[] {
  if (
    !Array.isArray(value) ||
    value.length > MAX_ACTIONS ||
    value.some((v) => typeof v !== 'string' || v.length > FIELD_LIMITS.hitl.proposed_action)
  ) {
    throw new HitlRequestError('VALIDATION_ERROR', `${name} must be a list of at most ${MAX_ACTIONS} strings`);
  }
  return value as string[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
