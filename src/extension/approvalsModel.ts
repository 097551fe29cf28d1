import type { HitlInvocation, ReasonType } from '../core/api';

/** Settled invocations the Approvals view lists at most (pending ones are always all listed). */
export const MAX_SETTLED_LISTED = 200;

/** A codicon per reason type (RFC §15). */
export const REASON_ICONS: Readonly<Record<ReasonType, string>> = {
  CONFLICT: 'git-merge',
  SECURITY_APPROVAL: 'shield',
  TASK_ESCALATION: 'arrow-circle-up',
  MANUAL_OVERRIDE: 'person',
  WORKTREE_OVERRIDE: 'repo-forked',
  DEBATE_DEADLOCK: 'comment-discussion',
  TOOL_PRIVILEGE_ESCALATION: 'tools',
  CONNECTOR_APPROVAL: 'plug',
};

/**
 * The view's order: pending first (highest priority, then nearest deadline), then the settled ones, most
 * recently settled first, at most `maxSettled` of them.
 */
export function orderForView(
  invocations: readonly HitlInvocation[],
  maxSettled = MAX_SETTLED_LISTED,
): HitlInvocation[] {
  const pending = invocations
    .filter((i) => i.state === 'pending')
    .sort((a, b) => b.priority - a.priority || a.deadlineAt - b.deadlineAt || a.createdAt - b.createdAt);
  const settled = invocations
    .filter((i) => i.state !== 'pending')
    .sort((a, b) => b.updatedAt - a.updatedAt || b.createdAt - a.createdAt)
    .slice(0, maxSettled);
  return [...pending, ...settled];
}

/** What one row of the Approvals view shows; plain data, turned into a TreeItem by the view. */
export interface ApprovalRow {
  readonly label: string;
  readonly description: string;
  readonly icon: string;
  /** A theme colour id for the icon: the state marker. */
  readonly color: string;
  /** `approval+<state>`: menus match `+pending` to offer Cancel. */
  readonly contextValue: string;
  /** Plain text (agent-supplied parts are never rendered as Markdown). */
  readonly tooltip: string;
  readonly accessibilityLabel: string;
}

/** How a time is written (injected so that tests do not depend on the locale and time zone). */
export type TimeFormat = (ms: number) => string;

export const defaultTimeFormat: TimeFormat = (ms) => {
  const date = new Date(ms);
  return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
};

const PAST: Readonly<Record<string, string>> = {
  approve: 'approved',
  deny: 'denied',
  modify: 'modified',
  defer: 'deferred',
};

/** `pending`, `approved`, `timed out → denied`, `cancelled`. */
export function stateText(invocation: HitlInvocation): string {
  const action = invocation.decision ? (PAST[invocation.decision.action] ?? invocation.decision.action) : '';
  switch (invocation.state) {
    case 'pending':
      return 'pending';
    case 'decided':
      return action;
    case 'timed_out':
      return `timed out → ${action}`;
    case 'cancelled':
      return 'cancelled';
  }
}

/** Who or what settled it: `editor:alice`, `rule 'docs-only'`, `fallback DENY_BY_DEFAULT`. */
export function settledBy(invocation: HitlInvocation): string {
  const origin = invocation.decision?.origin;
  if (!origin) return '';
  switch (origin.kind) {
    case 'rule':
      return `rule '${origin.rule ?? '?'}'`;
    case 'fallback':
      return `fallback ${origin.policy ?? '?'}`;
    default:
      return origin.by;
  }
}

function stateColor(invocation: HitlInvocation): string {
  if (invocation.state === 'pending') return 'notificationsWarningIcon.foreground';
  if (invocation.state !== 'decided') return 'disabledForeground';
  switch (invocation.decision?.action) {
    case 'approve':
      return 'testing.iconPassed';
    case 'deny':
      return 'testing.iconFailed';
    case 'modify':
      return 'notificationsInfoIcon.foreground';
    default:
      return 'disabledForeground';
  }
}

/** `SECURITY_APPROVAL` → `Security approval`. */
export function reasonLabel(reason: string): string {
  const words = reason.toLowerCase().split('_').filter(Boolean).join(' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function approvalRow(invocation: HitlInvocation, formatTime: TimeFormat = defaultTimeFormat): ApprovalRow {
  const summary = oneLine(invocation.context.summary, 80);
  const label = summary ? `${reasonLabel(invocation.reasonType)}: ${summary}` : reasonLabel(invocation.reasonType);
  const state = stateText(invocation);
  const description =
    invocation.state === 'pending'
      ? `pending · ${invocation.requester} · due ${formatTime(invocation.deadlineAt)}`
      : `${state} · ${invocation.requester} · by ${settledBy(invocation)} · ${formatTime(invocation.decision?.decidedAt ?? invocation.updatedAt)}`;
  return {
    label,
    description,
    icon: REASON_ICONS[invocation.reasonType] ?? 'question',
    color: stateColor(invocation),
    contextValue: `approval+${invocation.state}`,
    tooltip: approvalTooltip(invocation, formatTime),
    accessibilityLabel: `${invocation.reasonType} approval ${state}, from ${invocation.requester}: ${summary || 'no summary'}. ${description}`,
  };
}

function approvalTooltip(invocation: HitlInvocation, formatTime: TimeFormat): string {
  const { subject, context, decision } = invocation;
  const lines = [
    `${invocation.reasonType} — ${stateText(invocation)}`,
    `from ${invocation.requester} · priority ${invocation.priority}`,
    `invocation ${invocation.id}`,
  ];
  const where = [
    subject.repoId && `repo ${subject.repoId}`,
    subject.worktreeId && `worktree ${subject.worktreeId}`,
    subject.taskId && `task ${subject.taskId}`,
  ].filter(Boolean);
  if (where.length) lines.push(where.join(' · '));
  if (context.summary) lines.push(clip(context.summary, 500));
  if (context.risk.level) lines.push(`risk: ${context.risk.level}`);
  lines.push(
    `opened ${formatTime(invocation.createdAt)} · deadline ${formatTime(invocation.deadlineAt)}${invocation.extensions ? ` (extended ${invocation.extensions}×)` : ''}`,
  );
  if (decision) {
    lines.push(
      `${stateText(invocation)} by ${settledBy(invocation)}${decision.origin.automatic ? ' (automatic)' : ''} at ${formatTime(decision.decidedAt)}`,
    );
    if (decision.rationale) lines.push(`rationale: ${clip(decision.rationale, 500)}`);
  }
  return lines.join('\n');
}

/**
 * Whether a change deserves an "approval needed" notification: a newly opened invocation that waits for a
 * human. One that a rule decided at once is already settled when its `opened` event fires.
 */
export function needsAnnouncement(change: {
  readonly kind: string;
  readonly invocation: Pick<HitlInvocation, 'state'>;
}): boolean {
  return change.kind === 'opened' && change.invocation.state === 'pending';
}

/**
 * The text of the "approval needed" notification. Notifications render `[text](link)` as a link, so the
 * requester's name (agent-supplied) loses its brackets.
 */
export function notificationText(invocation: HitlInvocation): string {
  const requester = oneLine(invocation.requester, 80).replace(/[[\]]/g, '');
  return `SW4RM approval needed: ${invocation.reasonType} from ${requester}`;
}

/**
 * The "approval needed" notification with a Review link opening the invocation's panel (a progress notification
 * has no buttons but Cancel, so Review is a command link). The command's argument is percent-encoded all the way,
 * so that an invocation id (agent-supplied) cannot end the link or add another.
 */
export function announcementText(
  invocation: Pick<HitlInvocation, 'id' | 'reasonType' | 'requester'>,
  reviewCommand: string,
): string {
  const args = encodeURIComponent(JSON.stringify([{ kind: 'approval', id: invocation.id }])).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${notificationText(invocation as HitlInvocation)}. [Review](command:${reviewCommand}?${args})`;
}

/**
 * The "approval needed" notifications on screen, by invocation id: each is closed when its invocation settles
 * (decided anywhere, by a rule, by its deadline, cancelled), when the coordinator stops, or when the user
 * dismisses it. `close` ends the notification (resolves its progress).
 */
export class OpenAnnouncements {
  private readonly open = new Map<string, () => void>();

  /** Registers a notification; answers false (and closes the new one) if the invocation already has one. */
  add(id: string, close: () => void): boolean {
    if (this.open.has(id)) {
      close();
      return false;
    }
    this.open.set(id, close);
    return true;
  }

  has(id: string): boolean {
    return this.open.has(id);
  }

  get size(): number {
    return this.open.size;
  }

  /** The invocation settled (or the user dismissed its notification): its notification goes. */
  close(id: string): void {
    const close = this.open.get(id);
    this.open.delete(id);
    close?.();
  }

  closeAll(): void {
    const all = [...this.open.values()];
    this.open.clear();
    for (const close of all) close();
  }
}

/** The panel's title. */
export function panelTitle(invocation: HitlInvocation | undefined, id: string): string {
  return invocation
    ? `Approval: ${reasonLabel(invocation.reasonType)} · ${oneLine(invocation.requester, 40)}`
    : `Approval ${id.slice(0, 8)}`;
}

/** `sw4rm-approvals-audit-2025-01-02T03-04-05Z.json` */
export function auditFileName(now: number): string {
  return `sw4rm-approvals-audit-${new Date(now)
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/:/g, '-')}.json`;
}

function oneLine(text: string, max: number): string {
  return clip(text.replace(/\s+/g, ' ').trim(), max);
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
