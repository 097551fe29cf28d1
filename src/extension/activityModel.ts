import type { ActivityEntry, ActivityUsage } from '../core/api';
import { age, shortId } from './messagesModel';

/** How the Activity view groups its entries (a toggle in the view's title, remembered per workspace). */
export type ActivityGrouping = 'agent' | 'repository';

export interface ActivityGroup {
  /** The agent id or the repo_id ('' when an entry names none). */
  readonly key: string;
  readonly label: string;
  readonly entries: readonly ActivityEntry[];
}

/** An entry's identity in the buffer: one entry per agent and task. */
export function activityKey(entry: Pick<ActivityEntry, 'agentId' | 'taskId'>): string {
  return `${entry.agentId}\u0000${entry.taskId}`;
}

/** Groups sorted by key; inside a group, newest first (the order the core answers). */
export function groupActivity(entries: readonly ActivityEntry[], grouping: ActivityGrouping): ActivityGroup[] {
  const groups = new Map<string, ActivityEntry[]>();
  for (const entry of entries) {
    const key = grouping === 'agent' ? entry.agentId : entry.repoId;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(entry);
  }
  return [...groups]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, list]) => ({
      key,
      label: key || (grouping === 'agent' ? '(no agent)' : '(no repository)'),
      entries: [...list].sort((a, b) => b.timestamp - a.timestamp),
    }));
}

/** The entries an entry overlaps with: how many, and the first few (the row names at most OVERLAP_NAMES_SHOWN). */
export interface ActivityOverlap {
  readonly count: number;
  /** At most OVERLAP_NAMES_SHOWN of them. */
  readonly first: readonly ActivityEntry[];
}

/** A row names this many overlapping entries at most, then says "and N more". */
const OVERLAP_NAMES_SHOWN = 3;

/**
 * Overlapping scopes (RFC §10: the buffer tells agents who works where): two active entries of different tasks in the
 * same repository and the same worktree or the same branch. Answers, per entry key, how many it overlaps with and the
 * first few. Linear: entries are grouped by repository + worktree, repository + branch and repository + both, and an
 * entry's count is |same worktree| + |same branch| − |same both| (itself excluded from each).
 */
export function activityOverlaps(entries: readonly ActivityEntry[]): Map<string, ActivityOverlap> {
  const byWorktree = new Map<string, ActivityEntry[]>();
  const byBranch = new Map<string, ActivityEntry[]>();
  const byBoth = new Map<string, number>();
  const add = (map: Map<string, ActivityEntry[]>, key: string, entry: ActivityEntry) => {
    const list = map.get(key);
    if (list) list.push(entry);
    else map.set(key, [entry]);
  };
  const keys = (e: ActivityEntry) => ({
    worktree: e.worktreeId ? `${e.repoId}\u0000${e.worktreeId}` : '',
    branch: e.branch ? `${e.repoId}\u0000${e.branch}` : '',
  });
  for (const entry of entries) {
    if (!entry.repoId) continue;
    const { worktree, branch } = keys(entry);
    if (worktree) add(byWorktree, worktree, entry);
    if (branch) add(byBranch, branch, entry);
    if (worktree && branch)
      byBoth.set(`${worktree}\u0000${branch}`, (byBoth.get(`${worktree}\u0000${branch}`) ?? 0) + 1);
  }
  const overlaps = new Map<string, ActivityOverlap>();
  for (const entry of entries) {
    if (!entry.repoId) continue;
    const { worktree, branch } = keys(entry);
    const sameWorktree = worktree ? byWorktree.get(worktree)! : [];
    const sameBranch = branch ? byBranch.get(branch)! : [];
    const sameBoth = worktree && branch ? byBoth.get(`${worktree}\u0000${branch}`)! : 0;
    const count = Math.max(0, sameWorktree.length - 1) + Math.max(0, sameBranch.length - 1) - Math.max(0, sameBoth - 1);
    if (count <= 0) continue;
    const self = activityKey(entry);
    const first: ActivityEntry[] = [];
    const seen = new Set<string>([self]);
    for (const list of [sameWorktree, sameBranch]) {
      for (const other of list) {
        if (first.length >= OVERLAP_NAMES_SHOWN) break;
        const key = activityKey(other);
        if (seen.has(key)) continue;
        seen.add(key);
        first.push(other);
      }
    }
    overlaps.set(self, { count, first });
  }
  return overlaps;
}

/** Where an entry works: `repo · worktree · branch` (only the parts it names). */
function activityPlace(entry: Pick<ActivityEntry, 'repoId' | 'worktreeId' | 'branch'>): string {
  return (
    [entry.repoId, entry.worktreeId && `worktree ${entry.worktreeId}`, entry.branch && `branch ${entry.branch}`]
      .filter(Boolean)
      .join(' · ') || '(no repository)'
  );
}

export interface ActivityRow {
  readonly label: string;
  readonly description: string;
  /** Plain text: descriptions come from agents. */
  readonly tooltip: string;
  readonly overlapping: boolean;
}

/**
 * A row of the Activity view. Grouped by agent, the row names the place; grouped by repository, the agent. Overlaps are
 * said first in the description ("overlaps with …").
 */
export function activityRow(
  entry: ActivityEntry,
  overlap: ActivityOverlap | undefined,
  grouping: ActivityGrouping,
  now: number,
): ActivityRow {
  const first = overlap?.first ?? [];
  const more = overlap && overlap.count > first.length ? ` and ${overlap.count - first.length} more` : '';
  const who = (e: ActivityEntry) => `${e.agentId} (task ${shortId(e.taskId)})`;
  const overlapping = first.length > 0;
  const overlapText = overlapping ? `overlaps with ${first.map(who).join(', ')}${more}` : '';
  const where =
    grouping === 'agent'
      ? activityPlace(entry)
      : [entry.agentId, entry.worktreeId && `worktree ${entry.worktreeId}`, entry.branch && `branch ${entry.branch}`]
          .filter(Boolean)
          .join(' · ');
  const label = oneLine(firstWords(entry.description, 12)) || `task ${shortId(entry.taskId)}`;
  const description = [overlapText, where, `task ${shortId(entry.taskId)}`, age(entry.timestamp, now)]
    .filter(Boolean)
    .join(' · ');
  const tooltip = [
    `${entry.agentId} on task ${entry.taskId}`,
    activityPlace(entry),
    `since ${new Date(entry.timestamp).toISOString()}`,
    ...(overlapping
      ? [
          `Overlaps with: ${first.map((e) => `${e.agentId} on task ${e.taskId} (${activityPlace(e)})`).join('; ')}${more}`,
        ]
      : []),
    '',
    entry.description,
  ].join('\n');
  return { label, description, tooltip, overlapping };
}

/** The view's message: the RFC §10.1 warning from 80% full, with what happens at the limit. */
export function activityUsageMessage(usage: ActivityUsage): string | undefined {
  if (!usage.warning) return undefined;
  const percent = usage.maxEntries > 0 ? Math.floor((usage.active / usage.maxEntries) * 100) : 100;
  return (
    `The activity buffer is ${percent}% full (${usage.active.toLocaleString('en-US')} of ${usage.maxEntries.toLocaleString('en-US')} active entries): ` +
    'at the limit new tasks run without an entry and their agents are told activity_buffer_full.'
  );
}

function firstWords(text: string, count: number): string {
  const words = text.trim().split(/\s+/).filter(Boolean);
  return words.length > count ? `${words.slice(0, count).join(' ')}…` : words.join(' ');
}

function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, ' ');
}
