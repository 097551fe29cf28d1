import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AgentCli, LaunchProfile, ProfileAvailability } from './model';

/** Where programs are looked for: the environment (PATH, PATHEXT), the platform and the file system (tests inject them). */
export interface ProgramLookup {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly platform: NodeJS.Platform;
  /** Whether `file` is a file this process may execute. */
  readonly isExecutable: (file: string) => boolean;
}

export function systemLookup(): ProgramLookup {
  return {
    env: process.env,
    platform: process.platform,
    isExecutable: (file) => {
      try {
        if (!fs.statSync(file).isFile()) return false;
        if (process.platform === 'win32') return true;
        fs.accessSync(file, fs.constants.X_OK);
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** How to install each CLI (README, "Launch profiles"). */
export const INSTALL_HINTS: Readonly<Record<AgentCli, string>> = {
  'claude-code':
    'Install Claude Code: npm install -g @anthropic-ai/claude-code (https://docs.claude.com/en/docs/claude-code/setup)',
  codex: 'Install Codex CLI: npm install -g @openai/codex (https://github.com/openai/codex)',
  gemini: 'Install Gemini CLI: npm install -g @google/gemini-cli (https://github.com/google-gemini/gemini-cli)',
  aider: 'Install Aider: python -m pip install aider-install && aider-install (https://aider.chat/docs/install.html)',
  copilot: 'Install GitHub Copilot CLI: npm install -g @github/copilot (https://github.com/github/copilot-cli)',
  custom: "Check the profile's command: the program must be on PATH or given as an absolute path",
};

/** How to install each CLI's ACP adapter, for a session profile (README, "Run a workflow of coding agents"). */
export const SESSION_INSTALL_HINTS: Readonly<Record<AgentCli, string>> = {
  'claude-code':
    'Install the ACP adapter of Claude Code: npm install -g @zed-industries/claude-agent-acp (https://github.com/zed-industries/claude-agent-acp)',
  codex:
    'Install the ACP adapter of Codex: npm install -g @zed-industries/codex-acp (https://github.com/zed-industries/codex-acp)',
  gemini: `${INSTALL_HINTS.gemini}; its ACP mode is \`gemini --experimental-acp\``,
  aider: 'Aider does not speak the Agent Client Protocol: launch it in a terminal (the aider profile)',
  copilot: `${INSTALL_HINTS.copilot}; its ACP mode is \`copilot --acp\``,
  custom:
    "Check the profile's command: the program must be on PATH or given as an absolute path, and speak ACP on stdio",
};

function envValue(env: ProgramLookup['env'], name: string, platform: NodeJS.Platform): string | undefined {
  if (platform !== 'win32') return env[name];
  // Windows environment names are case-insensitive (Path, PATH).
  const key = Object.keys(env).find((k) => k.toUpperCase() === name);
  return key === undefined ? undefined : env[key];
}

/**
 * The file `program` runs: an absolute path as it is (when executable), a bare name looked up on PATH (on Windows
 * with each PATHEXT extension unless it has one). A relative path with a separator is not looked up (null).
 */
export function resolveProgram(program: string, lookup: ProgramLookup): string | null {
  const win = lookup.platform === 'win32';
  const p = win ? path.win32 : path.posix;
  const candidates = (base: string): string[] => {
    if (!win) return [base];
    const extensions = (envValue(lookup.env, 'PATHEXT', lookup.platform) ?? '.COM;.EXE;.BAT;.CMD')
      .split(';')
      .filter((e) => e !== '');
    const hasExtension = extensions.some((e) => base.toUpperCase().endsWith(e.toUpperCase()));
    return hasExtension ? [base] : [base, ...extensions.map((e) => base + e.toLowerCase())];
  };
  if (p.isAbsolute(program)) return candidates(program).find((c) => lookup.isExecutable(c)) ?? null;
  if (program.includes('/') || (win && program.includes('\\'))) return null;
  const dirs = (envValue(lookup.env, 'PATH', lookup.platform) ?? '').split(win ? ';' : ':').filter((d) => d !== '');
  for (const dir of dirs) {
    for (const candidate of candidates(p.join(dir, program))) if (lookup.isExecutable(candidate)) return candidate;
  }
  return null;
}

/** Whether the profile's command can run here, with a message for the person when it cannot. */
export function profileAvailability(profile: LaunchProfile, lookup: ProgramLookup): ProfileAvailability {
  const program = profile.command[0]?.trim() ?? '';
  if (program === '') {
    return {
      profileId: profile.id,
      resolved: null,
      problem: `${profile.name} has no command: add a profile with your own command (cli "custom") to the sw4rm.agents.profiles setting or to .sw4rm/agents.json.`,
    };
  }
  const win = lookup.platform === 'win32';
  if (
    !(win ? path.win32 : path.posix).isAbsolute(program) &&
    (program.includes('/') || (win && program.includes('\\')))
  ) {
    return {
      profileId: profile.id,
      resolved: null,
      problem: `\`${program}\` is a relative path: give the program by name (looked up on PATH) or as an absolute path in profile '${profile.id}'.`,
    };
  }
  const resolved = resolveProgram(program, lookup);
  if (resolved !== null) return { profileId: profile.id, resolved, problem: null };
  const where = (win ? path.win32 : path.posix).isAbsolute(program)
    ? 'not found or not executable'
    : 'not found on PATH';
  return {
    profileId: profile.id,
    resolved: null,
    problem: `\`${program}\` is not installed (${where}). ${(profile.mode === 'session' ? SESSION_INSTALL_HINTS : INSTALL_HINTS)[profile.cli]}.`,
  };
}
