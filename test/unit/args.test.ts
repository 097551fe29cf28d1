import { strict as assert } from 'node:assert';
import { USAGE, UsageError, parseArgs } from '../../src/cli/args';

/** setTimeout's longest delay; anything longer fires after 1 ms in Node. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function refused(argv: string[], message: RegExp): void {
  assert.throws(
    () => parseArgs(argv),
    (err: unknown) => {
      assert.ok(err instanceof UsageError, `expected UsageError, got ${String(err)}`);
      assert.match(err.message, message);
      return true;
    },
  );
}

/** Router defaults: RFC §13 inbox capacity 10, RFC §11.2/§20 deduplication window 3600 s, the built-in payload limits. */
const BOUNDS_DEFAULTS = {
  memoryBudgetMiB: 128,
  maxConnections: 1000,
  unauthenticatedIdleSeconds: 10,
  requestBodySeconds: 30,
};
const ROUTER_DEFAULTS = {
  capacity: 10,
  dedupWindowSeconds: 3600,
  messageRetentionHours: 24,
  storeBudgetMiB: 2048,
  privilegedRatePerSecond: 50,
  payloadLimits: {},
  unaddressed: 'refuse',
  verbose: false,
  ...BOUNDS_DEFAULTS,
};
const HITL_DEFAULTS = { operator: false, hitlPolicyFile: undefined };
const WORKSPACE_DEFAULTS = {
  workspaceFolders: [],
  worktreesFolder: '',
  setupCopy: [],
  setupCommand: '',
  setupTimeoutSeconds: 600,
  trustRepositorySetup: false,
  snapshotRetentionDays: 30,
  maxParallel: {},
  conflictThreshold: 0.7,
  processTools: false,
  acceptUnenforcedNetwork: false,
  negotiationPolicyFile: undefined,
  handoffTimeoutSeconds: 300,
  handoffReroute: true,
  handoffToOperator: false,
  handoffRetentionDays: 30,
  inboxAckTimeoutMinutes: 30,
};

describe('parseArgs (headless CLI)', () => {
  it('defaults to 127.0.0.1:50051, token auth, .sw4rm, a 30 s debounce and the RFC router defaults', () => {
    assert.deepEqual(parseArgs([]), {
      host: '127.0.0.1',
      port: 50051,
      bridgePort: 50052,
      dataDir: '.sw4rm',
      auth: 'token',
      heartbeatDebounceSeconds: 30,
      ...ROUTER_DEFAULTS,
      help: false,
      ...HITL_DEFAULTS,
      ...WORKSPACE_DEFAULTS,
    });
  });

  it('reads every option, as separate values or with =', () => {
    assert.deepEqual(
      parseArgs([
        '--host',
        '::1',
        '--port',
        '0',
        '--bridge-port',
        '0',
        '--data-dir',
        '/tmp/x y',
        '--auth',
        'none',
        '--heartbeat-debounce',
        '2.5',
        '--capacity',
        '3',
        '--dedup-window',
        '60',
        '--message-retention',
        '48',
        '--store-budget',
        '64',
        '--privileged-rate',
        '5',
        '--payload-limit',
        'DATA=1048576',
        '--unaddressed',
        'fanout',
        '--operator',
        '--hitl-policy',
        'p.json',
        '--memory-budget',
        '256',
        '--max-connections',
        '50',
        '--idle-unauthenticated',
        '5',
        '--request-body-timeout',
        '60',
      ]),
      {
        host: '::1',
        port: 0,
        bridgePort: 0,
        dataDir: '/tmp/x y',
        auth: 'none',
        heartbeatDebounceSeconds: 2.5,
        capacity: 3,
        dedupWindowSeconds: 60,
        messageRetentionHours: 48,
        storeBudgetMiB: 64,
        privilegedRatePerSecond: 5,
        payloadLimits: { DATA: 1048576 },
        unaddressed: 'fanout',
        verbose: false,
        help: false,
        memoryBudgetMiB: 256,
        maxConnections: 50,
        unauthenticatedIdleSeconds: 5,
        requestBodySeconds: 60,
        operator: true,
        hitlPolicyFile: 'p.json',
        ...WORKSPACE_DEFAULTS,
      },
    );
    assert.deepEqual(
      parseArgs([
        '--port=65535',
        '--bridge-port=50060',
        '--data-dir=a=b',
        '--auth=token',
        '--capacity=25',
        '--dedup-window=7200',
        '--payload-limit=CONTROL=100',
      ]),
      {
        host: '127.0.0.1',
        port: 65535,
        bridgePort: 50060,
        dataDir: 'a=b',
        auth: 'token',
        heartbeatDebounceSeconds: 30,
        capacity: 25,
        dedupWindowSeconds: 7200,
        messageRetentionHours: 24,
        storeBudgetMiB: 2048,
        privilegedRatePerSecond: 50,
        payloadLimits: { CONTROL: 100 },
        unaddressed: 'refuse',
        verbose: false,
        help: false,
        ...HITL_DEFAULTS,
        ...BOUNDS_DEFAULTS,
        ...WORKSPACE_DEFAULTS,
      },
    );
  });

  it('takes the worktree flags: folder, setup copies (checked), command, timeout, trust, snapshot retention', () => {
    const o = parseArgs([
      '--worktrees-folder',
      '/trees',
      '--setup-copy',
      '.env*',
      '--setup-copy=config/**',
      '--setup-command',
      'npm ci',
      '--setup-timeout',
      '60',
      '--trust-repository-setup',
      '--snapshot-retention=7',
    ]);
    assert.deepEqual(
      [
        o.worktreesFolder,
        o.setupCopy,
        o.setupCommand,
        o.setupTimeoutSeconds,
        o.trustRepositorySetup,
        o.snapshotRetentionDays,
      ],
      ['/trees', ['.env*', 'config/**'], 'npm ci', 60, true, 7],
    );
    assert.throws(() => parseArgs(['--setup-copy', '/etc/passwd']), /--setup-copy: .*not relative/);
    const many = Array.from({ length: 101 }, (_, i) => ['--setup-copy', `f${i}`]).flat();
    assert.throws(
      () => parseArgs(many),
      (err: unknown) => err instanceof UsageError && /more than 100 globs/.test(err.message),
      '101 globs: a usage error, not a crash at start',
    );
    assert.throws(
      () => parseArgs(['--setup-timeout', '3601']),
      /--setup-timeout must be a whole number from 1 to 3600/,
    );
    assert.throws(
      () => parseArgs(['--snapshot-retention', '0']),
      /--snapshot-retention must be a whole number from 1 to 3650/,
    );
  });

  it('takes --max-parallel TYPE=N repeatedly (the last of a type winning) and --conflict-threshold X in 0..1', () => {
    const o = parseArgs([
      '--max-parallel',
      'coder=2',
      '--max-parallel=reviewer=1',
      '--max-parallel',
      'coder=3',
      '--conflict-threshold',
      '0.25',
    ]);
    assert.deepEqual(o.maxParallel, { coder: 3, reviewer: 1 });
    assert.equal(o.conflictThreshold, 0.25);
    assert.equal(parseArgs(['--conflict-threshold=1']).conflictThreshold, 1);
    assert.equal(parseArgs(['--conflict-threshold', '0']).conflictThreshold, 0);
    for (const bad of ['coder', 'coder=', '=2', 'coder=-1', 'coder=1.5', 'a b=2']) {
      refused(['--max-parallel', bad], /--max-parallel takes TYPE=N .*e\.g\. coder=2/);
    }
    refused(['--max-parallel', 'coder=0'], /--max-parallel must be a whole number from 1 to 100000, not '0'/);
    refused(['--max-parallel', `${'t'.repeat(201)}=1`], /the agent type is longer than 200 characters/);
    for (const bad of ['1.5', '-0.1', 'x', '', '1e-1', 'NaN'])
      refused(['--conflict-threshold', bad], /--conflict-threshold must be a number from 0 to 1/);
    refused(['--max-parallel'], /--max-parallel needs a value/);
  });

  it('takes --process-tools and --accept-unenforced-network as switches (off by default, never with a value)', () => {
    const o = parseArgs(['--process-tools', '--accept-unenforced-network']);
    assert.deepEqual([o.processTools, o.acceptUnenforcedNetwork], [true, true]);
    assert.deepEqual(
      [parseArgs(['--process-tools']).acceptUnenforcedNetwork, parseArgs([]).processTools],
      [false, false],
    );
    refused(['--process-tools=false'], /--process-tools takes no value/);
    refused(['--accept-unenforced-network=no'], /--accept-unenforced-network takes no value/);
    assert.match(USAGE, /--process-tools/);
    assert.match(USAGE, /--accept-unenforced-network/);
  });

  it('takes --inbox-ack-timeout-minutes: whole minutes from 1 to 1440 (the ACK timeout of launched agents that pull their inbox)', () => {
    assert.equal(parseArgs(['--inbox-ack-timeout-minutes', '90']).inboxAckTimeoutMinutes, 90);
    assert.equal(parseArgs(['--inbox-ack-timeout-minutes=1440']).inboxAckTimeoutMinutes, 1440);
    refused(
      ['--inbox-ack-timeout-minutes', '0'],
      /--inbox-ack-timeout-minutes must be a whole number from 1 to 1440, not '0'/,
    );
    refused(
      ['--inbox-ack-timeout-minutes', '1441'],
      /--inbox-ack-timeout-minutes must be a whole number from 1 to 1440/,
    );
    refused(['--inbox-ack-timeout-minutes', '2.5'], /--inbox-ack-timeout-minutes must be a whole number/);
    refused(['--inbox-ack-timeout-minutes'], /--inbox-ack-timeout-minutes needs a value/);
    assert.match(USAGE, /--inbox-ack-timeout-minutes <min>/);
  });

  it('takes the handoff options: --handoff-timeout, --handoff-retention (bounded), --no-handoff-reroute and --handoff-to-operator (switches)', () => {
    const o = parseArgs([
      '--handoff-timeout',
      '90',
      '--handoff-retention=7',
      '--no-handoff-reroute',
      '--handoff-to-operator',
    ]);
    assert.deepEqual(
      [o.handoffTimeoutSeconds, o.handoffRetentionDays, o.handoffReroute, o.handoffToOperator],
      [90, 7, false, true],
    );
    refused(['--handoff-timeout', '0'], /--handoff-timeout must be a whole number from 1 to 86400, not '0'/);
    refused(['--handoff-timeout', '86401'], /--handoff-timeout must be a whole number from 1 to 86400/);
    refused(['--handoff-retention', '1.5'], /--handoff-retention must be a whole number from 1 to 3650/);
    refused(['--handoff-to-operator=false'], /--handoff-to-operator takes no value/);
    refused(['--no-handoff-reroute=1'], /--no-handoff-reroute takes no value/);
    assert.match(USAGE, /--handoff-timeout <s>/);
    assert.match(USAGE, /--handoff-to-operator/);
  });

  it('takes --workspace DIR repeatedly, in order', () => {
    assert.deepEqual(parseArgs(['--workspace', '/a b', '--workspace=/c', '--workspace', 'rel']).workspaceFolders, [
      '/a b',
      '/c',
      'rel',
    ]);
    refused(['--workspace'], /--workspace needs a value/);
  });

  describe('router options', () => {
    it('takes --capacity and --dedup-window as whole numbers from 1', () => {
      assert.equal(parseArgs(['--capacity', '1']).capacity, 1);
      assert.equal(parseArgs(['--capacity', '1000000']).capacity, 1_000_000);
      assert.equal(parseArgs(['--dedup-window', '1']).dedupWindowSeconds, 1);
      assert.equal(parseArgs(['--dedup-window', String(30 * 86_400)]).dedupWindowSeconds, 30 * 86_400);
    });

    for (const bad of ['0', '-1', '1.5', 'abc', '', '1e3', '1000001']) {
      it(`refuses --capacity ${JSON.stringify(bad)}, naming the value`, () => {
        refused(
          ['--capacity', bad],
          new RegExp(`--capacity must be a whole number from 1 to 1000000, not '${bad.replace('.', '\\.')}'`),
        );
      });
    }

    for (const bad of ['15', '0', '-1', '2.5', 'big', '1048577']) {
      it(`refuses --store-budget ${JSON.stringify(bad)}`, () => {
        refused(['--store-budget', bad], /--store-budget must be a whole number of MiB from 16 to 1048576/);
      });
    }

    for (const [flag, bad, range] of [
      ['--memory-budget', '31', '32 to 4096'],
      ['--memory-budget', '4097', '32 to 4096'],
      ['--memory-budget', '1.5', '32 to 4096'],
      ['--max-connections', '9', '10 to 100000'],
      ['--idle-unauthenticated', '0', '1 to 3600'],
      ['--request-body-timeout', '3601', '1 to 3600'],
    ]) {
      it(`refuses ${flag} ${JSON.stringify(bad)}, naming the range`, () => {
        refused(
          [flag, bad],
          new RegExp(`${flag} must be a whole number from ${range}, not '${bad.replace('.', '\\.')}'`),
        );
      });
    }

    for (const bad of ['0', '-1', '0.5', 'day', String(365 * 24 + 1)]) {
      it(`refuses --message-retention ${JSON.stringify(bad)}`, () => {
        refused(['--message-retention', bad], /--message-retention must be a whole number from 1 to 8760/);
      });
    }

    for (const bad of ['0', '-60', '2.5', 'hour', String(30 * 86_400 + 1)]) {
      it(`refuses --dedup-window ${JSON.stringify(bad)}`, () => {
        refused(['--dedup-window', bad], /--dedup-window must be a whole number from 1 to 2592000/);
      });
    }

    it('collects repeated --payload-limit TYPE=N per type, the last one of a type winning', () => {
      assert.deepEqual(
        parseArgs(['--payload-limit', 'DATA=1000', '--payload-limit', 'TOOL_CALL=2048', '--payload-limit=DATA=500'])
          .payloadLimits,
        { DATA: 500, TOOL_CALL: 2048 },
      );
    });

    it('admits a payload limit up to the transport maximum of 16 MiB and no more', () => {
      assert.equal(parseArgs(['--payload-limit', `DATA=${16 * 1024 * 1024}`]).payloadLimits.DATA, 16 * 1024 * 1024);
      refused(
        ['--payload-limit', `DATA=${16 * 1024 * 1024 + 1}`],
        /--payload-limit must be a whole number from 1 to 16777216/,
      );
      refused(['--payload-limit', 'DATA=0'], /--payload-limit must be a whole number from 1/);
    });

    for (const bad of ['DATA', 'DATA=', '=5', 'data=5', 'DATA=-5', 'DATA=1.5', 'DATA=5=6', 'DATA 5']) {
      it(`refuses --payload-limit ${JSON.stringify(bad)}, showing the expected form`, () => {
        refused(['--payload-limit', bad], /--payload-limit takes TYPE=BYTES, e\.g\. DATA=1048576/);
      });
    }

    it('refuses the router options without their value', () => {
      refused(['--capacity'], /--capacity needs a value/);
      refused(['--dedup-window', '--capacity', '3'], /--dedup-window needs a value/);
      refused(['--payload-limit'], /--payload-limit needs a value/);
      refused(['--unaddressed'], /--unaddressed needs a value/);
    });

    it('takes --unaddressed refuse or fanout, nothing else', () => {
      assert.equal(parseArgs(['--unaddressed=fanout']).unaddressed, 'fanout');
      assert.equal(parseArgs(['--unaddressed', 'refuse']).unaddressed, 'refuse');
      refused(['--unaddressed', 'broadcast'], /--unaddressed must be refuse or fanout, not 'broadcast'/);
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

  for (const bad of ['abc', '-1', '65536', '1e3', '']) {
    it(`refuses --bridge-port ${JSON.stringify(bad)}`, () => {
      refused(['--bridge-port', bad], /--bridge-port must be a number from 0 to 65535/);
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
      assert.throws(
        () => parseArgs(['--heartbeat-debounce', bad]),
        UsageError,
        `--heartbeat-debounce ${bad} is accepted`,
      );
    }
  });

  it('refuses an option without its value', () => {
    refused(['--port'], /--port needs a value/);
    refused(['--data-dir', '--port', '1'], /--data-dir needs a value/);
  });

  it("takes --negotiation-policy <file>, documented with the file's keys", () => {
    assert.equal(parseArgs(['--negotiation-policy', 'n.json']).negotiationPolicyFile, 'n.json');
    assert.equal(parseArgs(['--negotiation-policy=n.json']).negotiationPolicyFile, 'n.json');
    assert.match(
      USAGE,
      /--negotiation-policy <file>.*\n.*basePolicy, profiles, guardrails, room, tieBreak, proposalSchemas/,
    );
  });

  it('refuses unknown options and stray arguments, quoting them', () => {
    refused(['--quiet'], /unknown option '--quiet'/);
    assert.equal(parseArgs(['--verbose']).verbose, true);
    refused(['serve'], /unknown option 'serve'/);
    refused(['--port=1=2'], /--port must be a number/);
  });

  it('documents every option in the usage text', () => {
    for (const flag of [
      '--host',
      '--port',
      '--bridge-port',
      '--data-dir',
      '--auth',
      '--heartbeat-debounce',
      '--capacity',
      '--dedup-window',
      '--privileged-rate',
      '--payload-limit',
      '--verbose',
      '--help',
    ]) {
      assert.ok(USAGE.includes(flag), flag);
    }
  });
});
