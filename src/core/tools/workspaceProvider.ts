import * as path from 'node:path';
import { Turns, byteOrder, forEachInTurns, sortInTurns } from '../inTurns';
import { ConfinedGit, ConfinedGitLimitError, specMatcher } from '../worktree/confinedGit';
import { Confinement, ConfinementError, type ConfinementOptions } from '../worktree/confinement';
import { GitCommandError, type Git } from '../worktree/git';
import { ToolCallError, type JsonSchema, type ToolDescriptor, type ToolProvider, type ToolRequest } from './model';

/** The bounds of the workspace tools (README, "Limits" and "Workspace tools"). */
export const WORKSPACE_LIMITS = Object.freeze({
  /** read_file: the largest file answered (its `max_bytes` may ask for less). */
  maxReadBytes: 4 * 1024 * 1024,
  /** write_file: the largest content written (after base64 decoding). */
  maxWriteBytes: 4 * 1024 * 1024,
  /** list_dir: entries answered (the rest are left out, `truncated: true`). */
  maxListEntries: 10_000,
  /** search: matches answered (its `max_results` may ask for fewer; default 100). */
  maxSearchResults: 1_000,
  defaultSearchResults: 100,
  /** search: files larger than this are skipped. */
  maxSearchFileBytes: 1024 * 1024,
  /** search: files looked at, and bytes read, in one call; beyond either the search stops (`truncated: true`). */
  maxSearchFiles: 20_000,
  maxSearchBytes: 64 * 1024 * 1024,
  /** search: the longest query, and the longest line text answered per match. */
  maxQueryChars: 1_000,
  maxMatchTextChars: 400,
  /** git_status: entries answered. */
  maxStatusEntries: 10_000,
  /** git_diff: the largest diff answered (its `max_bytes` may ask for less; default 1 MiB), cut at a line. */
  maxDiffBytes: 4 * 1024 * 1024,
  defaultDiffBytes: 1024 * 1024,
  /** git_commit: the longest message, and paths per call (git_diff too). */
  maxCommitMessageChars: 8_192,
  maxPaths: 1_000,
  /** Any path argument, in characters (the confinement then refuses paths over 4,096 bytes: `permission_denied`). */
  maxPathChars: 16_384,
});

const L = WORKSPACE_LIMITS;
export const WORKSPACE_PROVIDER_ID = 'workspace';

const PATH = {
  type: 'string',
  maxLength: L.maxPathChars,
  description: 'relative to the worktree root, "/" separated',
} as const;
const PATHS = {
  type: 'array',
  items: { type: 'string', minLength: 1, maxLength: L.maxPathChars },
  minItems: 1,
  maxItems: L.maxPaths,
} as const;
const ENTRY_TYPE = { enum: ['file', 'directory', 'symlink', 'other'] } as const;

function object(properties: Record<string, unknown>, required: readonly string[] = []): JsonSchema {
  return { type: 'object', properties, required: [...required], additionalProperties: false };
}

/** The workspace tools' descriptors (DescribeTools lists them; the MCP bridge serves each as `workspace_<name>`). */
export const WORKSPACE_TOOL_DESCRIPTORS: readonly ToolDescriptor[] = [
  {
    name: 'read_file',
    description:
      "The content of a regular file of the caller's worktree: UTF-8 text, or base64 when it is not valid UTF-8 or base64 is asked for.",
    inputSchema: object(
      {
        path: PATH,
        encoding: { enum: ['utf8', 'base64'] },
        max_bytes: { type: 'integer', minimum: 1, maximum: L.maxReadBytes },
      },
      ['path'],
    ),
    outputSchema: object(
      {
        path: { type: 'string' },
        encoding: { enum: ['utf8', 'base64'] },
        content: { type: 'string' },
        size: { type: 'integer' },
      },
      ['path', 'encoding', 'content', 'size'],
    ),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 30,
    maxConcurrency: 64,
    sideEffects: 'none',
  },
  {
    name: 'write_file',
    description:
      "Writes a file of the caller's worktree atomically (a temporary file renamed over the name; an existing file keeps its mode).",
    inputSchema: object(
      {
        path: PATH,
        content: { type: 'string', maxLength: Math.ceil(L.maxWriteBytes / 3) * 4 },
        encoding: { enum: ['utf8', 'base64'] },
        create_parents: { type: 'boolean' },
      },
      ['path', 'content'],
    ),
    outputSchema: object({ path: { type: 'string' }, bytes: { type: 'integer' } }, ['path', 'bytes']),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 30,
    maxConcurrency: 16,
    sideEffects: 'filesystem',
  },
  {
    name: 'list_dir',
    description:
      'The entries of a folder of the caller\'s worktree (links listed as "symlink", never followed; .git left out).',
    inputSchema: object({ path: PATH }),
    outputSchema: object(
      {
        path: { type: 'string' },
        entries: { type: 'array', items: object({ name: { type: 'string' }, type: ENTRY_TYPE }, ['name', 'type']) },
        truncated: { type: 'boolean' },
      },
      ['path', 'entries', 'truncated'],
    ),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 30,
    maxConcurrency: 64,
    sideEffects: 'none',
  },
  {
    name: 'delete_file',
    description:
      "Removes a regular file's name from the caller's worktree (never a folder, never a link or what it points to).",
    inputSchema: object({ path: PATH }, ['path']),
    outputSchema: object({ path: { type: 'string' }, deleted: { const: true } }, ['path', 'deleted']),
    idempotent: false,
    needsWorktree: true,
    defaultTimeoutS: 30,
    maxConcurrency: 16,
    sideEffects: 'filesystem',
  },
  {
    name: 'stat',
    description: "Type, size, modification time and mode of a regular file or folder of the caller's worktree.",
    inputSchema: object({ path: PATH }),
    outputSchema: object(
      {
        path: { type: 'string' },
        type: { enum: ['file', 'directory'] },
        size: { type: 'integer' },
        mtime: { type: 'string' },
        mode: { type: 'integer' },
      },
      ['path', 'type', 'size', 'mtime', 'mode'],
    ),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 30,
    maxConcurrency: 64,
    sideEffects: 'none',
  },
  {
    name: 'search',
    description:
      "Plain-text search (not a regular expression) of the caller's worktree, line by line; skips .git, links, binary and large files; bounded.",
    inputSchema: object(
      {
        query: { type: 'string', minLength: 1, maxLength: L.maxQueryChars },
        path: PATH,
        case_sensitive: { type: 'boolean' },
        max_results: { type: 'integer', minimum: 1, maximum: L.maxSearchResults },
      },
      ['query'],
    ),
    outputSchema: object(
      {
        matches: {
          type: 'array',
          items: object(
            {
              path: { type: 'string' },
              line: { type: 'integer' },
              column: { type: 'integer' },
              text: { type: 'string' },
            },
            ['path', 'line', 'column', 'text'],
          ),
        },
        truncated: { type: 'boolean' },
        files_searched: { type: 'integer' },
        skipped: object(
          {
            binary: { type: 'integer' },
            large: { type: 'integer' },
            links: { type: 'integer' },
            unreadable: { type: 'integer' },
          },
          ['binary', 'large', 'links', 'unreadable'],
        ),
      },
      ['matches', 'truncated', 'files_searched', 'skipped'],
    ),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 60,
    maxConcurrency: 4,
    sideEffects: 'none',
  },
  {
    name: 'git_status',
    description:
      "git status of the caller's worktree: its branch, HEAD and changed, renamed, unmerged and untracked files (ignored files left out).",
    inputSchema: object({}),
    outputSchema: object(
      {
        branch: { type: 'string' },
        head: { type: 'string' },
        clean: { type: 'boolean' },
        truncated: { type: 'boolean' },
        entries: {
          type: 'array',
          items: object(
            {
              path: { type: 'string' },
              xy: { type: 'string' },
              kind: { enum: ['changed', 'renamed', 'unmerged', 'untracked'] },
              orig_path: { type: 'string' },
            },
            ['path', 'xy', 'kind'],
          ),
        },
      },
      ['branch', 'head', 'clean', 'entries', 'truncated'],
    ),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 60,
    maxConcurrency: 8,
    sideEffects: 'none',
  },
  {
    name: 'git_diff',
    description:
      "The diff of the caller's uncommitted changes against HEAD (or, with staged, of the index), optionally for some paths; bounded, cut at a line.",
    inputSchema: object({
      staged: { type: 'boolean' },
      paths: PATHS,
      max_bytes: { type: 'integer', minimum: 1, maximum: L.maxDiffBytes },
    }),
    outputSchema: object({ diff: { type: 'string' }, bytes: { type: 'integer' }, truncated: { type: 'boolean' } }, [
      'diff',
      'bytes',
      'truncated',
    ]),
    idempotent: true,
    needsWorktree: true,
    defaultTimeoutS: 60,
    maxConcurrency: 8,
    sideEffects: 'none',
  },
  {
    name: 'git_commit',
    description:
      "Commits the caller's changes (all of them, or those of paths) on its worktree's own branch sw4rm/<worktree_id>, with the agent as author and committer; no hook runs.",
    inputSchema: object(
      { message: { type: 'string', minLength: 1, maxLength: L.maxCommitMessageChars }, paths: PATHS },
      ['message'],
    ),
    outputSchema: object({ commit: { type: 'string' }, branch: { type: 'string' } }, ['commit', 'branch']),
    idempotent: false,
    needsWorktree: true,
    defaultTimeoutS: 60,
    maxConcurrency: 4,
    sideEffects: 'git',
  },
];

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const GITLINK = '160000';
const SYMLINK = '120000';

/** A ConfinementError as the tool's error: its code first, the gRPC status by what it means. */
function fromConfinement(error: ConfinementError): ToolCallError {
  const detail = error.message.startsWith(`${error.code}: `)
    ? error.message.slice(error.code.length + 2)
    : error.message;
  switch (error.code) {
    case 'permission_denied':
      return new ToolCallError('permission_denied', 'permission_denied', detail);
    case 'worktree_not_bound':
      return new ToolCallError('failed_precondition', 'worktree_not_bound', detail);
    case 'not_found':
      return new ToolCallError('not_found', 'not_found', detail);
    default:
      return new ToolCallError(
        error.reason === 'too_large' ? 'resource_exhausted' : 'failed_precondition',
        error.code,
        detail,
      );
  }
}

function fromGit(error: GitCommandError): ToolCallError {
  return new ToolCallError(
    'failed_precondition',
    'git_error',
    `git ${error.args[0] ?? ''} failed: ${error.stderr.trim().slice(0, 1000) || `exit ${error.exitCode}`}`,
  );
}

/** A name and email git accepts for the agent (the email is never a real address). */
function gitIdentity(agentId: string): { name: string; email: string } {
  const name = agentId.replace(/[<>\u0000-\u001f\u007f]/g, '').trim() || 'agent';
  const local = agentId.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[.-]+|[.-]+$/g, '') || 'agent';
  return { name: `${name} (sw4rm agent)`, email: `${local.slice(0, 64)}@agents.sw4rm.invalid` };
}

/** `:(literal)` pathspecs: a path from an agent is never a glob or another magic pathspec. */
function literal(paths: readonly string[]): string[] {
  return paths.map((p) => `:(literal)${p}`);
}

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes at a line end (or, for one huge line, at a character); `longer`: the
 * text is itself the start of a longer one (git's output was cut).
 */
function cutAtLine(text: string, maxBytes: number, longer = false): { text: string; truncated: boolean } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes && !longer) return { text, truncated: false };
  let cut = bytes.subarray(0, maxBytes).toString('utf8');
  if (cut.endsWith('\ufffd')) cut = cut.slice(0, -1);
  const lastNewline = cut.lastIndexOf('\n');
  return { text: lastNewline > 0 ? cut.slice(0, lastNewline + 1) : cut, truncated: true };
}

/**
 * The built-in provider `workspace` (issue 15, part 6): file and git tools for the calling agent, every one confined
 * to the worktree it is bound to now. Files go only through the worktree area's Confinement (checked at open, no
 * link followed), git only through its Git (argv, clean environment) with the worktree as the working folder.
 */
export class WorkspaceProvider implements ToolProvider {
  readonly id = WORKSPACE_PROVIDER_ID;

  constructor(
    private readonly git: Git,
    private readonly confinementOptions: ConfinementOptions = {},
  ) {}

  describe(): readonly ToolDescriptor[] {
    return WORKSPACE_TOOL_DESCRIPTORS;
  }

  async call(request: ToolRequest): Promise<unknown> {
    if (request.worktreePath === undefined)
      throw new ToolCallError(
        'failed_precondition',
        'worktree_not_bound',
        `agent '${request.callerAgentId}' is not bound to a worktree`,
      );
    try {
      const confinement = await Confinement.forWorktree(request.worktreePath, this.confinementOptions);
      const args = request.args;
      switch (request.toolName) {
        case 'read_file':
          return await this.readFile(
            confinement,
            args.path as string,
            args.encoding as 'utf8' | 'base64' | undefined,
            args.max_bytes as number | undefined,
          );
        case 'write_file':
          return await this.writeFile(confinement, args);
        case 'list_dir':
          return await this.listDir(confinement, (args.path as string | undefined) ?? '');
        case 'delete_file':
          await confinement.deleteFile(args.path as string);
          return { path: args.path, deleted: true };
        case 'stat': {
          const stat = await confinement.stat((args.path as string | undefined) ?? '');
          return {
            path: (args.path as string | undefined) ?? '',
            type: stat.type,
            size: stat.size,
            mtime: new Date(stat.mtimeMs).toISOString(),
            mode: stat.mode,
          };
        }
        case 'search':
          return await this.search(confinement, args);
        case 'git_status':
          return await this.gitStatus(confinement);
        case 'git_diff':
          return await this.gitDiff(confinement, args);
        case 'git_commit':
          return await this.gitCommit(confinement, request.callerAgentId, args);
        default:
          throw new ToolCallError(
            'not_found',
            'unknown_tool',
            `provider 'workspace' has no tool '${request.toolName}'`,
          );
      }
    } catch (error) {
      if (error instanceof ConfinementError) throw fromConfinement(error);
      if (error instanceof GitCommandError) throw fromGit(error);
      throw error;
    }
  }

  private async readFile(
    c: Confinement,
    path: string,
    encoding: 'utf8' | 'base64' | undefined,
    maxBytes: number | undefined,
  ) {
    const data = await c.readFile(path, { maxBytes: maxBytes ?? L.maxReadBytes });
    if (encoding !== 'base64') {
      try {
        return { path, encoding: 'utf8', content: UTF8.decode(data), size: data.length };
      } catch {
        /* not UTF-8: answered in base64 */
      }
    }
    return { path, encoding: 'base64', content: data.toString('base64'), size: data.length };
  }

  private async writeFile(c: Confinement, args: Record<string, unknown>) {
    const content = args.content as string;
    let data: Buffer;
    if (args.encoding === 'base64') {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(content) || content.length % 4 !== 0) {
        throw new ToolCallError(
          'invalid_argument',
          'VALIDATION_ERROR',
          'content is not valid base64 (RFC 4648, padded)',
        );
      }
      data = Buffer.from(content, 'base64');
    } else {
      data = Buffer.from(content, 'utf8');
    }
    if (data.length > L.maxWriteBytes)
      throw new ToolCallError(
        'resource_exhausted',
        'VALIDATION_ERROR',
        `content is larger than ${L.maxWriteBytes} bytes (${data.length})`,
      );
    await c.writeFile(args.path as string, data, { createParents: args.create_parents === true });
    return { path: args.path, bytes: data.length };
  }

  private async listDir(c: Confinement, path: string) {
    const entries = await c.listDir(path);
    return { path, entries: entries.slice(0, L.maxListEntries), truncated: entries.length > L.maxListEntries };
  }

  private async search(c: Confinement, args: Record<string, unknown>) {
    const caseSensitive = args.case_sensitive !== false;
    const query = caseSensitive ? (args.query as string) : (args.query as string).toLowerCase();
    const maxResults = (args.max_results as number | undefined) ?? L.defaultSearchResults;
    const matches: Array<{ path: string; line: number; column: number; text: string }> = [];
    const skipped = { binary: 0, large: 0, links: 0, unreadable: 0 };
    let files = 0;
    let bytes = 0;
    let truncated = false;
    const start = (args.path as string | undefined) ?? '';
    // The start folder must be one (its refusal is the call's answer); what is below is skipped when unreadable.
    const first = await c.listDir(start);
    const visit = async (dir: string, entries: Awaited<ReturnType<Confinement['listDir']>>): Promise<void> => {
      for (const entry of entries) {
        if (truncated) return;
        const rel = dir === '' ? entry.name : `${dir.replace(/\/+$/, '')}/${entry.name}`;
        if (entry.type === 'symlink') {
          skipped.links++;
          continue;
        }
        if (entry.type === 'directory') {
          let inner;
          try {
            inner = await c.listDir(rel);
          } catch {
            skipped.unreadable++;
            continue;
          }
          await visit(rel, inner);
          continue;
        }
        if (entry.type !== 'file') {
          skipped.unreadable++;
          continue;
        }
        if (files >= L.maxSearchFiles || bytes >= L.maxSearchBytes) {
          truncated = true;
          return;
        }
        files++;
        let data: Buffer;
        try {
          data = await c.readFile(rel, { maxBytes: L.maxSearchFileBytes });
        } catch (error) {
          if (error instanceof ConfinementError && error.reason === 'too_large') skipped.large++;
          else skipped.unreadable++;
          continue;
        }
        bytes += data.length;
        if (data.subarray(0, 8000).includes(0)) {
          skipped.binary++;
          continue;
        }
        const lines = data.toString('utf8').split('\n');
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i];
          const column = (caseSensitive ? line : line.toLowerCase()).indexOf(query);
          if (column < 0) continue;
          if (matches.length >= maxResults) {
            truncated = true;
            return;
          }
          matches.push({
            path: rel,
            line: i + 1,
            column: column + 1,
            text: line.replace(/\r$/, '').slice(0, L.maxMatchTextChars),
          });
        }
      }
    };
    await visit(start, first);
    return { matches, truncated, files_searched: files, skipped };
  }

  /** One call's ConfinedGit (git never opens a worktree file: README, "Confinement"), disposed afterwards. */
  private async withGit<T>(c: Confinement, body: (g: ConfinedGit) => Promise<T>): Promise<T> {
    const g = await ConfinedGit.open(this.git, c);
    try {
      await g.refuseMounts();
      return await body(g);
    } catch (error) {
      if (error instanceof ConfinedGitLimitError)
        throw new ToolCallError('resource_exhausted', 'too_large', error.message);
      throw error;
    } finally {
      await g.dispose();
    }
  }

  /**
   * Porcelain v2's answer, made of what the confined reader saw: X from the index against HEAD (git reads no
   * worktree file for that), Y from each tracked path's content read through the confinement and hashed here
   * against its index entry, untracked files from a confined walk and the ignore rules of the `.gitignore` files
   * read the same way. A tracked file that is a hard link (or a FIFO, a socket, a device) refuses the call.
   */
  private async gitStatus(c: Confinement) {
    return this.withGit(c, async (g) => {
      const branch =
        (await g.run(['symbolic-ref', '-q', '--short', 'HEAD'], { okExitCodes: [1] })).stdout.trim() || '(detached)';
      const head = (await g.run(['rev-parse', '-q', '--verify', 'HEAD'], { okExitCodes: [1] })).stdout.trim();
      const index = await g.indexEntries();
      const staged = new Map<string, { x: string; orig?: string }>();
      if (head) {
        const fields = (await g.run(['diff-index', '--cached', '-z', '--name-status', '-M', 'HEAD'])).stdout.split(
          '\0',
        );
        for (let i = 0; i + 1 < fields.length;) {
          const code = fields[i];
          if (code === '') break;
          if (code.startsWith('R') || code.startsWith('C')) {
            staged.set(fields[i + 2], { x: code[0], orig: fields[i + 1] });
            i += 3;
          } else {
            if (code !== 'U') staged.set(fields[i + 1], { x: code[0] });
            i += 2;
          }
        }
      } else {
        for (const e of index) if (e.stage === 0) staged.set(e.path, { x: 'A' });
      }
      const stages = new Map<string, Set<number>>();
      const tracked = new Set<string>();
      const entries: Array<{
        path: string;
        xy: string;
        kind: 'changed' | 'renamed' | 'unmerged' | 'untracked';
        orig_path?: string;
      }> = [];
      const worktreeSide = new Map<string, string>();
      for (const e of index) {
        tracked.add(e.path);
        if (e.stage !== 0) {
          (stages.get(e.path) ?? stages.set(e.path, new Set()).get(e.path)!).add(e.stage);
          continue;
        }
        if (e.mode === GITLINK) continue;
        const blob = await g.worktreeBlob(e.path, { write: false });
        const y = !blob
          ? 'D'
          : (blob.mode === SYMLINK) !== (e.mode === SYMLINK)
            ? 'T'
            : blob.mode !== e.mode || blob.oid !== e.oid
              ? 'M'
              : '.';
        if (y !== '.') worktreeSide.set(e.path, y);
      }
      for (const p of new Set([...staged.keys(), ...worktreeSide.keys()])) {
        if (stages.has(p)) continue;
        const x = staged.get(p);
        const xy = `${x?.x ?? '.'}${worktreeSide.get(p) ?? '.'}`;
        if (x?.orig !== undefined) entries.push({ path: p, xy, kind: 'renamed', orig_path: x.orig });
        else entries.push({ path: p, xy, kind: 'changed' });
      }
      for (const [p, set] of stages) entries.push({ path: p, xy: unmergedXy(set), kind: 'unmerged' });
      const sorted = await sortInTurns(entries, (a, b) => byteOrder(a.path, b.path));
      for (const p of await g.untracked(['.'], tracked)) sorted.push({ path: p, xy: '??', kind: 'untracked' });
      return {
        branch,
        head: head || '(initial)',
        clean: sorted.length === 0,
        entries: sorted.slice(0, L.maxStatusEntries),
        truncated: sorted.length > L.maxStatusEntries,
      };
    });
  }

  /** The paths as the worktree-relative names git is given, each checked by the confinement first. */
  private async checkedPaths(c: Confinement, paths: readonly string[] | undefined): Promise<string[]> {
    const checked: string[] = [];
    for (const p of paths ?? []) {
      const canonical = await c.resolve(p);
      const relative =
        canonical === c.root
          ? '.'
          : canonical
              .slice(c.root.length + 1)
              .split(path.sep)
              .join('/');
      checked.push(relative);
    }
    return checked;
  }

  /**
   * Staged: the index against HEAD (no worktree file is read). Otherwise HEAD against the worktree as the confined
   * reader saw it: a temporary index of the tracked paths (of `paths`) set to the blobs of their confined content
   * (missing ones left out), diffed against HEAD with `diff --cached`, so git's own format and rename detection.
   */
  private async gitDiff(c: Confinement, args: Record<string, unknown>) {
    const paths = await this.checkedPaths(c, args.paths as string[] | undefined);
    const maxBytes = (args.max_bytes as number | undefined) ?? L.defaultDiffBytes;
    // git's output is kept up to the answer's size and a few bytes more (to cut at a line), never gathered whole: the
    // diff of a changed 64 MiB file is 128 MiB, ≈ 0.3 s of one turn to join, decode and measure.
    const keep = { maxStdoutBytes: maxBytes + 4 };
    const result = await this.withGit(c, async (g) => {
      const diff = [
        'diff',
        '--no-ext-diff',
        '--no-textconv',
        '--no-color',
        '--cached',
        'HEAD',
        '--',
        ...literal(paths),
      ];
      if (args.staged === true) return g.run(diff, keep);
      const index = await g.indexEntries();
      const known = new Set<string>();
      await forEachInTurns(index, (e) => known.add(e.oid));
      let lines = '';
      const done = new Set<string>();
      const within = specMatcher(paths);
      const turns = new Turns();
      for (const e of index) {
        await turns.step();
        if (done.has(e.path) || !within(e.path)) continue;
        done.add(e.path);
        if (e.mode === GITLINK) {
          lines += g.entryLine(e.path, { mode: e.mode, oid: e.oid });
          continue;
        }
        const blob = await g.worktreeBlob(e.path, { write: true, known });
        if (blob) lines += g.entryLine(e.path, blob);
      }
      await g.writeBlobs();
      if (lines !== '') await g.run(['update-index', '-z', '--index-info'], { index: g.tempIndex, input: lines });
      else await g.run(['read-tree', '--empty'], { index: g.tempIndex });
      return g.run(diff, { index: g.tempIndex, ...keep });
    });
    const { text, truncated } = cutAtLine(result.stdout, maxBytes, result.stdoutTruncated === true);
    return { diff: text, bytes: Buffer.byteLength(text, 'utf8'), truncated };
  }

  /**
   * `git add -A -- <paths>` then a commit, without git reading the worktree: every path of `paths` (all: ".") that
   * HEAD or the index tracks, or that is new and not ignored, is set to the blob of its confined content (or removed
   * when missing) in a temporary index made from HEAD, whose tree is committed with commit-tree (no hook) and
   * update-ref (only if nobody moved the branch); the worktree's own index then takes the same entries.
   */
  private async gitCommit(c: Confinement, agentId: string, args: Record<string, unknown>) {
    const message = args.message as string;
    if (message.includes('\0'))
      throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', 'message must not contain NUL');
    const paths = await this.checkedPaths(c, args.paths as string[] | undefined);
    return this.withGit(c, async (g) => {
      const head = (await g.run(['symbolic-ref', '-q', 'HEAD'], { okExitCodes: [1] })).stdout.trim();
      if (!head.startsWith('refs/heads/sw4rm/')) {
        throw new ToolCallError(
          'failed_precondition',
          'not_on_agent_branch',
          `the worktree is not on an agent branch sw4rm/… (HEAD: ${head || 'detached'}): nothing is committed`,
        );
      }
      const oldHead = (await g.run(['rev-parse', '--verify', '-q', 'HEAD'])).stdout.trim();
      const specs = paths.length > 0 ? paths : ['.'];
      const index = await g.indexEntries();
      const headTreeEntries = await g.treeEntries(oldHead);
      const indexPaths = new Set<string>();
      const gitlinks = new Map<string, string>();
      const known = new Set<string>();
      const candidates = new Set<string>();
      const within = specMatcher(specs);
      await forEachInTurns(index, (e) => {
        indexPaths.add(e.path);
        if (e.mode === GITLINK) gitlinks.set(e.path, e.oid);
        known.add(e.oid);
        if (within(e.path)) candidates.add(e.path);
      });
      await forEachInTurns(headTreeEntries, (e) => {
        known.add(e.oid);
        if (within(e.path)) candidates.add(e.path);
      });
      for (const p of await g.untracked(specs, indexPaths)) candidates.add(p);
      let lines = '';
      for (const p of await sortInTurns([...candidates], byteOrder)) {
        const gitlink = gitlinks.get(p);
        const blob =
          gitlink !== undefined ? { mode: GITLINK, oid: gitlink } : await g.worktreeBlob(p, { write: true, known });
        // Removed first, so that an unmerged path's stages go too; then its stage 0 (when it exists).
        lines += g.entryLine(p, undefined);
        if (blob) lines += g.entryLine(p, blob);
      }
      await g.writeBlobs();
      await g.run(['read-tree', oldHead], { index: g.tempIndex });
      if (lines !== '') await g.run(['update-index', '-z', '--index-info'], { index: g.tempIndex, input: lines });
      const tree = (await g.run(['write-tree'], { index: g.tempIndex })).stdout.trim();
      const headTree = (await g.run(['rev-parse', `${oldHead}^{tree}`])).stdout.trim();
      if (tree === headTree)
        throw new ToolCallError('failed_precondition', 'nothing_to_commit', 'no changes to commit');
      const who = gitIdentity(agentId);
      // commit-tree and update-ref run no hook and no editor; the branch moves only if nobody moved it meanwhile.
      const commit = (
        await g.run(['commit-tree', '--no-gpg-sign', tree, '-p', oldHead, '-m', message], {
          env: {
            GIT_AUTHOR_NAME: who.name,
            GIT_AUTHOR_EMAIL: who.email,
            GIT_COMMITTER_NAME: who.name,
            GIT_COMMITTER_EMAIL: who.email,
          },
        })
      ).stdout.trim();
      await g.run(['update-ref', '-m', `sw4rm: git_commit by agent ${agentId.slice(0, 200)}`, head, commit, oldHead]);
      // The worktree's own index takes the committed paths, so that its status is clean for them afterwards.
      if (lines !== '') await g.run(['update-index', '-z', '--index-info'], { input: lines });
      return { commit, branch: head.slice('refs/heads/'.length) };
    });
  }
}

/** Porcelain's XY of an unmerged path from the stages the index has (1 base, 2 ours, 3 theirs). */
function unmergedXy(stages: ReadonlySet<number>): string {
  const key = [1, 2, 3].map((n) => (stages.has(n) ? n : '')).join('');
  return (
    ({ '123': 'UU', '23': 'AA', '12': 'UD', '13': 'DU', '2': 'AU', '3': 'UA', '1': 'DD' } as Record<string, string>)[
      key
    ] ?? 'UU'
  );
}
