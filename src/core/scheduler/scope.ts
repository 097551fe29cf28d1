import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';

const LIMITS = FIELD_LIMITS.scheduler;

/**
 * What a task says it will touch (RFC §9.2: every submission carries scope metadata). At least one of the four is
 * given. Parsed from SubmitTaskRequest.scope by `parseScope` (scheduler/scope.ts), which accepts a JSON object
 * `{"repo_id", "worktree_id", "paths": [...], "resources": [...]}` or compact tokens separated by whitespace or commas:
 * `repo:<repo_id>[/<path glob>]`, `worktree:<worktree_id>`, `path:<glob>`, `resource:<name>`.
 */
export interface TaskScope {
  readonly repoId: string;
  readonly worktreeId: string;
  /** Path globs relative to the repository (picomatch syntax), normalised to forward slashes. */
  readonly paths: readonly string[];
  /** Declared resources by name (a database, a port, a service), compared exactly. */
  readonly resources: readonly string[];
}

/** A scope as it travels in a `run` command (snake_case, as agents read it). */
export interface ScopeWire {
  readonly repo_id: string;
  readonly worktree_id: string;
  readonly paths: readonly string[];
  readonly resources: readonly string[];
}

/** A scope could not be read: why, for a VALIDATION_ERROR the submitter reads. */
export type ScopeRefusal = string;

const TOKEN = /^(repo|worktree|path|resource):(.*)$/s;

/**
 * Reads SubmitTaskRequest.scope (RFC §9.2): a JSON object `{"repo_id", "worktree_id", "paths": [...], "resources": [...]}`
 * or compact tokens separated by whitespace or commas: `repo:<repo_id>[/<path glob>]`, `worktree:<id>`, `path:<glob>`,
 * `resource:<name>` (the reference SDK's example sends "repo:myrepo/path"). At least one of the four must be given.
 */
export function parseScope(text: string): TaskScope | ScopeRefusal {
  if (typeof text !== 'string' || text.trim() === '') {
    return 'scope is required (RFC §9.2): give repo:<repo_id>[/<path glob>], worktree:<id>, path:<glob> or resource:<name>, or a JSON object {"repo_id","worktree_id","paths","resources"}';
  }
  if (text.length > LIMITS.scope_text) return `scope is longer than ${LIMITS.scope_text} characters (${text.length})`;
  const trimmed = text.trim();
  return trimmed.startsWith('{') ? fromJson(trimmed) : fromTokens(trimmed);
}

export function isScopeRefusal(value: TaskScope | ScopeRefusal): value is ScopeRefusal {
  return typeof value === 'string';
}

function fromJson(text: string): TaskScope | ScopeRefusal {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return `scope is not valid JSON: ${(err as Error).message.slice(0, 200)}`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'scope JSON must be an object {"repo_id","worktree_id","paths","resources"}';
  const o = value as Record<string, unknown>;
  const known = new Set(['repo_id', 'worktree_id', 'paths', 'resources']);
  const unknown = Object.keys(o).filter((k) => !known.has(k));
  if (unknown.length)
    return `scope JSON has unknown field(s) ${unknown
      .slice(0, 5)
      .map((k) => JSON.stringify(k.slice(0, 40)))
      .join(', ')}; use repo_id, worktree_id, paths, resources`;
  for (const key of ['repo_id', 'worktree_id'] as const) {
    if (o[key] !== undefined && typeof o[key] !== 'string') return `scope ${key} must be a string`;
  }
  for (const key of ['paths', 'resources'] as const) {
    if (o[key] !== undefined && (!Array.isArray(o[key]) || !(o[key] as unknown[]).every((e) => typeof e === 'string')))
      return `scope ${key} must be a list of strings`;
  }
  return build(
    (o.repo_id as string | undefined) ?? '',
    (o.worktree_id as string | undefined) ?? '',
    (o.paths as string[] | undefined) ?? [],
    (o.resources as string[] | undefined) ?? [],
  );
}

function fromTokens(text: string): TaskScope | ScopeRefusal {
  let repoId = '';
  let worktreeId = '';
  const paths: string[] = [];
  const resources: string[] = [];
  // Tokens are separated by commas and spaces: a glob with a comma or a space in it only fits the JSON form.
  const brace = /\{[^{}]*[\s,][^{}]*\}/.exec(text);
  if (brace) {
    return `scope tokens are separated by commas and spaces, so ${JSON.stringify(brace[0].slice(0, 80))} cannot be written in them; use the JSON form, e.g. {"repo_id": "…", "paths": ["src/{a,b}/**"]}`;
  }
  for (const token of text.split(/[\s,]+/).filter((t) => t !== '')) {
    const m = TOKEN.exec(token);
    if (!m)
      return `scope token ${JSON.stringify(token.slice(0, 80))} is not repo:<repo_id>[/<path glob>], worktree:<id>, path:<glob> or resource:<name>`;
    const [, kind, rest] = m;
    if (rest === '') return `scope token ${kind}: has no value`;
    if (kind === 'repo') {
      const slash = rest.indexOf('/');
      const id = slash < 0 ? rest : rest.slice(0, slash);
      if (id === '') return `scope token ${JSON.stringify(token.slice(0, 80))} has no repo_id before the path`;
      if (repoId !== '' && repoId !== id)
        return `scope names two repositories (${repoId.slice(0, 80)}, ${id.slice(0, 80)}); a task's scope is within one`;
      repoId = id;
      if (slash >= 0 && slash < rest.length - 1) paths.push(rest.slice(slash + 1));
    } else if (kind === 'worktree') {
      if (worktreeId !== '' && worktreeId !== rest)
        return `scope names two worktrees (${worktreeId.slice(0, 80)}, ${rest.slice(0, 80)})`;
      worktreeId = rest;
    } else if (kind === 'path') {
      paths.push(rest);
    } else {
      resources.push(rest);
    }
  }
  return build(repoId, worktreeId, paths, resources);
}

function normalisePath(glob: string): string {
  let p = glob.replace(/\\/g, '/');
  while (p.startsWith('./')) p = p.slice(2);
  return p.replace(/\/{2,}/g, '/');
}

function build(
  repoId: string,
  worktreeId: string,
  rawPaths: readonly string[],
  rawResources: readonly string[],
): TaskScope | ScopeRefusal {
  const refusal =
    (repoId && identifierRefusal('scope repo_id', repoId, LIMITS.scope_repo_id)) ||
    (worktreeId && identifierRefusal('scope worktree_id', worktreeId, LIMITS.scope_worktree_id));
  if (refusal) return refusal;
  for (const [name, list] of [
    ['paths', rawPaths],
    ['resources', rawResources],
  ] as const) {
    if (list.length > LIMITS.scope_entries) return `scope has ${list.length} ${name}; at most ${LIMITS.scope_entries}`;
    for (const entry of list) {
      if (entry === '') return `scope ${name} has an empty entry`;
      const bad = identifierRefusal(`a scope ${name} entry`, entry, LIMITS.scope_entry);
      if (bad) return bad;
    }
  }
  const paths = [...new Set(rawPaths.map(normalisePath))];
  for (const p of paths) {
    if (p.startsWith('/') || /^[A-Za-z]:/.test(p) || p.split('/').includes('..')) {
      return `scope path ${JSON.stringify(p.slice(0, 80))} must be relative to the repository, without ..`;
    }
  }
  const resources = [...new Set(rawResources)];
  if (!repoId && !worktreeId && paths.length === 0 && resources.length === 0) {
    return 'scope is empty: give at least a repo_id, a worktree_id, a path glob or a resource (RFC §9.2)';
  }
  return { repoId, worktreeId, paths, resources };
}

/** The compact text form, as the Tasks view shows it and parseScope reads it back. */
export function formatScope(scope: TaskScope): string {
  const parts: string[] = [];
  if (scope.repoId) parts.push(`repo:${scope.repoId}`);
  if (scope.worktreeId) parts.push(`worktree:${scope.worktreeId}`);
  for (const p of scope.paths) parts.push(`path:${p}`);
  for (const r of scope.resources) parts.push(`resource:${r}`);
  return parts.join(' ');
}

/** The scope as a `run` command carries it (snake_case). */
export function toWire(scope: TaskScope): ScopeWire {
  return {
    repo_id: scope.repoId,
    worktree_id: scope.worktreeId,
    paths: [...scope.paths],
    resources: [...scope.resources],
  };
}
