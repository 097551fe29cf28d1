import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FIELD_LIMITS } from '../fieldLimits';
import { BUILTIN_PROFILES, builtinFor } from './builtinProfiles';
import type { AgentCli, ApprovalWiring, BridgeWiring, LaunchMode, LaunchProfile, ProfileIssue } from './model';

/**
 * Launch profiles from the `sw4rm.agents.profiles` setting (an array of profile objects) and from each repository's
 * `.sw4rm/agents.json` (`{"profiles": [...]}`), checked against PROFILE_JSON_SCHEMA (ajv) and the rules below. A
 * refused profile is a ProfileIssue with the JSON pointer of the offending value, never dropped silently; the others
 * are used. Later sources replace earlier ones by id: built in, then the setting, then each repository's file.
 *
 * Defaults of a profile's omitted fields: name = id; cli = `custom`; the wiring (bridge, approvals, instructions,
 * capabilities) of the built-in profile of its cli (so `{"id": "claude-opus", "cli": "claude-code", "command":
 * ["claude", "--model", "opus"]}` is wired as Claude Code); needsWorktree true; env {}. With needsWorktree false the
 * launch writes nothing into the main checkout, so omitted wiring is `none`, and wiring that needs a file is refused.
 */

export const AGENT_CLIS: readonly AgentCli[] = ['claude-code', 'codex', 'gemini', 'aider', 'copilot', 'custom'];
export const PROFILE_ID_PATTERN = '^[a-z0-9][a-z0-9-]{0,62}$';
/** The file a repository lists its profiles in, relative to its main checkout. */
export const REPOSITORY_PROFILES_FILE = '.sw4rm/agents.json';
/** A larger agents.json is refused (it is read at every launch). */
export const MAX_PROFILES_FILE_BYTES = 256 * 1024;
/** Profiles per source; more are refused. */
export const MAX_PROFILES_PER_SOURCE = 100;
/** Environment variables the coordinator sets itself: a profile may not set them. */
const COORDINATOR_VARIABLES = /^(SW4RM_.*|ELECTRON_RUN_AS_NODE)$/i;
/** Placeholders a launch fills (wiring.ts); `{instructionsPath}` needs an instructions file. */
export const PLACEHOLDERS = [
  'agentId',
  'mcpUrl',
  'hookUrl',
  'grpcAddress',
  'instructionsPath',
  'worktree',
  'stdioCommand',
  'stdioProgram',
  'stdioArgs',
  'hookCommand',
] as const;

const relativePath = { type: 'string', minLength: 1, maxLength: 256 } as const;
const stringList = (max: number, itemMax: number) =>
  ({ type: 'array', maxItems: max, items: { type: 'string', maxLength: itemMax } }) as const;

/**
 * The JSON Schema of one profile as a person writes it (the setting's items, agents.json's `profiles` items). The
 * editor's package.json may use it for the setting; `source` is not written: the reader sets it.
 */
export const PROFILE_JSON_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'command'],
  properties: {
    id: {
      type: 'string',
      pattern: PROFILE_ID_PATTERN,
      description: 'Unique id: lower-case letters, digits and -; launched agents are <id>-<n>.',
    },
    name: { type: 'string', minLength: 1, maxLength: 100 },
    cli: { type: 'string', enum: AGENT_CLIS },
    mode: {
      type: 'string',
      enum: ['terminal', 'session'],
      description:
        "terminal (default): in the editor's terminal; session: an Agent Client Protocol session over stdio the coordinator drives.",
    },
    command: {
      ...stringList(64, 4096),
      minItems: 1,
      description: 'The program (looked up on PATH, or an absolute path) and its arguments; never run through a shell.',
    },
    env: {
      type: 'object',
      maxProperties: 64,
      propertyNames: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' },
      additionalProperties: { type: 'string', maxLength: 8192 },
    },
    bridge: {
      type: 'object',
      required: ['kind'],
      properties: { kind: { type: 'string', enum: ['mcp-config-file', 'args', 'none'] } },
      allOf: [
        {
          if: { type: 'object', properties: { kind: { const: 'mcp-config-file' } } },
          then: {
            type: 'object',
            additionalProperties: false,
            required: ['kind', 'path', 'format', 'transport'],
            properties: {
              kind: { type: 'string' },
              path: relativePath,
              format: {
                type: 'string',
                enum: ['claude-mcp-json', 'gemini-settings', 'cursor-mcp-json', 'vscode-mcp-json'],
              },
              transport: { type: 'string', enum: ['http', 'stdio'] },
            },
          },
        },
        {
          if: { type: 'object', properties: { kind: { const: 'args' } } },
          then: {
            type: 'object',
            additionalProperties: false,
            required: ['kind', 'args'],
            properties: { kind: { type: 'string' }, args: stringList(64, 4096) },
          },
        },
        {
          if: { type: 'object', properties: { kind: { const: 'none' } } },
          then: { type: 'object', additionalProperties: false, properties: { kind: { type: 'string' } } },
        },
      ],
    },
    approvals: {
      type: 'object',
      required: ['kind'],
      properties: { kind: { type: 'string', enum: ['claude-code-hooks', 'gemini-hooks', 'copilot-hooks', 'none'] } },
      allOf: [
        {
          if: { type: 'object', properties: { kind: { const: 'claude-code-hooks' } } },
          then: {
            type: 'object',
            additionalProperties: false,
            required: ['kind'],
            properties: { kind: { type: 'string' }, via: { type: 'string', enum: ['http', 'command'] } },
          },
        },
        {
          if: { type: 'object', properties: { kind: { enum: ['gemini-hooks', 'copilot-hooks'] } } },
          then: { type: 'object', additionalProperties: false, properties: { kind: { type: 'string' } } },
        },
        {
          if: { type: 'object', properties: { kind: { const: 'none' } } },
          then: {
            type: 'object',
            additionalProperties: false,
            properties: { kind: { type: 'string' }, note: { type: 'string', maxLength: 500 } },
          },
        },
      ],
    },
    needsWorktree: { type: 'boolean' },
    instructions: {
      type: 'object',
      additionalProperties: false,
      properties: { file: relativePath, firstPromptArgs: stringList(32, 4096) },
    },
    capabilities: {
      ...stringList(FIELD_LIMITS.registry.list_entries, FIELD_LIMITS.registry.list_entry),
      uniqueItems: true,
    },
    description: { type: 'string', maxLength: 500 },
  },
} as const;

let validator: ValidateFunction | undefined;
function validate(value: unknown): ErrorObject[] {
  validator ??= new Ajv({ allErrors: true, strict: true, allowUnionTypes: false }).compile(PROFILE_JSON_SCHEMA);
  return validator(value) ? [] : [...(validator.errors ?? [])];
}

/** One ajv error as a person reads it. */
function ajvMessage(error: ErrorObject): { pointer: string; message: string } {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties':
      return {
        pointer: `${error.instancePath}/${String(params.additionalProperty)}`,
        message: `'${String(params.additionalProperty)}' is not a profile field here`,
      };
    case 'required':
      return {
        pointer: `${error.instancePath}/${String(params.missingProperty)}`,
        message: `'${String(params.missingProperty)}' is required`,
      };
    case 'enum':
      return {
        pointer: error.instancePath,
        message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'pattern':
      return { pointer: error.instancePath, message: `must match ${String(params.pattern)}` };
    case 'propertyNames':
      return {
        pointer: `${error.instancePath}/${String(params.propertyName)}`,
        message: 'is not an environment variable name (letters, digits and _, not starting with a digit)',
      };
    default:
      return { pointer: error.instancePath, message: error.message ?? error.keyword };
  }
}

/** Why `p` cannot be a file the launch writes into a worktree, or undefined. */
export function relativePathRefusal(p: string): string | undefined {
  if (p.includes('\0') || p.includes('\\')) return 'must be a relative path with / separators';
  if (path.posix.isAbsolute(p) || /^[A-Za-z]:/.test(p)) return 'must be relative to the worktree, not absolute';
  const segments = p.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) return 'must not contain empty, . or .. segments';
  if (segments.some((s) => s.toLowerCase() === '.git')) return 'must not be inside .git';
  return undefined;
}

function placeholdersIn(text: string): string[] {
  return [...text.matchAll(/\{([A-Za-z]+)\}/g)]
    .map((m) => m[1])
    .filter((name) => (PLACEHOLDERS as readonly string[]).includes(name));
}

type ProfileInput = {
  id: string;
  name?: string;
  cli?: AgentCli;
  mode?: LaunchMode;
  command: string[];
  env?: Record<string, string>;
  bridge?: BridgeWiring;
  approvals?: ApprovalWiring;
  needsWorktree?: boolean;
  instructions?: { file?: string; firstPromptArgs?: string[] };
  capabilities?: string[];
  description?: string;
};

/**
 * One profile object checked and completed, or its issues (pointers under `at`, e.g. `/3`). `sourceName` is what
 * the issues name (`settings`, or the file's path).
 */
export function parseProfile(
  value: unknown,
  at: string,
  source: LaunchProfile['source'],
  sourceName: string,
): { profile?: LaunchProfile; issues: ProfileIssue[] } {
  const issues: ProfileIssue[] = [];
  const issue = (pointer: string, message: string) =>
    issues.push({ source: sourceName, path: `${at}${pointer}`, message });
  const errors = validate(value);
  if (errors.length > 0) {
    const seen = new Set<string>();
    for (const error of errors) {
      // if/then failures repeat what the `then` branch already said.
      if (error.keyword === 'if') continue;
      const { pointer, message } = ajvMessage(error);
      const key = `${pointer}\0${message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      issue(pointer, message);
    }
    return { issues };
  }
  const input = value as ProfileInput;
  const cli: AgentCli = input.cli ?? 'custom';
  const mode: LaunchMode = input.mode ?? 'terminal';
  const base =
    (mode === 'session' ? builtinFor(cli, 'session') : undefined) ?? builtinFor(cli) ?? builtinFor('custom')!;
  const needsWorktree = input.needsWorktree ?? true;
  if (input.command[0].trim() === '') issue('/command/0', 'the program must not be empty');
  for (const name of Object.keys(input.env ?? {})) {
    if (COORDINATOR_VARIABLES.test(name))
      issue(`/env/${name}`, `${name} is set by the coordinator for every launched agent; a profile may not set it`);
  }
  const bridge: BridgeWiring = input.bridge ?? (needsWorktree && mode === base.mode ? base.bridge : { kind: 'none' });
  const approvals: ApprovalWiring =
    input.approvals ?? (needsWorktree && mode === base.mode ? base.approvals : { kind: 'none' });
  const instructions = input.instructions ?? (needsWorktree ? base.instructions : {});
  if (mode === 'session') {
    // The session's MCP server and permission requests are its bridge and approvals: nothing else is wired.
    const why =
      "a session profile reaches the bridge as its ACP session's MCP server and asks through ACP permission requests";
    if (bridge.kind !== 'none') issue('/bridge', `${why}: leave "bridge" out`);
    if (approvals.kind !== 'none') issue('/approvals', `${why}: leave "approvals" out`);
    if (input.instructions?.firstPromptArgs !== undefined)
      issue(
        '/instructions/firstPromptArgs',
        `${why}; its first prompt is the coordinator's: leave firstPromptArgs out`,
      );
  }
  if (approvals.kind === 'claude-code-hooks' && approvals.via === 'http') {
    // Claude Code lets the tool run when an HTTP hook fails (non-2xx, no connection, timeout): a stopped coordinator
    // or a revoked credential would approve everything. The command hook answers "ask" in all those cases.
    issue(
      '/approvals/via',
      'Claude Code runs the tool when an HTTP hook fails (a stopped coordinator, a revoked credential), so approvals use the command hook: leave "via" out or set it to "command"',
    );
  }
  if (bridge.kind === 'mcp-config-file') {
    const refusal = relativePathRefusal(bridge.path);
    if (refusal) issue('/bridge/path', refusal);
  }
  if (instructions.file !== undefined) {
    const refusal = relativePathRefusal(instructions.file);
    if (refusal) issue('/instructions/file', refusal);
  }
  if (!needsWorktree) {
    // The main checkout is the person's: nothing is written into it, so only environment and arguments can wire.
    const why =
      'needsWorktree is false: the launch writes nothing into the main checkout, so only environment variables and arguments can wire it';
    if (bridge.kind === 'mcp-config-file') issue('/bridge', `${why}; use a bridge of kind "args" or "none"`);
    if (approvals.kind !== 'none')
      issue('/approvals', `${why}; approval hooks need a file in a worktree, so approvals must be "none"`);
    if (instructions.file !== undefined)
      issue('/instructions/file', `${why}; leave the instructions file out (firstPromptArgs still work)`);
  }
  const promptArgs = instructions.firstPromptArgs ?? [];
  promptArgs.forEach((arg, i) => {
    if (instructions.file === undefined && placeholdersIn(arg).includes('instructionsPath')) {
      issue(`/instructions/firstPromptArgs/${i}`, '{instructionsPath} needs an instructions file (instructions.file)');
    }
  });
  if (issues.length > 0) return { issues };
  const name = input.name ?? input.id;
  return {
    issues,
    profile: {
      id: input.id,
      name,
      cli,
      mode,
      command: [...input.command],
      env: { ...(input.env ?? {}) },
      bridge,
      approvals,
      needsWorktree,
      instructions,
      capabilities: [...(input.capabilities ?? base.capabilities)],
      source,
      description:
        input.description ??
        `${name}: \`${input.command.join(' ')}\` (${typeof source === 'string' ? `from the ${source}` : `from ${source.file}`})`,
    },
  };
}

/** Every profile of one source's list (`at` is the list's pointer: '' for the setting, `/profiles` for a file). */
function parseList(
  list: readonly unknown[],
  at: string,
  source: LaunchProfile['source'],
  sourceName: string,
): { profiles: LaunchProfile[]; issues: ProfileIssue[] } {
  const profiles: LaunchProfile[] = [];
  const issues: ProfileIssue[] = [];
  const ids = new Set<string>();
  list.forEach((value, i) => {
    if (i >= MAX_PROFILES_PER_SOURCE) {
      if (i === MAX_PROFILES_PER_SOURCE)
        issues.push({
          source: sourceName,
          path: `${at}/${i}`,
          message: `at most ${MAX_PROFILES_PER_SOURCE} profiles are read from one source; this one and those after it are refused`,
        });
      return;
    }
    const parsed = parseProfile(value, `${at}/${i}`, source, sourceName);
    issues.push(...parsed.issues);
    if (!parsed.profile) return;
    if (ids.has(parsed.profile.id)) {
      issues.push({
        source: sourceName,
        path: `${at}/${i}/id`,
        message: `profile '${parsed.profile.id}' is listed twice in this source; the first one is used`,
      });
      return;
    }
    ids.add(parsed.profile.id);
    profiles.push(parsed.profile);
  });
  return { profiles, issues };
}

/** The `sw4rm.agents.profiles` setting's value (any JSON the editor read): an array of profiles; undefined / null is none. */
export function parseSettingsProfiles(value: unknown): { profiles: LaunchProfile[]; issues: ProfileIssue[] } {
  if (value === undefined || value === null) return { profiles: [], issues: [] };
  if (!Array.isArray(value))
    return {
      profiles: [],
      issues: [{ source: 'settings', path: '', message: 'sw4rm.agents.profiles must be an array of profile objects' }],
    };
  return parseList(value, '', 'settings', 'settings');
}

/** `.sw4rm/agents.json` as text: `{"profiles": [...]}`. `file` is its path (the issues' source and the profiles'). */
export function parseProfilesFile(text: string, file: string): { profiles: LaunchProfile[]; issues: ProfileIssue[] } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { profiles: [], issues: [{ source: file, path: '', message: `not valid JSON: ${(err as Error).message}` }] };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return { profiles: [], issues: [{ source: file, path: '', message: 'must be a JSON object {"profiles": [...]}' }] };
  }
  const issues: ProfileIssue[] = [];
  for (const key of Object.keys(json)) {
    if (key !== 'profiles')
      issues.push({
        source: file,
        path: `/${key}`,
        message: `'${key}' is not a field of agents.json (only "profiles")`,
      });
  }
  const list = (json as { profiles?: unknown }).profiles;
  if (list === undefined) return { profiles: [], issues };
  if (!Array.isArray(list))
    return {
      profiles: [],
      issues: [...issues, { source: file, path: '/profiles', message: 'must be an array of profile objects' }],
    };
  const parsed = parseList(list, '/profiles', { file }, file);
  return { profiles: parsed.profiles, issues: [...issues, ...parsed.issues] };
}

/** A repository's `.sw4rm/agents.json` in its main checkout, when there is one (a missing file is no issue). */
export function readRepositoryProfiles(repositoryPath: string): { profiles: LaunchProfile[]; issues: ProfileIssue[] } {
  const file = path.join(repositoryPath, ...REPOSITORY_PROFILES_FILE.split('/'));
  let text: string;
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) return { profiles: [], issues: [{ source: file, path: '', message: 'is not a regular file' }] };
    if (stat.size > MAX_PROFILES_FILE_BYTES)
      return {
        profiles: [],
        issues: [{ source: file, path: '', message: `is larger than ${MAX_PROFILES_FILE_BYTES} bytes` }],
      };
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: [], issues: [] };
    return { profiles: [], issues: [{ source: file, path: '', message: `cannot be read: ${(err as Error).message}` }] };
  }
  return parseProfilesFile(text, file);
}

/**
 * The profiles of several sources in order (built in first): a later profile replaces an earlier one of the same id
 * in the earlier one's place; new ids are appended.
 */
export function mergeProfiles(...lists: ReadonlyArray<readonly LaunchProfile[]>): LaunchProfile[] {
  const byId = new Map<string, LaunchProfile>();
  for (const list of lists) for (const profile of list) byId.set(profile.id, profile);
  return [...byId.values()];
}

export { BUILTIN_PROFILES };
