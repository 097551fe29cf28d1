import { strict as assert } from 'node:assert';
import { DEFAULT_EXECUTION_POLICY, ToolCallError, type ExecutionPolicy } from '../../src/core/tools/model';
import { childEnvironment } from '../../src/core/tools/processProvider';
import { cpuTicksOf, groupCpuMs, liveMembers, parseProcStat } from '../../src/core/tools/processTree';
import {
  bwrapArgs,
  resolveTool,
  sandboxPlan,
  unixSocketSeccomp,
  type Confinement,
  type SandboxOptions,
} from '../../src/core/tools/sandbox';

/** A /proc/<pid>/stat line (proc(5)) with the fields the provider reads set, the rest as Linux prints them. */
function statLine(
  pid: number,
  comm: string,
  state: string,
  ppid: number,
  pgrp: number,
  times: [number, number, number, number],
): string {
  return `${pid} (${comm}) ${state} ${ppid} ${pgrp} ${pgrp} 34816 ${pgrp} 4194560 1205 0 0 0 ${times.join(' ')} 20 0 1 0 3556561 3133440 390 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0`;
}

describe('the process tree as /proc shows it (pure parsers)', () => {
  it('reads pid, state, parent, process group and the four CPU times', () => {
    const stat = parseProcStat(statLine(4242, 'node', 'R', 4200, 4242, [150, 20, 7, 3]));
    assert.deepEqual(stat, {
      pid: 4242,
      comm: 'node',
      state: 'R',
      ppid: 4200,
      pgrp: 4242,
      utime: 150,
      stime: 20,
      cutime: 7,
      cstime: 3,
    });
    assert.equal(cpuTicksOf(stat!), 180);
  });

  it('reads a command name with spaces and parentheses from the last ")"', () => {
    const stat = parseProcStat(statLine(7, 'a) (b c) R 1 2', 'S', 1, 7, [1, 2, 3, 4]));
    assert.equal(stat?.comm, 'a) (b c) R 1 2');
    assert.deepEqual([stat?.state, stat?.ppid, stat?.pgrp, stat?.utime], ['S', 1, 7, 1]);
  });

  it("reads a real line of this machine's kernel", () => {
    const line =
      '23254 (cat) R 23249 23242 21124 0 -1 4194304 77 0 0 0 0 0 0 0 20 0 1 0 3556561 3133440 390 18446744073709551615 94696232488960 94696232508841 140733013804480 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94696232524848 94696232526464 94697153765376 140733013809679 140733013809699 140733013809699 140733013811179 0\n';
    assert.deepEqual(parseProcStat(line), {
      pid: 23254,
      comm: 'cat',
      state: 'R',
      ppid: 23249,
      pgrp: 23242,
      utime: 0,
      stime: 0,
      cutime: 0,
      cstime: 0,
    });
  });

  it('refuses what is not a stat line', () => {
    for (const bad of [
      '',
      'garbage',
      '12 cat R 1 2',
      '12 (cat) R 1',
      'x (cat) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15',
      '12 (cat) 7 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15',
      statLine(5, 'sh', 'S', 1, 5, [1, -2, 3, 4]),
      '-3 (sh) S 1 5 5 0 5 0 0 0 0 0 1 2 3 4 20 0',
    ]) {
      assert.equal(parseProcStat(bad), undefined, JSON.stringify(bad));
    }
  });

  it("sums a group's CPU in ms (zombies included, other groups not) and lists its live members (zombies not)", () => {
    const stats = [
      parseProcStat(statLine(10, 'sh', 'S', 1, 10, [10, 5, 50, 5]))!,
      parseProcStat(statLine(11, 'node', 'R', 10, 10, [200, 30, 0, 0]))!,
      parseProcStat(statLine(12, 'sleep', 'Z', 10, 10, [1, 1, 0, 0]))!,
      parseProcStat(statLine(20, 'other', 'R', 1, 20, [999, 999, 0, 0]))!,
    ];
    assert.equal(groupCpuMs(stats, 10, 100), (70 + 230 + 2) * 10);
    assert.equal(groupCpuMs(stats, 10, 1000), 302);
    assert.deepEqual(
      liveMembers(stats, 10).map((s) => s.pid),
      [10, 11],
    );
    assert.deepEqual(liveMembers(stats, 99), []);
  });
});

describe("the process provider's sandbox plan (network and privilege policy)", () => {
  const policy = (p: Partial<ExecutionPolicy>): ExecutionPolicy => ({
    ...DEFAULT_EXECUTION_POLICY,
    privilegeLevel: 'DEFAULT',
    ...p,
  });
  const here: SandboxOptions = {
    acceptUnenforcedNetworkPolicy: false,
    bwrap: '/usr/bin/bwrap',
    unshare: '/usr/bin/unshare',
    prlimit: '/usr/bin/prlimit',
    env: '/usr/bin/env',
  };
  const confine: Confinement = { worktree: '/nonexistent-sw4rm/wt', hide: [], cwd: '/nonexistent-sw4rm/wt' };
  /** The plan with bubblewrap's confinement, as the provider asks for DENY_ALL. */
  const plan = (
    argv: readonly string[],
    p: ExecutionPolicy,
    options: SandboxOptions = here,
    env: Record<string, string> = {},
  ) => sandboxPlan(argv, p, options, env, confine);
  const unshareOnly: SandboxOptions = { ...here, bwrap: undefined };
  const refusal = (fn: () => unknown): ToolCallError => {
    try {
      fn();
    } catch (error) {
      assert.ok(error instanceof ToolCallError);
      return error;
    }
    assert.fail('refused expected');
  };
  const bwrapPrefix = bwrapArgs('/usr/bin/bwrap', confine, unixSocketSeccomp() !== undefined);

  it('DENY_ALL (the default) runs under bubblewrap: every namespace new, the worktree the only place it writes', () => {
    const deny = plan(['make'], policy({}));
    assert.deepEqual(deny.argv, [...bwrapPrefix, '/usr/bin/env', '-i', 'make']);
    assert.deepEqual(deny.argv.slice(0, 4), ['/usr/bin/bwrap', '--unshare-all', '--die-with-parent', '--new-session']);
    assert.ok(deny.networkEnforced);
    assert.deepEqual(deny.env, {});
  });

  it("starts the wrappers by absolute path with an empty environment; the command's variables are applied inside by env -i", () => {
    const withEnv = plan(['make', 'all'], policy({}), here, {
      PATH: '/evil:/usr/bin',
      LD_PRELOAD: '/evil/x.so',
      A: 'b=c',
    });
    assert.deepEqual(withEnv.argv, [
      ...bwrapPrefix,
      '/usr/bin/env',
      '-i',
      'PATH=/evil:/usr/bin',
      'LD_PRELOAD=/evil/x.so',
      'A=b=c',
      'make',
      'all',
    ]);
    assert.deepEqual(withEnv.env, {}, "bubblewrap never sees the caller's PATH or LD_PRELOAD");
    assert.equal(refusal(() => plan(['A=b'], policy({}))).code, 'VALIDATION_ERROR');
    const open = sandboxPlan(['make'], policy({ networkPolicy: 'FULL_ACCESS' }), here, { PATH: '/usr/bin' });
    assert.deepEqual(
      open,
      { argv: ['make'], env: { PATH: '/usr/bin' }, networkEnforced: true },
      'no wrapper: spawned directly',
    );
  });

  it("resolves the wrappers on the coordinator's PATH, absolute folders only", async () => {
    assert.equal(await resolveTool('env', 'relative/bin:.:/usr/bin'), '/usr/bin/env');
    assert.equal(await resolveTool('no-such-tool-sw4rm', '.'), undefined);
  });

  it('DENY_ALL without bubblewrap is refused (unshare alone leaves UNIX sockets and the shared .git reachable), or runs under unshare, unenforced, when accepted', () => {
    const error = refusal(() => sandboxPlan(['make'], policy({}), unshareOnly));
    assert.equal(error.code, 'PERMISSION_DENIED');
    assert.equal(
      error.message,
      'network_policy DENY_ALL cannot be enforced here (no bubblewrap: UNIX sockets and the shared .git would be reachable): enable sw4rm.tools.process.acceptUnenforcedNetworkPolicy to run without it',
    );
    assert.equal(
      refusal(() => sandboxPlan(['make'], policy({}), here)).code,
      'PERMISSION_DENIED',
      'bubblewrap without a confinement is not DENY_ALL either',
    );
    assert.deepEqual(sandboxPlan(['make'], policy({}), { ...unshareOnly, acceptUnenforcedNetworkPolicy: true }), {
      argv: [
        '/usr/bin/unshare',
        '--user',
        '--map-root-user',
        '--net',
        '--pid',
        '--fork',
        '--kill-child',
        '--',
        '/usr/bin/env',
        '-i',
        'make',
      ],
      env: {},
      networkEnforced: false,
    });
  });

  it('DENY_ALL without any namespace is refused with the reason and the setting, or runs unenforced when accepted', () => {
    const none: SandboxOptions = { ...unshareOnly, unshare: undefined };
    const error = refusal(() => sandboxPlan(['make'], policy({}), none));
    assert.equal(error.code, 'PERMISSION_DENIED');
    assert.equal(
      error.message,
      'network_policy DENY_ALL cannot be enforced here (no unprivileged network namespaces): enable sw4rm.tools.process.acceptUnenforcedNetworkPolicy to run without it',
    );
    assert.deepEqual(sandboxPlan(['make'], policy({}), { ...none, acceptUnenforcedNetworkPolicy: true }), {
      argv: ['make'],
      env: {},
      networkEnforced: false,
    });
  });

  it('EGRESS_RESTRICTED is never enforced here: refused, or unenforced when accepted', () => {
    assert.equal(
      refusal(() => sandboxPlan(['make'], policy({ networkPolicy: 'EGRESS_RESTRICTED' }), here)).code,
      'PERMISSION_DENIED',
    );
    assert.deepEqual(
      sandboxPlan(['make'], policy({ networkPolicy: 'EGRESS_RESTRICTED' }), {
        ...here,
        acceptUnenforcedNetworkPolicy: true,
      }),
      { argv: ['make'], env: {}, networkEnforced: false },
    );
  });

  it('EGRESS_UNRESTRICTED and FULL_ACCESS run without a namespace', () => {
    for (const networkPolicy of ['EGRESS_UNRESTRICTED', 'FULL_ACCESS'] as const) {
      assert.deepEqual(sandboxPlan(['make'], policy({ networkPolicy }), here), {
        argv: ['make'],
        env: {},
        networkEnforced: true,
      });
    }
  });

  it('MINIMAL spawns nothing; ELEVATED and PRIVILEGED run like DEFAULT', () => {
    const error = refusal(() => plan(['make'], policy({ privilegeLevel: 'MINIMAL' })));
    assert.deepEqual(
      [error.code, error.kind, error.message],
      ['PERMISSION_DENIED', 'permission_denied', 'run_command spawns processes: ask for privilege_level DEFAULT'],
    );
    const plain = plan(['make'], policy({}));
    for (const privilegeLevel of ['ELEVATED', 'PRIVILEGED'] as const)
      assert.deepEqual(plan(['make'], policy({ privilegeLevel })), plain);
  });

  it('budget_cpu_ms adds RLIMIT_CPU a second above the budget (whole seconds) as a backstop, when prlimit exists', () => {
    assert.deepEqual(
      sandboxPlan(['make'], policy({ budgetCpuMs: 300, networkPolicy: 'EGRESS_UNRESTRICTED' }), here).argv,
      ['/usr/bin/prlimit', '--cpu=2', '--', '/usr/bin/env', '-i', 'make'],
    );
    assert.deepEqual(plan(['make'], policy({ budgetCpuMs: 2500 })).argv.slice(0, 4), [
      '/usr/bin/prlimit',
      '--cpu=4',
      '--',
      '/usr/bin/bwrap',
    ]);
    assert.deepEqual(
      sandboxPlan(['make'], policy({ budgetCpuMs: 300, networkPolicy: 'EGRESS_UNRESTRICTED' }), {
        ...here,
        prlimit: undefined,
      }).argv,
      ['make'],
    );
  });
});

describe("the process provider's child environment", () => {
  it("keeps PATH, HOME and LANG of the coordinator, nothing else, then adds the caller's variables", () => {
    const env = childEnvironment(
      { MY: '1' },
      { PATH: '/bin', HOME: '/h', LANG: 'C.UTF-8', GIT_DIR: '/x', SW4RM_TOKEN: 't', SECRET: 's' },
    );
    assert.deepEqual(env, { PATH: '/bin', HOME: '/h', LANG: 'C.UTF-8', MY: '1' });
  });
});
