import { strict as assert } from 'node:assert';
import { BUILTIN_PROFILES } from '../../src/core/launch/builtinProfiles';
import type { BridgeEndpoints, LaunchProfile } from '../../src/core/launch/model';
import { parseSettingsProfiles } from '../../src/core/launch/profiles';
import {
  excludePattern,
  fillArgs,
  launchCommand,
  plannedFiles,
  renderFile,
  shellQuote,
  WiringError,
  type WiringContext,
} from '../../src/core/launch/wiring';

const builtin = (id: string): LaunchProfile => BUILTIN_PROFILES.find((p) => p.id === id)!;
const endpoints: BridgeEndpoints = {
  mcpUrl: 'http://127.0.0.1:50052/mcp',
  hookUrl: 'http://127.0.0.1:50052/hooks/pre-tool-use',
  stdioCommand: ['/usr/bin/node', '/ext/dist/sw4rm-mcp.js'],
  hookCommand: ['/Applications/Code Helper', '/ext/dist/sw4rm-hook.js'],
  grpcAddress: '127.0.0.1:50051',
  // The desktop editor: its binary is Electron, so our own commands (only they) run with ELECTRON_RUN_AS_NODE.
  commandEnv: { ELECTRON_RUN_AS_NODE: '1' },
};
/** `null`: the bridge is not listening. */
const ctxFor = (profile: LaunchProfile, e: BridgeEndpoints | null = endpoints): WiringContext => ({
  agentId: 'coder-1',
  profile,
  cwd: '/wt/coder-1',
  endpoints: e ?? undefined,
});
/** The planned files rendered as if none existed: path → parsed JSON or text. */
function rendered(profile: LaunchProfile): Record<string, unknown> {
  return Object.fromEntries(
    plannedFiles(ctxFor(profile)).map((f) => [
      f.path,
      f.kind === 'text' ? f.content : JSON.parse(renderFile(f, undefined)),
    ]),
  );
}
const HOOK = "ELECTRON_RUN_AS_NODE=1 '/Applications/Code Helper' /ext/dist/sw4rm-hook.js";

describe('launch wiring: what a launch writes and runs, per profile', () => {
  it('Claude Code: .mcp.json over Streamable HTTP naming SW4RM_TOKEN, a PreToolUse command hook (660 s), the instructions and a first prompt', () => {
    const files = rendered(builtin('claude-code'));
    assert.deepEqual(Object.keys(files), ['.sw4rm/AGENT.md', '.mcp.json', '.claude/settings.local.json']);
    assert.deepEqual(files['.mcp.json'], {
      mcpServers: {
        sw4rm: { type: 'http', url: endpoints.mcpUrl, headers: { Authorization: 'Bearer ${SW4RM_TOKEN}' } },
      },
    });
    assert.deepEqual(files['.claude/settings.local.json'], {
      enabledMcpjsonServers: ['sw4rm'],
      hooks: {
        PreToolUse: [
          { matcher: '*', hooks: [{ type: 'command', command: `${HOOK} --cli claude-code`, timeout: 660 }] },
        ],
      },
    });
    const command = launchCommand(ctxFor(builtin('claude-code')));
    assert.equal(command.length, 2);
    assert.equal(command[0], 'claude');
    assert.match(command[1], /^You are coder-1, an agent of a SW4RM swarm .* Read \.sw4rm\/AGENT\.md now/);
    const text = files['.sw4rm/AGENT.md'] as string;
    for (const expected of [
      '`coder-1`',
      '/wt/coder-1',
      '`read_inbox`',
      '`ack_message`',
      '`send_message`',
      '`list_agents`',
      '`request_decision`',
      '`current_task`',
      '`complete_task`',
      'SW4RM_TOKEN',
    ])
      assert.ok(text.includes(expected), expected);
    assert.match(text, /Call `read_inbox` now, before you start/);
    const timed = plannedFiles({ ...ctxFor(builtin('claude-code')), inboxWaitMs: 30 * 60_000 }).find(
      (f) => f.path === '.sw4rm/AGENT.md',
    );
    assert.ok(
      timed?.kind === 'text' &&
        /not read within 30 minutes of its sending ends unread \(TIMED_OUT\)/.test(timed.content),
      'the instructions say how long a message waits',
    );
    assert.doesNotMatch(text, /ends unread/, "without the launch's timeout, nothing is said of it");
    // Never an HTTP hook (it fails open in Claude Code): refused when wiring too, should a profile get here.
    assert.throws(
      () => plannedFiles(ctxFor({ ...builtin('claude-code'), approvals: { kind: 'claude-code-hooks', via: 'http' } })),
      /command hook only/,
    );
  });

  it('Gemini CLI: one .gemini/settings.json with the server (httpUrl) and the BeforeTool hook (660,000 ms); the prompt by -i', () => {
    const files = rendered(builtin('gemini'));
    assert.deepEqual(files['.gemini/settings.json'], {
      mcpServers: { sw4rm: { httpUrl: endpoints.mcpUrl, headers: { Authorization: 'Bearer ${SW4RM_TOKEN}' } } },
      hooks: {
        BeforeTool: [
          {
            matcher: '.*',
            hooks: [{ type: 'command', name: 'sw4rm-approvals', command: `${HOOK} --cli gemini`, timeout: 660_000 }],
          },
        ],
      },
    });
    assert.equal(launchCommand(ctxFor(builtin('gemini')))[1], '-i');
  });

  it("Codex CLI: nothing but the instructions written; the server by -c overrides with the token's variable name", () => {
    assert.deepEqual(Object.keys(rendered(builtin('codex'))), ['.sw4rm/AGENT.md']);
    const command = launchCommand(ctxFor(builtin('codex')));
    assert.deepEqual(command.slice(0, 5), [
      'codex',
      '-c',
      'mcp_servers.sw4rm.url="http://127.0.0.1:50052/mcp"',
      '-c',
      'mcp_servers.sw4rm.bearer_token_env_var="SW4RM_TOKEN"',
    ]);
    assert.match(command[5], /Read \.sw4rm\/AGENT\.md now/);
  });

  it('Aider: only the instructions, read with --read; the file says there are no swarm tools', () => {
    const files = rendered(builtin('aider'));
    assert.deepEqual(Object.keys(files), ['.sw4rm/AGENT.md']);
    assert.match(files['.sw4rm/AGENT.md'] as string, /No swarm tools in this CLI/);
    assert.doesNotMatch(files['.sw4rm/AGENT.md'] as string, /read_inbox/);
    assert.deepEqual(launchCommand(ctxFor(builtin('aider'))), ['aider', '--read', '.sw4rm/AGENT.md']);
    assert.deepEqual(
      launchCommand(ctxFor(builtin('aider'), null)),
      ['aider', '--read', '.sw4rm/AGENT.md'],
      'needs no bridge',
    );
  });

  it('Copilot CLI: .mcp.json and a preToolUse hook file for bash and PowerShell', () => {
    const files = rendered(builtin('copilot'));
    assert.deepEqual(files['.github/hooks/sw4rm.json'], {
      version: 1,
      hooks: {
        preToolUse: [
          {
            type: 'command',
            bash: `${HOOK} --cli copilot`,
            powershell:
              "$env:ELECTRON_RUN_AS_NODE='1'; & '/Applications/Code Helper' '/ext/dist/sw4rm-hook.js' '--cli' 'copilot'",
            timeoutSec: 660,
          },
        ],
      },
    });
  });

  it('stdio transport and the other formats name the environment variables each format expands', () => {
    const stdio = parseSettingsProfiles([
      {
        id: 'cursorish',
        command: ['cursor-agent'],
        bridge: { kind: 'mcp-config-file', path: '.cursor/mcp.json', format: 'cursor-mcp-json', transport: 'stdio' },
      },
    ]).profiles[0];
    assert.deepEqual(rendered(stdio)['.cursor/mcp.json'], {
      mcpServers: {
        sw4rm: {
          command: '/usr/bin/node',
          args: ['/ext/dist/sw4rm-mcp.js'],
          env: { SW4RM_MCP_URL: '${env:SW4RM_MCP_URL}', SW4RM_TOKEN: '${env:SW4RM_TOKEN}', ELECTRON_RUN_AS_NODE: '1' },
        },
      },
    });
    const vscode = {
      ...stdio,
      bridge: { kind: 'mcp-config-file', path: '.vscode/mcp.json', format: 'vscode-mcp-json', transport: 'http' },
    } as LaunchProfile;
    assert.deepEqual(rendered(vscode)['.vscode/mcp.json'], {
      servers: {
        sw4rm: { type: 'http', url: endpoints.mcpUrl, headers: { Authorization: 'Bearer ${env:SW4RM_TOKEN}' } },
      },
    });
  });

  it('fills placeholders: whole-argument lists spread, lists inside an argument as JSON, unknown ones kept, missing values refused', () => {
    const values = {
      agentId: 'a',
      mcpUrl: 'http://x/mcp',
      stdioCommand: ['node', '/p q/mcp.js'],
      instructionsPath: undefined,
    };
    assert.deepEqual(
      fillArgs(['--id={agentId}', '{stdioCommand}', 'cmd={stdioCommand}', '{json}', '{mcpUrl}'], values),
      ['--id=a', 'node', '/p q/mcp.js', 'cmd=["node","/p q/mcp.js"]', '{json}', 'http://x/mcp'],
    );
    assert.throws(
      () => fillArgs(['{instructionsPath}'], values),
      (err: unknown) => err instanceof WiringError && /no instructions file/.test(err.message),
    );
    assert.throws(() => launchCommand(ctxFor(builtin('codex'), null)), /MCP bridge is not listening/);
    assert.equal(shellQuote("it's"), "'it'\\''s'");
    assert.equal(excludePattern('.sw4rm/AGENT.md'), '/.sw4rm/AGENT.md');
    assert.equal(excludePattern('a b/#x[1]*.json'), '/a\\ b/\\#x\\[1\\]\\*.json');
  });

  it('merges into an existing untracked file: other servers, settings and hooks kept, ours replaced not duplicated', () => {
    const [, mcp, settings] = plannedFiles(ctxFor(builtin('claude-code')));
    // The person's own approved servers stay; ours is added once.
    const approved = JSON.parse(
      renderFile(settings, renderFile(settings, JSON.stringify({ enabledMcpjsonServers: ['github'] }))),
    );
    assert.deepEqual(approved.enabledMcpjsonServers, ['github', 'sw4rm']);
    const existing = '{\n  // mine\n  "mcpServers": { "other": { "command": "x" }, "sw4rm": { "url": "old" } }\n}\n';
    assert.deepEqual(JSON.parse(renderFile(mcp, existing).replace('// mine', '')).mcpServers, {
      other: { command: 'x' },
      sw4rm: { type: 'http', url: endpoints.mcpUrl, headers: { Authorization: 'Bearer ${SW4RM_TOKEN}' } },
    });
    assert.ok(renderFile(mcp, existing).includes('// mine'), 'comments are kept');
    const theirs = { matcher: 'Bash', hooks: [{ type: 'command', command: 'lint.sh' }] };
    const once = renderFile(
      settings,
      JSON.stringify({ permissions: { allow: ['Read'] }, hooks: { PreToolUse: [theirs] } }),
    );
    const twice = JSON.parse(renderFile(settings, once));
    assert.deepEqual(twice.permissions, { allow: ['Read'] });
    assert.equal(twice.hooks.PreToolUse.length, 2);
    assert.deepEqual(twice.hooks.PreToolUse[0], theirs);
    assert.throws(() => renderFile(mcp, '[1, 2]'), /cannot be merged \(it is not a JSON object\)/);
    assert.throws(() => renderFile(mcp, '{"a": '), /cannot be merged/);
  });
});
