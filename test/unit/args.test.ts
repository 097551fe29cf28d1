import { strict as assert } from 'node:assert';
import { USAGE, UsageError, parseArgs } from '../../src/cli/args';

/** setTimeout's longest delay; anything longer fires after 1 ms in Node. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function refused(argv: string[], message: RegExp): void {
  assert.throws(() => parseArgs(argv), (err: unknown) => {
    assert.ok(err instanceof UsageError, `expected UsageError, got ${String(err)}`);
    assert.match(err.message, message);
    return true;
  });
}

describe('parseArgs (headless CLI)', () => {
  it('defaults to 127.0.0.1:50051, token auth, .sw4rm and a 30 s debounce', () => {
    assert.deepEqual(parseArgs([]), {
      host: '127.0.0.1', port: 50051, dataDir: '.sw4rm', auth: 'token', heartbeatDebounceSeconds: 30, help: false,
    });
  });

  it('reads every option, as separate values or with =', () => {
    assert.deepEqual(parseArgs(['--host', '::1', '--port', '0', '--data-dir', '/tmp/x y', '--auth', 'none', '--heartbeat-debounce', '2.5']), {
      host: '::1', port: 0, dataDir: '/tmp/x y', auth: 'none', heartbeatDebounceSeconds: 2.5, help: false,
    });
    assert.deepEqual(parseArgs(['--port=65535', '--data-dir=a=b', '--auth=token']), {
      host: '127.0.0.1', port: 65535, dataDir: 'a=b', auth: 'token', heartbeatDebounceSeconds: 30, help: false,
    });
  });

  it('lets the last occurrence of an option win', () => {
    assert.equal(parseArgs(['--port', '1', '--port', '2']).port, 2);
  });

  for (const flag of ['-h', '--help']) {
    it(`asks for help with ${flag}`, () => {
      assert.equal(parseArgs([flag]).help, true);
    });
  }

  for (const bad of ['abc', '-1', '65536', '1e3', '', '8080x', '0x50']) {
    it(`refuses --port ${JSON.stringify(bad)}`, () => {
      refused(['--port', bad], /--port must be a number from 0 to 65535/);
    });
  }

  it('refuses an unknown auth mode, naming it', () => {
    refused(['--auth', 'bogus'], /--auth must be 'token' or 'none', not 'bogus'/);
  });

  for (const bad of ['0', '-5', 'abc', 'NaN']) {
    it(`refuses --heartbeat-debounce ${bad}`, () => {
      refused(['--heartbeat-debounce', bad], /--heartbeat-debounce must be a positive number/);
    });
  }

  it('refuses a debounce too long for a timer, which Node would fire after 1 ms', () => {
    // Infinity * 1000 and anything above 2^31-1 ms make setTimeout fire at once (TimeoutOverflowWarning),
    // so every agent would turn unavailable right after each heartbeat.
    for (const bad of ['Infinity', String(Math.ceil(MAX_TIMER_MS / 1000) + 1)]) {
      assert.throws(() => parseArgs(['--heartbeat-debounce', bad]), UsageError, `--heartbeat-debounce ${bad} is accepted`);
    }
  });

  it('refuses an option without its value', () => {
    refused(['--port'], /--port needs a value/);
    refused(['--data-dir', '--port', '1'], /--data-dir needs a value/);
  });

  it('refuses unknown options and stray arguments, quoting them', () => {
    refused(['--verbose'], /unknown option '--verbose'/);
    refused(['serve'], /unknown option 'serve'/);
    refused(['--port=1=2'], /--port must be a number/);
  });

  it('documents every option in the usage text', () => {
    for (const flag of ['--host', '--port', '--data-dir', '--auth', '--heartbeat-debounce', '--help']) assert.ok(USAGE.includes(flag), flag);
  });
});
