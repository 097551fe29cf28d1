import * as path from 'node:path';
import type { AcpSessionHooks } from './acpSession';

/** What the session's file capability needs of the worktree's Confinement (worktree/confinement.ts). */
export interface ConfinedFiles {
  readFile(requested: string, options?: { maxBytes?: number }): Promise<Buffer>;
  writeFile(requested: string, data: string, options?: { createParents?: boolean }): Promise<void>;
}

/** The most a `fs/read_text_file` answers (an agent reads larger files by line ranges). */
export const READ_TEXT_MAX_BYTES = 8 * 1024 * 1024;

/**
 * ACP's file capability (`fs/read_text_file`, `fs/write_text_file`) served through the worktree's confinement. ACP
 * paths are absolute: one inside `root` is made relative to it (the confinement then refuses links, `.git` and
 * every escape); one outside is refused. `line` (1-based) and `limit` select lines of what is read.
 */
export function confinedFiles(root: string, confinement: ConfinedFiles): NonNullable<AcpSessionHooks['files']> {
  const inside = (requested: string): string => {
    const relative = path.isAbsolute(requested) ? path.relative(root, requested) : requested;
    if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative))
      throw new Error(`${requested} is outside the agent's worktree (${root})`);
    return relative;
  };
  return {
    async read(requested, line, limit) {
      const text = (await confinement.readFile(inside(requested), { maxBytes: READ_TEXT_MAX_BYTES })).toString('utf8');
      if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
      const lines = text.split('\n');
      const from = Math.max(0, (line ?? 1) - 1);
      return lines
        .slice(from, limit === undefined || limit === null ? undefined : from + Math.max(0, limit))
        .join('\n');
    },
    async write(requested, content) {
      await confinement.writeFile(inside(requested), content, { createParents: true });
    },
  };
}
