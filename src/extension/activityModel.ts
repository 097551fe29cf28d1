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
  return [...groups].sort(([a], [b]) => a.localeCompare(b)).map(([key, list]) => ({
    key,
    label: key || (grouping === 'agent' ? '(no agent)' : '(no repository)'),
    entries: [...list].sort((a, b) => b.timestamp - a.timestamp),
  }));
}

/**
 * Overlapping scopes (RFC §10: the buffer tells agents who works where): two active entries of different tasks in the
 * same repository and the same worktree or the same branch. Answers, per entry key, the entries it overlaps with.
 */
export function activityOverlaps(entries: readonly ActivityEntry[]): Map<string, ActivityEntry[]> {
  const overlaps = new Map<string, ActivityEntry[]>();
  const byRepo = new Map<string, ActivityEntry[]>();
  for (const entry of entries) {
    if (!entry.repoId) continue;
    let list = byRepo.get(entry.repoId);
    if (!list) byRepo.set(entry.repoId, (list = []));
    list.push(entry);
  }
  for (const list of byRepo.values()) {
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const a = list[i];
        const b = list[j];
        if (a.taskId === b.taskId && a.agentId === b.agentId) continue;
        const sameWorktree = a.worktreeId !== '' && a.worktreeId === b.worktreeId;
        const sameBranch = a.branch !== '' && a.branch === b.branch;
        if (!sameWorktree && !sameBranch) continue;
        for (const [x, y] of [[a, b], [b, a]] as const) {
          const key = activityKey(x);
          const found = overlaps.get(key);
          if (found) found.push(y);
          else overlaps.set(key, [y]);
        }
      }
    }
  }
  return overlaps;
}

/** Where an entry works: `repo · worktree · branch` (only the parts it names). */
export function activityPlace(entry: Pick<ActivityEntry, 'repoId' | 'worktreeId' | 'branch'>): string {
  return [entry.repoId, entry.worktreeId && `worktree ${entry.worktreeId}`, entry.branch && `branch ${entry.branch}`].filter(Boolean).join(' · ')
    || '(no repository)';
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
export function activityRow(entry: ActivityEntry, overlapsWith: readonly ActivityEntry[], grouping: ActivityGrouping, now: number): ActivityRow {
  const who = (e: ActivityEntry) => `${e.agentId} (task ${shortId(e.taskId)})`;
  const overlap = overlapsWith.length ? `overlaps with ${overlapsWith.map(who).join(', ')}` : '';
  const where = grouping === 'agent'
    ? activityPlace(entry)
    : [entry.agentId, entry.worktreeId && `worktree ${entry.worktreeId}`, entry.branch && `branch ${entry.branch}`].filter(Boolean).join(' · ');
  const label = oneLine(firstWords(entry.description, 12)) || `task ${shortId(entry.taskId)}`;
  const description = [overlap, where, `task ${shortId(entry.taskId)}`, age(entry.timestamp, now)].filter(Boolean).join(' · ');
  const tooltip = [
    `${entry.agentId} on task ${entry.taskId}`,
    activityPlace(entry),
    `since ${new Date(entry.timestamp).toISOString()}`,
    ...(overlapsWith.length ? [`Overlaps with: ${overlapsWith.map((e) => `${e.agentId} on task ${e.taskId} (${activityPlace(e)})`).join('; ')}`] : []),
    '',
    entry.description,
  ].join('\n');
  return { label, description, tooltip, overlapping: overlapsWith.length > 0 };
}

/** The view's message: the RFC §10.1 warning from 80% full, with what happens at the limit. */
export function activityUsageMessage(usage: ActivityUsage): string | undefined {
  if (!usage.warning) return undefined;
  const percent = usage.maxEntries > 0 ? Math.floor((usage.active / usage.maxEntries) * 100) : 100;
  return `The activity buffer is ${percent}% full (${usage.active.toLocaleString('en-US')} of ${usage.maxEntries.toLocaleString('en-US')} active entries): `
    + 'at the limit new tasks run without an entry and their agents are told activity_buffer_full.';
}

function firstWords(text: string, count: number): string {
  const words = text.trim().split(/\s+/).filter(Boolean);
  return words.length > count ? `${words.slice(0, count).join(' ')}…` : words.join(' ');
}

function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, ' ');
}
