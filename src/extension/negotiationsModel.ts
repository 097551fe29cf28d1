import type {
  NegotiationDetailView,
  NegotiationSummary,
  PayloadText,
  RoomArtifactDetailView,
  RoomArtifactSummary,
} from '../core/api';
import type { DebateJson, PayloadJson, RoomJson } from '../../webview/negotiation/protocol';

/** The Negotiations view's groups, in the order they are shown. */
export const NEGOTIATION_GROUPS = ['debates', 'rooms'] as const;
export type NegotiationGroup = (typeof NEGOTIATION_GROUPS)[number];

export const NEGOTIATION_GROUP_LABELS: Readonly<Record<NegotiationGroup, string>> = {
  debates: 'Debates',
  rooms: 'Rooms',
};

/** Debates and room artifacts the view lists (open ones first, then the most recent). */
export const NEGOTIATIONS_LISTED = 100;

/** A row's text: label, description, plain-text tooltip (topics, ids and reasons come from agents). */
export interface NegotiationRow {
  readonly label: string;
  readonly description: string;
  readonly tooltip: string;
  /** A codicon id; the view adds the colour. */
  readonly icon: 'comment-discussion' | 'debug-pause' | 'pass' | 'circle-slash' | 'person' | 'sync~spin' | 'error';
  /** A person must decide (a paused debate, an escalated room). */
  readonly needsYou: boolean;
  readonly contextValue: string;
}

/** `3 (1 needs you)` */
export function groupDescription(
  group: NegotiationGroup,
  debates: readonly NegotiationSummary[],
  rooms: readonly RoomArtifactSummary[],
): string {
  const count = group === 'debates' ? debates.length : rooms.length;
  const waiting = group === 'debates' ? debates.filter(debateNeedsYou).length : rooms.filter(roomNeedsYou).length;
  const listed = count >= NEGOTIATIONS_LISTED ? `newest ${count}` : String(count);
  return waiting ? `${listed} (${waiting} need${waiting === 1 ? 's' : ''} you)` : listed;
}

export function debateNeedsYou(debate: Pick<NegotiationSummary, 'state' | 'pendingInvocationId'>): boolean {
  return debate.state === 'paused' && debate.pendingInvocationId !== null;
}

export function roomNeedsYou(room: Pick<RoomArtifactSummary, 'state' | 'invocationId'>): boolean {
  return room.state === 'escalated' && room.invocationId !== null;
}

function score(value: number | null): string {
  return value === null ? 'no score' : `best ${value.toFixed(2)}`;
}

/** A debate's row: its topic, then participants · rounds · best score · state (stop reason). */
export function debateRow(debate: NegotiationSummary): NegotiationRow {
  const needsYou = debateNeedsYou(debate);
  const state = needsYou
    ? 'needs you'
    : debate.stopReason && debate.state !== 'open'
      ? `${debate.state} (${debate.stopReason})`
      : debate.state;
  const rounds = `${debate.rounds} round${debate.rounds === 1 ? '' : 's'}`;
  return {
    label: debate.topic || debate.id,
    description: [debate.participants.join(', '), rounds, score(debate.bestScore), state].join(' · '),
    tooltip: [
      `debate ${debate.id}`,
      `topic: ${debate.topic}`,
      `participants: ${debate.participants.join(', ')}`,
      `intensity ${debate.intensity} · ${rounds} · ${score(debate.bestScore)}`,
      `state: ${debate.state}${debate.stopReason ? ` (stopped: ${debate.stopReason})` : ''}`,
      ...(needsYou ? ['Paused on a decision: open it to approve, modify or deny.'] : []),
      `opened ${new Date(debate.openedAt).toISOString()}, updated ${new Date(debate.updatedAt).toISOString()}`,
    ].join('\n'),
    icon: needsYou
      ? 'person'
      : debate.state === 'open'
        ? 'comment-discussion'
        : debate.state === 'paused'
          ? 'debug-pause'
          : debate.state === 'aborted'
            ? 'circle-slash'
            : 'pass',
    needsYou,
    contextValue: `negotiation+debate+${debate.state}`,
  };
}

/** A room artifact's row: its id, then type · producer · revision · votes n/m · state or outcome. */
export function roomRow(room: RoomArtifactSummary): NegotiationRow {
  const needsYou = roomNeedsYou(room);
  const state = needsYou ? 'needs you' : room.state === 'decided' && room.outcome ? room.outcome : room.state;
  return {
    label: room.artifactId,
    description: [
      room.artifactType,
      room.producerId,
      `rev ${room.revision}`,
      `votes ${room.votes}/${room.requested}`,
      state,
    ].join(' · '),
    tooltip: [
      `${room.artifactType} artifact ${room.artifactId}, revision ${room.revision}`,
      `room ${room.roomId} · producer ${room.producerId}`,
      `votes: ${room.votes} of ${room.requested} requested critics`,
      `state: ${room.state}${room.outcome ? ` · outcome ${room.outcome}` : ''}`,
      ...(needsYou ? ['Escalated to you: open it to approve, request a revision or reject.'] : []),
      `updated ${new Date(room.updatedAt).toISOString()}`,
    ].join('\n'),
    icon: needsYou
      ? 'person'
      : room.state === 'voting'
        ? 'sync~spin'
        : room.outcome === 'APPROVED'
          ? 'pass'
          : room.outcome === 'REVISION_REQUESTED'
            ? 'error'
            : 'comment-discussion',
    needsYou,
    contextValue: `negotiation+room+${room.state}`,
  };
}

// ---------------------------------------------------------------- the panel's wire shapes

function payloadJson(payload: PayloadText): PayloadJson {
  return {
    contentType: payload.contentType,
    bytes: payload.bytes,
    text: payload.text,
    binary: payload.binary,
    truncated: payload.truncated,
  };
}

/** Flattens the effective policy (`scoring.llmWeight`…) to words and numbers. */
function flatten(
  value: unknown,
  prefix = '',
  into: Record<string, string | number | boolean> = {},
): Record<string, string | number | boolean> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key, into);
  } else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    into[prefix] = value;
  } else if (value !== undefined) {
    into[prefix] = JSON.stringify(value);
  }
  return into;
}

/** A debate as the panel's protocol carries it. */
export function debateJson(detail: NegotiationDetailView): DebateJson {
  const n = detail.negotiation;
  return {
    id: n.id,
    topic: n.topic,
    participants: [...n.participants],
    intensity: n.intensity,
    state: n.state,
    openedBy: n.openedBy,
    openedAt: n.openedAt,
    deadlineAt: n.deadlineAt,
    profile: n.effective.profile,
    policyVersion: n.effective.policyVersion,
    policy: flatten(n.effective.policy),
    tokensUsed: n.tokensUsed,
    oscillations: n.oscillations,
    rounds: detail.rounds.map((r) => ({
      n: r.n,
      kind: r.kind,
      from: r.from,
      at: r.at,
      tokens: r.tokens,
      magnitude: r.delta.magnitude,
      changedPaths: [...r.delta.changedPaths],
      evaluations: r.evaluations.map((e) => ({
        from: e.from,
        score: e.score,
        llmConfidence: e.llmConfidence,
        notes: e.notes,
        source: e.source,
        at: e.at,
      })),
      deterministicScore: r.deterministicScore,
      llmConfidence: r.llmConfidence,
      score: r.score,
      oscillation: r.oscillation,
      payload: payloadJson(r.payload),
    })),
    pending: n.pending && {
      invocationId: n.pending.invocationId,
      why: n.pending.why,
      stopReason: n.pending.stopReason,
    },
    decision: n.decision && {
      decidedBy: n.decision.decidedBy,
      round: n.decision.round,
      finalScore: n.decision.finalScore,
      rationale: n.decision.rationale,
      stopReason: n.decision.stopReason,
      policyVersion: n.decision.policyVersion,
      fallback: n.decision.fallback && { ...n.decision.fallback },
      at: n.decision.at,
      result: payloadJson(n.decision.result),
    },
    abort: n.abort && { ...n.abort },
  };
}

/** A room artifact as the panel's protocol carries it. */
export function roomJson(detail: RoomArtifactDetailView): RoomJson {
  const p = detail.proposal;
  const t = detail.thresholds;
  return {
    artifactId: p.artifactId,
    roomId: p.roomId,
    revision: p.revision,
    artifactType: p.artifactType,
    producerId: p.producerId,
    state: p.state,
    closed: p.closed,
    invocationId: p.invocationId,
    requestedCritics: [...p.requestedCritics],
    submittedAt: p.submittedAt,
    voteDeadlineAt: p.voteDeadlineAt,
    policyVersion: p.policyVersion,
    artifact: payloadJson(p.artifact),
    previous: detail.previous ? payloadJson(detail.previous.artifact) : null,
    votes: detail.votes.map((v) => ({
      criticId: v.criticId,
      score: v.score,
      confidence: v.confidence,
      passed: v.passed,
      strengths: [...v.strengths],
      weaknesses: [...v.weaknesses],
      recommendations: [...v.recommendations],
      votedAt: v.votedAt,
      replaced: v.replaced,
    })),
    aggregate: detail.aggregate && { ...detail.aggregate },
    thresholds: {
      minScoreThreshold: t.minScoreThreshold,
      minConfidenceThreshold: t.minConfidenceThreshold,
      minPassRatio: t.minPassRatio,
      maxStdDev: t.maxStdDev,
    },
    decision: detail.decision && {
      outcome: detail.decision.outcome,
      reason: detail.decision.reason,
      decidedBy: detail.decision.decidedBy,
      final: detail.decision.final,
      decidedAt: detail.decision.decidedAt,
      policyVersion: detail.decision.policyVersion,
      escalation: [...detail.decision.escalation],
      checks: detail.decision.checks.map((c) => ({
        name: c.name,
        value: c.value,
        threshold: c.threshold,
        pass: c.pass,
      })),
    },
  };
}

/** The panel's title: `Debate: <topic>` / `Room: <artifact id>`, bounded. */
export function negotiationPanelTitle(kind: 'debate' | 'room', id: string, topic?: string): string {
  const name = kind === 'debate' ? `Debate: ${topic || id}` : `Room: ${id}`;
  return name.length > 60 ? `${name.slice(0, 59)}…` : name;
}

/** What the panel says after a decision was recorded. */
export function decidedMessage(kind: 'debate' | 'room', action: string): string {
  if (kind === 'room') {
    return action === 'approve'
      ? 'Approved: the producer is answered APPROVED.'
      : action === 'modify'
        ? 'Revision requested: the producer is answered REVISION_REQUESTED.'
        : 'Rejected: the producer is answered REVISION_REQUESTED, and the artifact is closed.';
  }
  return action === 'approve'
    ? 'Approved: the debate goes on as the paused step said (best round, next round or this round).'
    : action === 'modify'
      ? 'Decided with your payload.'
      : 'Denied: the debate is aborted.';
}
