// The message protocol between the HITL approval panel (webview/hitl/main.ts, in the browser) and the
// extension (src/extension/panels/hitlPanels.ts). Plain data and plain functions only: both sides
// import it, so it uses neither the DOM nor `vscode`. Every message that crosses the boundary is checked
// with the parse functions below before it is used.

/** The panel's webview type, also the `onWebviewPanel:` activation event and the serializer's key. */
export const HITL_PANEL_VIEW_TYPE = 'sw4rm.hitlInvocation';

export const DECISION_ACTIONS = ['approve', 'deny', 'modify', 'defer'] as const;
export type DecisionAction = (typeof DECISION_ACTIONS)[number];

export const INVOCATION_STATES = ['pending', 'decided', 'timed_out', 'cancelled'] as const;
export type InvocationStateName = (typeof INVOCATION_STATES)[number];

/** One proposed change, as the requester sent it (text before/after, a unified diff, or JSON before/after). */
export interface DiffJson {
  readonly title: string;
  readonly before?: string;
  readonly after?: string;
  readonly unified?: string;
  readonly beforeJson?: unknown;
  readonly afterJson?: unknown;
}

/** How an invocation was settled (the coordinator's `decisionJson`). */
export interface DecisionJson {
  readonly invocation_id: string;
  readonly decision: string;
  readonly rationale: string;
  readonly decision_payload: unknown;
  readonly state: string;
  readonly decided_by: string;
  readonly automatic: boolean;
  readonly rule?: string;
  readonly fallback?: { readonly policy?: string; readonly trigger?: string };
  readonly decided_at: string;
}

/** One invocation (the coordinator's `invocationJson`): snake_case, times as ISO-8601 strings. */
export interface InvocationJson {
  readonly invocation_id: string;
  readonly reason_type: string;
  readonly state: InvocationStateName;
  readonly requester: string;
  readonly correlation_id: string;
  readonly subject: { readonly repo_id: string; readonly worktree_id: string; readonly task_id: string };
  readonly context: {
    readonly summary: string;
    readonly facts: Readonly<Record<string, unknown>>;
    readonly diffs: readonly DiffJson[];
    readonly risk: { readonly level: string; readonly notes: readonly string[] };
    readonly prior_attempts: readonly unknown[];
    readonly inference: Readonly<Record<string, unknown>>;
    readonly score: number | null;
  };
  readonly proposed_actions: readonly string[];
  readonly suggested_action: string;
  readonly priority: number;
  readonly created_at: string;
  readonly deadline_ts: string;
  readonly extensions: number;
  readonly decision: DecisionJson | null;
}

// ---------------------------------------------------------------- webview → extension

export type WebviewMessage =
  /** The script is running and listening: the extension answers with an `invocation` message. */
  | { readonly type: 'ready' }
  /** The operator's decision. `requestId` pairs it with its `result` or `error`. */
  | {
      readonly type: 'decide';
      readonly requestId: number;
      readonly action: DecisionAction;
      readonly rationale: string;
      /** For `modify`: the edited payload (any JSON value). */
      readonly payload?: unknown;
    };

// ---------------------------------------------------------------- extension → webview

export type HostMessage =
  /** The invocation as it is now: after `ready`, and whenever it changes. Null while it cannot be read. */
  | {
      readonly type: 'invocation';
      readonly invocationId: string;
      readonly invocation: InvocationJson | null;
      /** Why the invocation is missing (the coordinator is stopped, or it does not know the id). */
      readonly unavailable?: string;
      /** The name decisions made in this panel are recorded under, e.g. `editor:alice`. */
      readonly operator: string;
      /** The extension host's clock (ms since the epoch), so the countdown follows the coordinator's time. */
      readonly now: number;
    }
  /** The decision of request `requestId` was applied. */
  | { readonly type: 'result'; readonly requestId: number; readonly invocation: InvocationJson }
  /** The decision of request `requestId` was refused (already decided elsewhere, invalid, stopped). */
  | { readonly type: 'error'; readonly requestId: number; readonly message: string };

/** What the panel keeps in its webview state so that it is restored after a reload: the id only. */
export interface PanelState {
  readonly invocationId: string;
}

/** Longest rationale the coordinator accepts (HitlService). */
export const MAX_RATIONALE_LENGTH = 4096;

/** Reads a message from the webview; undefined for anything that is not exactly a known message. */
export function parseWebviewMessage(value: unknown): WebviewMessage | undefined {
  if (!isRecord(value)) return undefined;
  switch (value.type) {
    case 'ready':
      return { type: 'ready' };
    case 'decide': {
      const { requestId, action, rationale } = value;
      if (!isRequestId(requestId)) return undefined;
      if (typeof action !== 'string' || !(DECISION_ACTIONS as readonly string[]).includes(action)) return undefined;
      if (typeof rationale !== 'string' || rationale.length > MAX_RATIONALE_LENGTH) return undefined;
      if (action === 'modify' && !('payload' in value && value.payload !== undefined)) return undefined;
      const message = { type: 'decide' as const, requestId, action: action as DecisionAction, rationale };
      return action === 'modify' ? { ...message, payload: value.payload } : message;
    }
    default:
      return undefined;
  }
}

/** Reads a message from the extension; undefined for anything malformed. */
export function parseHostMessage(value: unknown): HostMessage | undefined {
  if (!isRecord(value)) return undefined;
  switch (value.type) {
    case 'invocation': {
      const { invocationId, invocation, unavailable, operator, now } = value;
      if (
        typeof invocationId !== 'string' ||
        typeof operator !== 'string' ||
        typeof now !== 'number' ||
        !Number.isFinite(now)
      )
        return undefined;
      if (unavailable !== undefined && typeof unavailable !== 'string') return undefined;
      const parsed = invocation === null ? null : parseInvocationJson(invocation);
      if (parsed === undefined) return undefined;
      return {
        type: 'invocation',
        invocationId,
        invocation: parsed,
        operator,
        now,
        ...(unavailable === undefined ? {} : { unavailable }),
      };
    }
    case 'result': {
      const invocation = parseInvocationJson(value.invocation);
      if (!isRequestId(value.requestId) || !invocation) return undefined;
      return { type: 'result', requestId: value.requestId, invocation };
    }
    case 'error':
      if (!isRequestId(value.requestId) || typeof value.message !== 'string') return undefined;
      return { type: 'error', requestId: value.requestId, message: value.message };
    default:
      return undefined;
  }
}

/** Reads the restored webview state; undefined unless it names an invocation. */
export function parsePanelState(value: unknown): PanelState | undefined {
  if (!isRecord(value) || typeof value.invocationId !== 'string' || value.invocationId === '') return undefined;
  return { invocationId: value.invocationId };
}

/**
 * Checks the shape of an invocation. Free-form parts (facts, diffs' JSON values, inference, payloads) are
 * agent-supplied data and stay `unknown`: the panel shows them as text, never as markup.
 */
export function parseInvocationJson(value: unknown): InvocationJson | undefined {
  if (!isRecord(value)) return undefined;
  const strings = [
    'invocation_id',
    'reason_type',
    'requester',
    'correlation_id',
    'suggested_action',
    'created_at',
    'deadline_ts',
  ] as const;
  if (strings.some((key) => typeof value[key] !== 'string')) return undefined;
  if (typeof value.state !== 'string' || !(INVOCATION_STATES as readonly string[]).includes(value.state))
    return undefined;
  if (typeof value.priority !== 'number' || typeof value.extensions !== 'number') return undefined;
  if (!isStringList(value.proposed_actions)) return undefined;
  const subject = value.subject;
  if (!isRecord(subject) || ['repo_id', 'worktree_id', 'task_id'].some((key) => typeof subject[key] !== 'string'))
    return undefined;
  const context = value.context;
  if (
    !isRecord(context) ||
    typeof context.summary !== 'string' ||
    !isRecord(context.facts) ||
    !isRecord(context.inference)
  )
    return undefined;
  if (!Array.isArray(context.diffs) || !context.diffs.every(isDiffJson)) return undefined;
  const risk = context.risk;
  if (!isRecord(risk) || typeof risk.level !== 'string' || !isStringList(risk.notes)) return undefined;
  if (!Array.isArray(context.prior_attempts)) return undefined;
  if (context.score !== null && typeof context.score !== 'number') return undefined;
  if (value.decision !== null && !isDecisionJson(value.decision)) return undefined;
  return value as unknown as InvocationJson;
}

function isDiffJson(value: unknown): value is DiffJson {
  if (!isRecord(value) || typeof value.title !== 'string') return false;
  return ['before', 'after', 'unified'].every((key) => value[key] === undefined || typeof value[key] === 'string');
}

function isDecisionJson(value: unknown): value is DecisionJson {
  if (!isRecord(value)) return false;
  if (
    ['invocation_id', 'decision', 'rationale', 'state', 'decided_by', 'decided_at'].some(
      (key) => typeof value[key] !== 'string',
    )
  )
    return false;
  if (typeof value.automatic !== 'boolean') return false;
  if (value.rule !== undefined && typeof value.rule !== 'string') return false;
  return value.fallback === undefined || isRecord(value.fallback);
}

function isRequestId(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isStringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
