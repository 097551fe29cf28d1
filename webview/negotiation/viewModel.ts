// The negotiation panel's content as plain data: pure functions, no DOM, so that they are unit tested in Node
// (test/unit/negotiationWebview.test.ts). main.ts turns the rows into elements with textContent only.
import { jsonDeltaChanges, textDiffLines, type DiffLine, type JsonChange } from '../hitl/diffModel';
import type { DebateJson, NegotiationAction, PayloadJson, RoomJson, ThresholdCheckJson } from './protocol';

/** A JSON differ (jsondiffpatch's `diff`): the panel passes jsondiffpatch's, tests pass it too. */
export type JsonDiffer = (before: unknown, after: unknown) => unknown;

/** How a proposal is shown against the one before it. */
export type ProposalDiff =
  /** The first version: shown whole. */
  | { readonly kind: 'initial'; readonly text: string }
  /** Both versions are JSON (by content type, and both parse): the structural changes. */
  | { readonly kind: 'json'; readonly changes: readonly JsonChange[] }
  /** A line diff (any other content type, or JSON that does not parse). */
  | { readonly kind: 'text'; readonly lines: readonly DiffLine[] }
  | { readonly kind: 'same' }
  /** One of the two is binary: only the sizes are said. */
  | { readonly kind: 'binary'; readonly note: string };

/** `application/json`, `application/vnd.x+json`, `text/json`, with or without parameters. */
export function isJsonContentType(contentType: string): boolean {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || type === 'text/json' || type.endsWith('+json');
}

/**
 * A proposal against the previous one: a JSON structural diff when the content type is JSON and both texts parse,
 * a line diff otherwise. Without a previous version, the proposal whole.
 */
export function proposalDiff(previous: PayloadJson | null, current: PayloadJson, differ: JsonDiffer): ProposalDiff {
  if (current.binary || previous?.binary) {
    return {
      kind: 'binary',
      note: `Binary content (${current.bytes} bytes${previous ? `, previously ${previous.bytes} bytes` : ''}); not shown.`,
    };
  }
  if (!previous) return { kind: 'initial', text: prettyText(current) };
  if (isJsonContentType(current.contentType) && isJsonContentType(previous.contentType)) {
    const before = parseJson(previous.text);
    const after = parseJson(current.text);
    if (before.ok && after.ok) {
      const changes = jsonDeltaChanges(differ(before.value, after.value));
      return changes.length ? { kind: 'json', changes } : { kind: 'same' };
    }
  }
  const lines = textDiffLines(prettyText(previous), prettyText(current));
  return lines.length ? { kind: 'text', lines } : { kind: 'same' };
}

/** A payload's text as shown: JSON pretty-printed when it parses, anything else as it is. */
export function prettyText(payload: PayloadJson): string {
  if (payload.binary) return '';
  if (isJsonContentType(payload.contentType)) {
    const parsed = parseJson(payload.text);
    if (parsed.ok) return JSON.stringify(parsed.value, null, 2);
  }
  return payload.text;
}

/** `12 bytes, application/json`, `…, first 65536 bytes shown`. */
export function payloadNote(payload: PayloadJson): string {
  return `${payload.bytes} bytes, ${payload.contentType || 'no content type'}${payload.truncated ? `, only the first ${payload.text.length} characters shown` : ''}`;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

// ---------------------------------------------------------------- room

export interface ThresholdRow {
  readonly label: string;
  /** `7.40 ≥ 7.00` */
  readonly text: string;
  /** null: not checked yet (still voting). */
  readonly pass: boolean | null;
  /** `pass`, `fail`, `not checked yet`: said in words, never by colour alone. */
  readonly mark: string;
}

const THRESHOLDS: ReadonlyArray<{
  readonly name: string;
  readonly label: string;
  readonly key: keyof RoomJson['thresholds'];
  readonly op: '≥' | '≤';
}> = [
  { name: 'min_score_threshold', label: 'Minimum score', key: 'minScoreThreshold', op: '≥' },
  { name: 'min_confidence_threshold', label: 'Minimum confidence', key: 'minConfidenceThreshold', op: '≥' },
  { name: 'min_pass_ratio', label: 'Minimum pass ratio', key: 'minPassRatio', op: '≥' },
  { name: 'max_std_dev', label: 'Maximum standard deviation', key: 'maxStdDev', op: '≤' },
];

/** The four thresholds: as the decision checked them (pass/fail), or with their values only while votes are coming in. */
export function thresholdRows(room: RoomJson): ThresholdRow[] {
  const checks = new Map<string, ThresholdCheckJson>((room.decision?.checks ?? []).map((c) => [c.name, c]));
  return THRESHOLDS.map((t) => {
    const check = checks.get(t.name);
    if (!check)
      return { label: t.label, text: `${t.op} ${num(room.thresholds[t.key])}`, pass: null, mark: 'not checked yet' };
    return {
      label: t.label,
      text: `${num(check.value)} ${t.op} ${num(check.threshold)}`,
      pass: check.pass,
      mark: check.pass ? 'pass' : 'fail',
    };
  });
}

/** The aggregate's figures, in order. */
export function aggregateRows(room: RoomJson): Array<{ key: string; text: string }> {
  const a = room.aggregate;
  if (!a) return [];
  return [
    { key: 'Mean', text: num(a.mean) },
    { key: 'Confidence-weighted mean', text: num(a.weightedMean) },
    { key: 'Minimum', text: num(a.minScore) },
    { key: 'Maximum', text: num(a.maxScore) },
    { key: 'Standard deviation', text: num(a.stdDev) },
    { key: 'Votes', text: `${a.voteCount} of ${room.requestedCritics.length} requested` },
  ];
}

/** `8.0 / 10 · confidence 0.20 · passed` */
export function voteHeadline(vote: RoomJson['votes'][number]): string {
  return (
    `score ${vote.score.toFixed(1)} / 10 · confidence ${vote.confidence.toFixed(2)} · ${vote.passed ? 'passed' : 'did not pass'}` +
    (vote.replaced > 0 ? ` · re-voted (${vote.replaced} earlier vote${vote.replaced === 1 ? '' : 's'} replaced)` : '')
  );
}

/** The room's headline: `CODE artifact api-v2, revision 2, by producer-a: escalated: waiting for you`. */
export function roomHeadline(room: RoomJson): string {
  return `${room.artifactType} artifact ${room.artifactId}, revision ${room.revision}, by ${room.producerId}: ${roomStateText(room)}`;
}

export function roomStateText(room: RoomJson): string {
  if (room.state === 'escalated') return 'escalated: waiting for a person to decide';
  if (room.state === 'voting') return `voting (${room.votes.length} of ${room.requestedCritics.length} votes)`;
  const outcome = room.decision?.outcome ?? 'decided';
  return room.closed ? `${outcome} (rejected: closed to further revisions)` : outcome;
}

/** Whether the room waits for a person (Approve / Request Revision / Reject are offered). */
export function roomDecidable(room: RoomJson): boolean {
  return room.state === 'escalated' && room.invocationId !== null;
}

/** The buttons of a room's decision, by action. */
export const ROOM_ACTION_LABELS: Readonly<Record<NegotiationAction, string>> = {
  approve: 'Approve',
  modify: 'Request Revision',
  deny: 'Reject',
};

/** What a room's Request Revision sends as the HITL `modify` payload. */
export const REQUEST_REVISION_PAYLOAD = { outcome: 'REVISION_REQUESTED' } as const;

// ---------------------------------------------------------------- debate

/** The buttons of a paused debate's decision, by action: what Approve does depends on why it paused. */
export function debateActionLabels(debate: DebateJson): Readonly<Record<NegotiationAction, string>> {
  const approve =
    debate.pending?.why === 'pause_between_rounds'
      ? 'Approve (next round)'
      : debate.pending?.why === 'final_accept'
        ? 'Approve (accept this round)'
        : 'Approve (accept the best round)';
  return { approve, modify: 'Modify…', deny: 'Deny (abort)' };
}

export function debateDecidable(debate: DebateJson): boolean {
  return debate.state === 'paused' && debate.pending !== null;
}

const STOP_REASONS: Readonly<Record<string, string>> = {
  threshold_met: 'a round reached the score threshold',
  max_rounds: 'the maximum number of rounds was reached',
  oscillation: 'the proposals oscillated (A → B → A) too often',
  budget: 'the token budget was spent',
  timeout: 'the time limit passed',
  decided: 'a participant decided',
  hitl: 'a person decided',
  aborted: 'it was aborted',
};

/** Why the debate stopped (or what it waits for), in words. */
export function stopText(debate: DebateJson): string {
  if (debate.state === 'open') return `Open: round ${debate.rounds.length + 1} may be proposed.`;
  if (debate.state === 'paused' && debate.pending) {
    const why =
      debate.pending.why === 'deadlock'
        ? `deadlocked (${STOP_REASONS[debate.pending.stopReason] ?? debate.pending.stopReason})`
        : debate.pending.why === 'pause_between_rounds'
          ? 'paused between rounds (the policy asks a person)'
          : 'waiting for a person to accept the final round';
    return `Paused: ${why}. Waiting for a decision.`;
  }
  if (debate.abort)
    return `Aborted by ${debate.abort.by}: ${debate.abort.reason}${debate.abort.errorCode ? ` (${debate.abort.errorCode})` : ''}.`;
  if (debate.decision) {
    const reason = STOP_REASONS[debate.decision.stopReason] ?? debate.decision.stopReason;
    return `Stopped because ${reason}.`;
  }
  return debate.state;
}

/** The decision in one line: `Decided by policy: round 3 (score 0.82), policy version 4`. */
export function decisionText(debate: DebateJson): string | undefined {
  const d = debate.decision;
  if (!d) return undefined;
  const chosen = d.round > 0 ? `round ${d.round}` : 'a result given with the decision';
  const fallback = d.fallback ? `, fallback ${d.fallback.policy} (${d.fallback.trigger})` : '';
  return `Decided by ${d.decidedBy}: ${chosen} (score ${num(d.finalScore)}), policy version ${d.policyVersion}${fallback}.`;
}

/** The best-scored round's number, or undefined while none is scored. */
export function bestRound(debate: DebateJson): number | undefined {
  let best: { n: number; score: number } | undefined;
  for (const round of debate.rounds)
    if (round.score !== null && (!best || round.score > best.score)) best = { n: round.n, score: round.score };
  return best?.n;
}

/** `round 2 · counter by agent-b · 14:03:22 · 31 tokens` */
export function roundHeadline(round: DebateJson['rounds'][number]): string {
  return `Round ${round.n} · ${round.kind === 'counter' ? 'counter-proposal' : 'proposal'} by ${round.from} · ${time(round.at)} · ${round.tokens} tokens`;
}

/** `changed 0.25 · 2 paths` and the blended score line. */
export function roundFacts(round: DebateJson['rounds'][number]): Array<{ key: string; text: string }> {
  const rows = [
    { key: 'Change magnitude', text: num(round.magnitude) },
    { key: 'Changed paths', text: round.changedPaths.length ? round.changedPaths.join(', ') : 'none' },
    {
      key: 'Score',
      text:
        round.score === null
          ? 'not evaluated yet'
          : `${num(round.score)} (deterministic ${round.deterministicScore === null ? '–' : num(round.deterministicScore)}${round.llmConfidence === null ? '' : `, inference ${num(round.llmConfidence)}`})`,
    },
  ];
  if (round.oscillation) rows.push({ key: 'Oscillation', text: 'this round repeats round ' + String(round.n - 2) });
  return rows;
}

/** The effective policy's fields as rows, profile and version first. */
export function policyRows(debate: DebateJson): Array<{ key: string; text: string }> {
  return [
    { key: 'Profile', text: `${debate.profile} (intensity ${debate.intensity})` },
    { key: 'Policy version', text: debate.policyVersion },
    ...Object.entries(debate.policy).map(([key, value]) => ({ key, text: String(value) })),
  ];
}

/** At most two decimals, without trailing zeros, so that 8 and 8.5 read alike (8, 8.5, 8.41). */
export function num(value: number): string {
  return String(Number(value.toFixed(2)));
}

export function time(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** Shown next to the rationale field while it is blank. */
export const RATIONALE_REQUIRED_HINT = 'A rationale is required: say why before you decide.';

export function rationaleMissing(text: string): boolean {
  return text.trim() === '';
}
