import { strict as assert } from 'node:assert';
import { EXIT_USAGE, readBridgeEnv } from '../../src/cli/bridgeEnv';
import { hookConfig } from '../../src/cli/hookCommand';
import { proxyConfig } from '../../src/cli/mcpStdio';

/** The environment of the bridge's two commands (src/cli/bridgeEnv.ts), read by sw4rm-mcp and sw4rm-hook alike. */
describe('readBridgeEnv: SW4RM_TOKEN and the bridge URL of sw4rm-mcp and sw4rm-hook', () => {
  const spec = { command: 'sw4rm-x', urlVariable: 'SW4RM_X_URL', missingHint: ' (hint)' };

  it('answers the trimmed http(s) URL and token', () => {
    const read = readBridgeEnv({ SW4RM_X_URL: ' https://127.0.0.1:9/x ', SW4RM_TOKEN: ' sw4rm.a.b\n' }, spec);
    assert.ok(typeof read !== 'string');
    assert.deepEqual([read.url.href, read.token], ['https://127.0.0.1:9/x', 'sw4rm.a.b']);
  });

  it('names every missing variable, then a URL that is not one or not http(s), each after the command', () => {
    assert.equal(readBridgeEnv({}, spec), 'sw4rm-x: SW4RM_X_URL and SW4RM_TOKEN are not set (hint)');
    assert.equal(
      readBridgeEnv({ SW4RM_X_URL: 'http://h/', SW4RM_TOKEN: ' ' }, spec),
      'sw4rm-x: SW4RM_TOKEN is not set (hint)',
    );
    assert.equal(readBridgeEnv({ SW4RM_TOKEN: 't' }, spec), 'sw4rm-x: SW4RM_X_URL is not set (hint)');
    assert.equal(
      readBridgeEnv({ SW4RM_X_URL: 'nope', SW4RM_TOKEN: 't' }, spec),
      'sw4rm-x: SW4RM_X_URL is not a URL: "nope"',
    );
    assert.equal(
      readBridgeEnv({ SW4RM_X_URL: 'file:///etc/passwd', SW4RM_TOKEN: 't' }, spec),
      'sw4rm-x: SW4RM_X_URL must be an http(s) URL, not file:',
    );
    assert.equal(EXIT_USAGE, 2);
  });

  it('gives sw4rm-hook its messages (the CLI kept for its "ask") and the CLI in the URL', () => {
    assert.deepEqual(hookConfig(['--cli', 'gemini'], { SW4RM_HOOK_URL: 'http://127.0.0.1:1/hooks/pre-tool-use' }), {
      cli: 'gemini',
      problem: 'sw4rm-hook: SW4RM_TOKEN is not set (an agent launched by SW4RM: Launch Agent… has both)',
    });
    assert.deepEqual(hookConfig(['--cli=codex'], { SW4RM_HOOK_URL: 'ftp://x', SW4RM_TOKEN: 't' }), {
      cli: 'codex',
      problem: 'sw4rm-hook: SW4RM_HOOK_URL must be an http(s) URL, not ftp:',
    });
    const config = hookConfig(['--cli', 'claude-code'], {
      SW4RM_HOOK_URL: ' http://127.0.0.1:50052/hooks/pre-tool-use ',
      SW4RM_TOKEN: 'sw4rm.x.y ',
    });
    assert.ok(!('problem' in config));
    assert.deepEqual(
      [config.cli, config.url.href, config.token],
      ['claude-code', 'http://127.0.0.1:50052/hooks/pre-tool-use?cli=claude-code', 'sw4rm.x.y'],
    );
    assert.match((hookConfig([], {}) as { problem: string }).problem, /^sw4rm-hook: --cli must be one of /);
  });

  it('gives sw4rm-mcp its messages, one line each', () => {
    assert.equal(
      proxyConfig({}),
      'sw4rm-mcp: SW4RM_MCP_URL and SW4RM_TOKEN are not set. This command relays MCP between stdio and the ' +
        "SW4RM coordinator's bridge: set SW4RM_MCP_URL to the bridge URL (e.g. http://127.0.0.1:50052/mcp) and SW4RM_TOKEN to " +
        "the agent's own credential (an agent launched by SW4RM: Launch Agent… has both).\n",
    );
    assert.equal(proxyConfig({ SW4RM_MCP_URL: 'x', SW4RM_TOKEN: 't' }), 'sw4rm-mcp: SW4RM_MCP_URL is not a URL: "x"\n');
  });
});
