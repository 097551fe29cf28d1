// The message protocol between the negotiation panel (webview/negotiation/main.ts, in the browser) and the
// extension (src/extension/panels/negotiationPanel.ts). Plain data and plain functions only: both sides import it,
// so it uses neither the DOM nor `vscode`. Every message that crosses the boundary is checked with the parse
// functions below before it is used. Everything in a debate or a room that an agent sent (topics, ids, payloads,
// notes, strengths…) is data: the panel inserts it with textContent only.

/** The panel's webview type, also the `onWebviewPanel:` activation event and the serializer's key. */
export const NEGOTIATION_PANEL_VIEW_TYPE = 'sw4rm.negotiation';

/** What a panel shows: a debate (by negotiation id) or a room artifact (by artifact id). */
export interface NegotiationTarget {
  readonly kind: 'debate' | 'room';
  readonly id: string;
}

/** What the panel keeps in its webview state so that it is restored after a reload: the target only, re-read then. */
export type PanelState = NegotiationTarget;

/** Longest rationale the coordinator accepts (HitlService). */
export const MAX_RATIONALE_LENGTH = 4096;

/**
 * The operator's choices. A debate: approve (accept the best-scored round), modify (decide with a payload), deny
 * (abort). A room: approve (APPROVED), modify (Request Revision: REVISION_REQUESTED), deny (Reject: rejected, closed).
 */
export const NEGOTIATION_ACTIONS = ['approve', 'modify', 'deny'] as const;
export type NegotiationAction = (typeof NEGOTIATION_ACTIONS)[number];

/** A payload an agent sent, as text (UTF-8, bounded) or only its size when it is binary. */
export interface PayloadJson {
  readonly contentType: string;
  readonly bytes: number;
  readonly text: string;
  readonly binary: boolean;
  readonly truncated: boolean;
}

export interface EvaluationJson {
  readonly from: string;
  readonly score: number;
  readonly llmConfidence: number | null;
  readonly notes: string;
  readonly source: string;
  readonly at: number;
}

export interface RoundJson {
  readonly n: number;
  readonly kind: string;
  readonly from: string;
  readonly at: number;
  readonly tokens: number;
  readonly magnitude: number;
  readonly changedPaths: readonly string[];
  readonly evaluations: readonly EvaluationJson[];
  readonly deterministicScore: number | null;
  readonly llmConfidence: number | null;
  readonly score: number | null;
  readonly oscillation: boolean;
  readonly payload: PayloadJson;
}

export interface DebateJson {
  readonly id: string;
  readonly topic: string;
  readonly participants: readonly string[];
  readonly intensity: string;
  readonly state: string;
  readonly openedBy: string;
  readonly openedAt: number;
  readonly deadlineAt: number;
  readonly profile: string;
  readonly policyVersion: string;
  /** The effective NegotiationPolicy's fields, flattened (`scoring.llmWeight`…), numbers and words only. */
  readonly policy: Readonly<Record<string, string | number | boolean>>;
  readonly tokensUsed: number;
  readonly oscillations: number;
  readonly rounds: readonly RoundJson[];
  readonly pending: { readonly invocationId: string; readonly why: string; readonly stopReason: string } | null;
  readonly decision: {
    readonly decidedBy: string;
    readonly round: number;
    readonly finalScore: number;
    readonly rationale: string;
    readonly stopReason: string;
    readonly policyVersion: string;
    readonly fallback: { readonly policy: string; readonly trigger: string } | null;
    readonly at: number;
    readonly result: PayloadJson;
  } | null;
  readonly abort: {
    readonly reason: string;
    readonly errorCode: string;
    readonly by: string;
    readonly at: number;
  } | null;
}

export interface VoteJson {
  readonly criticId: string;
  readonly score: number;
  readonly confidence: number;
  readonly passed: boolean;
  readonly strengths: readonly string[];
  readonly weaknesses: readonly string[];
  readonly recommendations: readonly string[];
  readonly votedAt: number;
  readonly replaced: number;
}

export interface AggregateJson {
  readonly mean: number;
  readonly weightedMean: number;
  readonly minScore: number;
  readonly maxScore: number;
  readonly stdDev: number;
  readonly voteCount: number;
}

export interface ThresholdCheckJson {
  readonly name: string;
  readonly value: number;
  readonly threshold: number;
  readonly pass: boolean;
}

export interface RoomJson {
  readonly artifactId: string;
  readonly roomId: string;
  readonly revision: number;
  readonly artifactType: string;
  readonly producerId: string;
  readonly state: string;
  readonly closed: boolean;
  readonly invocationId: string | null;
  readonly requestedCritics: readonly string[];
  readonly submittedAt: number;
  readonly voteDeadlineAt: number;
  readonly policyVersion: string;
  readonly artifact: PayloadJson;
  /** The previous revision's artifact, for the diff; null for revision 1. */
  readonly previous: PayloadJson | null;
  readonly votes: readonly VoteJson[];
  readonly aggregate: AggregateJson | null;
  readonly thresholds: {
    readonly minScoreThreshold: number;
    readonly minConfidenceThreshold: number;
    readonly minPassRatio: number;
    readonly maxStdDev: number;
  };
  readonly decision: {
    readonly outcome: string;
    readonly reason: string;
    readonly decidedBy: string;
    readonly final: boolean;
    readonly decidedAt: number;
    readonly policyVersion: string;
    readonly escalation: readonly string[];
    readonly checks: readonly ThresholdCheckJson[];
  } | null;
}

// ---------------------------------------------------------------- webview → extension

export type WebviewMessage =
  /** The script is running and listening: the extension answers with a `show` message. */
  | { readonly type: 'ready' }
  /** The operator's decision on the pending HITL invocation. `requestId` pairs it with its `result` or `error`. */
  | {
      readonly type: 'decide';
      readonly requestId: number;
      readonly action: NegotiationAction;
      readonly rationale: string;
      /** For a debate's `modify`: the payload to decide with (any JSON value). */
      readonly payload?: unknown;
    };

// ---------------------------------------------------------------- extension → webview

export type HostMessage =
  /** The debate or room as it is now: after `ready`, and whenever it changes. Both null while it cannot be read. */
  | {
      readonly type: 'show';
      readonly target: NegotiationTarget;
      readonly debate: DebateJson | null;
      readonly room: RoomJson | null;
      /** Why nothing is shown (the coordinator is stopped, the id is unknown). */
      readonly unavailable?: string;
      /** The name decisions made in this panel are recorded under, e.g. `editor:alice`. */
      readonly operator: string;
    }
  /** The decision of request `requestId` was recorded; `message` says what happens now. */
  | { readonly type: 'result'; readonly requestId: number; readonly message: string }
  /** The decision of request `requestId` was refused (already decided, invalid, stopped). */
  | { readonly type: 'error'; readonly requestId: number; readonly message: string };

/** Reads a message from the webview; undefined for anything that is not exactly a known message. */
export function parseWebviewMessage(value: unknown): WebviewMessage | undefined {
  if (!isRecord(value)) return undefined;
  switch (value.type) {
    case 'ready':
      return { type: 'ready' };
    case 'decide': {
      const { requestId, action, rationale } = value;
      if (!isRequestId(requestId)) return undefined;
      if (typeof action !== 'string' || !(NEGOTIATION_ACTIONS as readonly string[]).includes(action)) return undefined;
      if (typeof rationale !== 'string' || rationale.length > MAX_RATIONALE_LENGTH) return undefined;
      const message = { type: 'decide' as const, requestId, action: action as NegotiationAction, rationale };
      return value.payload !== undefined ? { ...message, payload: value.payload } : message;
    }
    default:
      return undefined;
  }
}

/** Reads a message from the extension; undefined for anything malformed. */
export function parseHostMessage(value: unknown): HostMessage | undefined {
  if (!isRecord(value)) return undefined;
  switch (value.type) {
    case 'show': {
      const target = parsePanelState(value.target);
      if (!target || typeof value.operator !== 'string') return undefined;
      if (value.unavailable !== undefined && typeof value.unavailable !== 'string') return undefined;
      const debate = value.debate === null ? null : isDebateJson(value.debate) ? value.debate : undefined;
      const room = value.room === null ? null : isRoomJson(value.room) ? value.room : undefined;
      if (debate === undefined || room === undefined) return undefined;
      return {
        type: 'show',
        target,
        debate,
        room,
        operator: value.operator,
        ...(value.unavailable === undefined ? {} : { unavailable: value.unavailable }),
      };
    }
    case 'result':
    case 'error':
      if (!isRequestId(value.requestId) || typeof value.message !== 'string') return undefined;
      return { type: value.type, requestId: value.requestId, message: value.message };
    default:
      return undefined;
  }
}

/** Reads the restored webview state; undefined unless it names a debate or a room artifact. */
export function parsePanelState(value: unknown): PanelState | undefined {
  if (
    !isRecord(value) ||
    (value.kind !== 'debate' && value.kind !== 'room') ||
    typeof value.id !== 'string' ||
    value.id === ''
  )
    return undefined;
  return { kind: value.kind, id: value.id };
}

export function isPayloadJson(value: unknown): value is PayloadJson {
  return (
    isRecord(value) &&
    typeof value.contentType === 'string' &&
    typeof value.bytes === 'number' &&
    typeof value.text === 'string' &&
    typeof value.binary === 'boolean' &&
    typeof value.truncated === 'boolean'
  );
}

function isRoundJson(value: unknown): value is RoundJson {
  return (
    isRecord(value) &&
    typeof value.n === 'number' &&
    typeof value.from === 'string' &&
    typeof value.kind === 'string' &&
    typeof value.magnitude === 'number' &&
    isStringList(value.changedPaths) &&
    Array.isArray(value.evaluations) &&
    value.evaluations.every(
      (e) => isRecord(e) && typeof e.from === 'string' && typeof e.score === 'number' && typeof e.notes === 'string',
    ) &&
    isPayloadJson(value.payload)
  );
}

export function isDebateJson(value: unknown): value is DebateJson {
  if (!isRecord(value)) return false;
  if (
    ['id', 'topic', 'intensity', 'state', 'openedBy', 'profile', 'policyVersion'].some(
      (key) => typeof value[key] !== 'string',
    )
  )
    return false;
  if (
    !isStringList(value.participants) ||
    !isRecord(value.policy) ||
    !Array.isArray(value.rounds) ||
    !value.rounds.every(isRoundJson)
  )
    return false;
  if (value.pending !== null && !(isRecord(value.pending) && typeof value.pending.invocationId === 'string'))
    return false;
  if (
    value.decision !== null &&
    !(isRecord(value.decision) && typeof value.decision.rationale === 'string' && isPayloadJson(value.decision.result))
  )
    return false;
  return value.abort === null || (isRecord(value.abort) && typeof value.abort.reason === 'string');
}

function isVoteJson(value: unknown): value is VoteJson {
  return (
    isRecord(value) &&
    typeof value.criticId === 'string' &&
    typeof value.score === 'number' &&
    typeof value.confidence === 'number' &&
    typeof value.passed === 'boolean' &&
    isStringList(value.strengths) &&
    isStringList(value.weaknesses) &&
    isStringList(value.recommendations)
  );
}

export function isRoomJson(value: unknown): value is RoomJson {
  if (!isRecord(value)) return false;
  if (
    ['artifactId', 'roomId', 'artifactType', 'producerId', 'state', 'policyVersion'].some(
      (key) => typeof value[key] !== 'string',
    )
  )
    return false;
  if (typeof value.revision !== 'number' || !isStringList(value.requestedCritics) || !isPayloadJson(value.artifact))
    return false;
  if (value.previous !== null && !isPayloadJson(value.previous)) return false;
  if (value.invocationId !== null && typeof value.invocationId !== 'string') return false;
  if (!Array.isArray(value.votes) || !value.votes.every(isVoteJson) || !isRecord(value.thresholds)) return false;
  if (value.aggregate !== null && !(isRecord(value.aggregate) && typeof value.aggregate.mean === 'number'))
    return false;
  return (
    value.decision === null ||
    (isRecord(value.decision) &&
      typeof value.decision.outcome === 'string' &&
      typeof value.decision.reason === 'string' &&
      Array.isArray(value.decision.checks) &&
      isStringList(value.decision.escalation))
  );
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
