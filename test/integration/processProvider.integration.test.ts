import { Ajv } from 'ajv';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { ManualClock, systemClock, type Clock } from '../../src/core/clock';
import {
  DEFAULT_EXECUTION_POLICY,
  ToolCallError,
  type ExecutionPolicy,
  type ToolRequest,
} from '../../src/core/tools/model';
import { ProcessProvider, PROCESS_LIMITS, type RunResult } from '../../src/core/tools/processProvider';
import { processGroupMembers, readAllProcStats } from '../../src/core/tools/processTree';
import { probeNetworkNamespace, probeSandboxTools } from '../../src/core/tools/sandbox';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface Frame {
  stream: 'stdout' | 'stderr';
  text: string;
}

/** A call as the engine would hand it: policy DEFAULT privilege (MINIMAL refuses), the rest as given. */
function call(
  provider: ProcessProvider,
  worktree: string,
  args: Record<string, unknown>,
  options: {
    policy?: Partial<ExecutionPolicy>;
    stream?: boolean;
    controller?: AbortController;
    frames?: Frame[];
  } = {},
): Promise<RunResult> {
  const controller = options.controller ?? new AbortController();
  const request: ToolRequest = {
    callId: 'call-1',
    toolName: 'run_command',
    args,
    callerAgentId: 'agent-a',
    worktreePath: worktree,
    policy: {
      ...DEFAULT_EXECUTION_POLICY,
      privilegeLevel: 'DEFAULT',
      networkPolicy: 'EGRESS_UNRESTRICTED',
      ...options.policy,
    },
    stream: options.stream ?? false,
    attempt: 1,
    signal: controller.signal,
    emit: (data) => options.frames?.push(JSON.parse(data.toString('utf8')) as Frame),
    ctx: { correlationId: 'call-1' },
  };
  return provider.call(request) as Promise<RunResult>;
}

async function refusal(promise: Promise<unknown>): Promise<ToolCallError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ToolCallError, `a ToolCallError, not ${String(error)}`);
    return error;
  }
  assert.fail('the call was expected to fail');
}

/** The result matches run_command's output schema as the engine checks it (strict ajv): a mismatch would fail the call. */
function conforms(result: RunResult): void {
  const validate = new Ajv({ strict: true }).compile(enabled().describe()[0].outputSchema);
  assert.ok(validate(result), JSON.stringify(validate.errors));
}

/** Live processes with their command lines (to find loops left behind). */
async function readAllProcStatsNow(): Promise<
  { pid: number; ppid: number; comm: string; state: string; cmd: string }[]
> {
  const out = [];
  for (const stat of await readAllProcStats()) {
    let cmd = '';
    try {
      cmd = fs.readFileSync(`/proc/${stat.pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    out.push({ pid: stat.pid, ppid: stat.ppid, comm: stat.comm, state: stat.state, cmd });
  }
  return out;
}

function enabled(clock: Clock = systemClock, acceptUnenforcedNetworkPolicy = false): ProcessProvider {
  return new ProcessProvider({ enabled: true, acceptUnenforcedNetworkPolicy }, clock);
}

/**
 * The built-in `process` provider against real child processes (issue 17, part 5): output as frames, exit codes, the CPU
 * budget on a busy loop, the wall budget and the kill grace on the provider's ManualClock, cancel killing the whole
 * process group, DENY_ALL in a network namespace, MINIMAL refused, a disabled provider unavailable.
 */
describe('the process provider (real child processes)', function () {
  this.timeout(60_000);
  let worktree: string;

  beforeEach(() => {
    worktree = makeTempDir('sw4rm-process-');
    fs.mkdirSync(path.join(worktree, 'sub'));
  });
  afterEach(() => removeTempDir(worktree));

  it('describes run_command as the contract says', () => {
    const [tool] = enabled().describe();
    assert.equal(tool.name, 'run_command');
    assert.deepEqual(
      [tool.needsWorktree, tool.idempotent, tool.sideEffects, tool.maxConcurrency, tool.defaultTimeoutS],
      [true, false, 'process', 4, 600],
    );
  });

  it('streams stdout and stderr as frames and answers the exit code, in the worktree, with a clean environment', async () => {
    const frames: Frame[] = [];
    const previous = process.env.SW4RM_SECRET_FOR_TEST;
    process.env.SW4RM_SECRET_FOR_TEST = 'leaked';
    try {
      const result = await call(
        enabled(),
        worktree,
        {
          argv: [
            'sh',
            '-c',
            'pwd; echo "v=$MY_VAR s=${SW4RM_SECRET_FOR_TEST:-none}"; echo oops >&2; read line; echo "in=$line"; exit 3',
          ],
          cwd: 'sub',
          env: { MY_VAR: 'hello' },
          stdin: 'typed\n',
        },
        { stream: true, frames },
      );
      assert.equal(result.exit_code, 3);
      assert.equal(result.signal, null);
      const stdout = frames
        .filter((f) => f.stream === 'stdout')
        .map((f) => f.text)
        .join('');
      const stderr = frames
        .filter((f) => f.stream === 'stderr')
        .map((f) => f.text)
        .join('');
      assert.equal(stdout, `${fs.realpathSync(path.join(worktree, 'sub'))}\nv=hello s=none\nin=typed\n`);
      assert.equal(stderr, 'oops\n');
      assert.equal(result.stdout_bytes, Buffer.byteLength(stdout));
      assert.equal(result.stderr_bytes, 5);
      assert.equal(result.stdout, undefined, 'streamed output is not repeated in the result');
      conforms(result);
    } finally {
      if (previous === undefined) delete process.env.SW4RM_SECRET_FOR_TEST;
      else process.env.SW4RM_SECRET_FOR_TEST = previous;
    }
  });

  it('without a stream, answers the output in the result, capped with a truncated flag; frames of 64 KiB at most', async () => {
    const small = await call(enabled(), worktree, { argv: ['node', '-e', 'process.stdout.write("x".repeat(10))'] });
    assert.deepEqual([small.exit_code, small.stdout, small.stderr, small.truncated], [0, 'x'.repeat(10), '', false]);
    conforms(small);
    const big = await call(enabled(), worktree, {
      argv: ['node', '-e', `process.stdout.write("é".repeat(${PROCESS_LIMITS.maxResultOutputBytes}))`],
    });
    assert.equal(big.truncated, true);
    assert.equal(big.stdout_bytes, 2 * PROCESS_LIMITS.maxResultOutputBytes);
    assert.equal(Buffer.byteLength(big.stdout!), PROCESS_LIMITS.maxResultOutputBytes);
    const frames: Frame[] = [];
    const streamed = await call(
      enabled(),
      worktree,
      { argv: ['node', '-e', 'process.stdout.write("é".repeat(100000))'] },
      { stream: true, frames },
    );
    assert.equal(streamed.stdout_bytes, 200_000);
    assert.ok(frames.length >= 4, `${frames.length} frames`);
    assert.ok(frames.every((f) => Buffer.byteLength(f.text) <= PROCESS_LIMITS.maxFrameTextBytes));
    assert.equal(frames.map((f) => f.text).join(''), 'é'.repeat(100000), 'no character split between frames');
  });

  it('stops a busy loop at budget_cpu_ms with CPU_BUDGET_EXCEEDED', async () => {
    const error = await refusal(
      call(enabled(), worktree, { argv: ['node', '-e', 'for(;;){}'] }, { policy: { budgetCpuMs: 300 } }),
    );
    assert.equal(error.code, 'CPU_BUDGET_EXCEEDED');
    assert.equal(error.kind, 'resource_exhausted');
    // The sampler stopped it, not the RLIMIT_CPU backstop (2 s for this budget).
    const used = Number(/used (\d+) ms of CPU/.exec(error.message)?.[1]);
    assert.ok(used >= 300 && used < 1000, error.message);
  });

  it('counts the CPU of the whole process group (two busy children of a shell) and leaves none of them running', async () => {
    const frames: Frame[] = [];
    const busy = 'node -e "for(;;){}"';
    const error = await refusal(
      call(
        enabled(),
        worktree,
        { argv: ['sh', '-c', `echo $$; ${busy} & ${busy} & wait`] },
        { stream: true, frames, policy: { budgetCpuMs: 600 } },
      ),
    );
    assert.equal(error.code, 'CPU_BUDGET_EXCEEDED');
    const pgid = Number(frames[0].text.trim());
    assert.deepEqual(await processGroupMembers(pgid), []);
  });

  it('counts and kills every descendant: 4 busy loops that setsid out of the group stop within budget_cpu_ms + margin', async function () {
    if (!fs.existsSync('/usr/bin/setsid')) this.skip();
    const frames: Frame[] = [];
    const busy = 'setsid node -e "for(;;){}"';
    const started = Date.now();
    const error = await refusal(
      call(
        enabled(),
        worktree,
        { argv: ['sh', '-c', `${busy} & ${busy} & ${busy} & ${busy} & wait`] },
        { stream: true, frames, policy: { budgetCpuMs: 300 } },
      ),
    );
    assert.equal(error.code, 'CPU_BUDGET_EXCEEDED');
    const used = Number(/used (\d+) ms of CPU/.exec(error.message)?.[1]);
    // Margin: 4 loops on 2 cores over a sampler period or two, plus node start-up counted; before, 9.5 s.
    console.log(
      `      4 setsid busy loops: ${used} ms of CPU reported against 300 ms, ${Date.now() - started} ms wall`,
    );
    assert.ok(used < 1500, error.message);
    const left = (await readAllProcStatsNow()).filter(
      (s) => s.comm === 'node' && s.state !== 'Z' && s.ppid !== process.pid && s.cmd.includes('for(;;){}'),
    );
    assert.deepEqual(
      left.map((s) => s.pid),
      [],
      'no loop left running',
    );
  });

  it("stops a sleep at budget_wall_ms (the provider's Clock) with WALL_TIMEOUT; SIGKILL follows SIGTERM after 2 s", async () => {
    const clock = new ManualClock();
    const frames: Frame[] = [];
    const running = call(
      enabled(clock),
      worktree,
      { argv: ['sh', '-c', 'echo started; exec sleep 30'] },
      { stream: true, frames, policy: { budgetWallMs: 300 } },
    );
    await pollUntil('the command to start', () => frames.length > 0 || undefined);
    clock.advance(300);
    const error = await refusal(running);
    assert.equal(error.code, 'WALL_TIMEOUT');

    // A command that ignores SIGTERM is killed at the end of the grace.
    const stubbornFrames: Frame[] = [];
    const controller = new AbortController();
    const stubborn = call(
      enabled(clock),
      worktree,
      { argv: ['sh', '-c', 'trap "" TERM; echo $$; sleep 30; echo survived'] },
      { stream: true, frames: stubbornFrames, controller },
    );
    const pgid = Number(await pollUntil('the pid', () => stubbornFrames[0]?.text.trim() || undefined));
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(
      (await processGroupMembers(pgid)).length > 0,
      'SIGTERM is ignored: the group still runs during the grace',
    );
    clock.advance(PROCESS_LIMITS.killGraceMs);
    const result = await stubborn;
    assert.equal(result.cancelled, true);
    assert.equal(result.signal, 'SIGKILL');
    assert.deepEqual(await processGroupMembers(pgid), []);
  });

  it('cancel kills the whole process tree and answers cancelled after it is gone', async () => {
    const frames: Frame[] = [];
    const controller = new AbortController();
    const running = call(
      enabled(),
      worktree,
      { argv: ['sh', '-c', 'echo $$; sleep 60 & sleep 60'] },
      { stream: true, frames, controller },
    );
    const pgid = Number(await pollUntil('the pid', () => frames[0]?.text.trim() || undefined));
    await pollUntil('both sleeps', async () => (await processGroupMembers(pgid)).length === 3 || undefined);
    controller.abort();
    const result = await running;
    assert.equal(result.cancelled, true);
    conforms(result);
    assert.equal(result.stdout_bytes, `${pgid}\n`.length);
    assert.deepEqual(await processGroupMembers(pgid), [], 'no process of the group is left');
  });

  it('dispose() SIGKILLs every live group at once (a stopping coordinator leaves no child; no kill-grace timer needed)', async () => {
    const clock = new ManualClock(0); // never advanced: only dispose() can kill
    const provider = enabled(clock);
    const frames: Frame[] = [];
    const running = call(
      provider,
      worktree,
      { argv: ['sh', '-c', 'echo $$; sleep 60 & sleep 60'] },
      { stream: true, frames },
    );
    const pgid = Number(await pollUntil('the pid', () => frames[0]?.text.trim() || undefined));
    await pollUntil('both sleeps', async () => (await processGroupMembers(pgid)).length === 3 || undefined);
    provider.dispose();
    const result = await running;
    assert.equal(result.signal, 'SIGKILL');
    assert.deepEqual(await processGroupMembers(pgid), [], 'no process of the group is left');
    assert.equal(provider.available(), false, 'takes no more calls');
  });

  it('a cancel that lands while the call is still getting ready (during its /proc read) starts nothing', async () => {
    const controller = new AbortController();
    const original = fs.promises.readdir;
    (fs.promises as { readdir: unknown }).readdir = async (...args: unknown[]) => {
      if (args[0] === '/proc') controller.abort(new ToolCallError('cancelled', 'CANCELLED', 'cancelled by agent-a'));
      return (original as (...a: unknown[]) => Promise<unknown>).apply(fs.promises, args);
    };
    try {
      const error = await refusal(call(enabled(), worktree, { argv: ['sh', '-c', 'touch ran'] }, { controller }));
      assert.equal(error.code, 'CANCELLED');
    } finally {
      fs.promises.readdir = original;
    }
    assert.equal(fs.existsSync(path.join(worktree, 'ran')), false, 'the command never ran');
  });

  it('kills what the command left running in its group when it exits', async () => {
    const result = await call(enabled(), worktree, { argv: ['sh', '-c', 'sleep 60 > /dev/null 2>&1 & echo $$'] });
    const pgid = Number(result.stdout!.trim());
    assert.equal(result.exit_code, 0);
    assert.deepEqual(await processGroupMembers(pgid), []);
  });

  it('DENY_ALL runs in a network namespace: a local TCP server is unreachable inside, reachable with EGRESS_UNRESTRICTED', async function () {
    if (!(await probeNetworkNamespace())) this.skip();
    const server = net.createServer((socket) => {
      socket.on('error', () => {
        /* the client exits at once */
      });
      socket.end('hi');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const connect = [
      'node',
      '-e',
      `require("net").connect(${port}, "127.0.0.1").on("connect", () => { console.log("connected"); process.exit(0) }).on("error", (e) => { console.log(e.code); process.exit(7) })`,
    ];
    try {
      const denied = await call(enabled(), worktree, { argv: connect }, { policy: { networkPolicy: 'DENY_ALL' } });
      assert.equal(denied.exit_code, 7, denied.stdout);
      assert.equal(denied.network_enforced, true);
      const open = await call(
        enabled(),
        worktree,
        { argv: connect },
        { policy: { networkPolicy: 'EGRESS_UNRESTRICTED' } },
      );
      assert.deepEqual([open.exit_code, open.stdout], [0, 'connected\n']);
    } finally {
      server.close();
    }
  });

  it("DENY_ALL is not bypassed by a fake unshare first on the caller's PATH, nor an LD_PRELOAD: the wrappers are absolute and see no caller variable", async function () {
    if (!(await probeNetworkNamespace())) this.skip();
    const server = net.createServer((socket) => {
      socket.on('error', () => {
        /* the client exits at once */
      });
      socket.end('hi');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const bin = path.join(worktree, 'fakebin');
    await fs.promises.mkdir(bin, { recursive: true });
    // The fake drops unshare's options and runs the command with the network.
    await fs.promises.writeFile(
      path.join(bin, 'unshare'),
      '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done; shift; echo FAKE >&2; exec "$@"\n',
      { mode: 0o755 },
    );
    await fs.promises.writeFile(
      path.join(bin, 'prlimit'),
      '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done; shift; echo FAKE >&2; exec "$@"\n',
      { mode: 0o755 },
    );
    const connect = [
      'node',
      '-e',
      `require("net").connect(${port}, "127.0.0.1").on("connect", () => { console.log("connected"); process.exit(0) }).on("error", (e) => { console.log(e.code); process.exit(7) })`,
    ];
    try {
      const env = { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`, LD_PRELOAD: path.join(bin, 'none.so') };
      const denied = await call(
        enabled(),
        worktree,
        { argv: connect, env },
        { policy: { networkPolicy: 'DENY_ALL', budgetCpuMs: 60_000 } },
      );
      assert.equal(denied.exit_code, 7, `${denied.stdout} ${denied.stderr}`);
      assert.doesNotMatch(denied.stderr ?? '', /FAKE/);
      assert.equal(denied.network_enforced, true);
    } finally {
      server.close();
      await fs.promises.rm(bin, { recursive: true, force: true });
    }
  });

  it('DENY_ALL runs in a PID namespace too: a process that left the group (GNU timeout does setpgid) dies with the call', async function () {
    if (!(await probeNetworkNamespace())) this.skip();
    const marker = `${600 + Math.floor(Math.random() * 1000)}.5`;
    const escaped = async (): Promise<number[]> => {
      const found: number[] = [];
      for (const name of await fs.promises.readdir('/proc')) {
        if (!/^\d+$/.test(name)) continue;
        const cmdline = await fs.promises.readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
        const state = await fs.promises.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
        if (cmdline === `sleep\0${marker}\0` && !/\) [ZX] /.test(state)) found.push(Number(name));
      }
      return found;
    };
    try {
      const controller = new AbortController();
      const running = call(
        enabled(),
        worktree,
        { argv: ['sh', '-c', `timeout 600 sleep ${marker}`] },
        { policy: { networkPolicy: 'DENY_ALL' }, controller },
      );
      await pollUntil('the sleep under timeout', async () => ((await escaped()).length > 0 ? true : undefined));
      controller.abort(new ToolCallError('cancelled', 'CANCELLED', 'cancelled by agent-a'));
      assert.equal((await refusal(running)).code, 'CANCELLED');
      assert.deepEqual(
        await pollUntil('the escaped sleep gone', async () => ((await escaped()).length === 0 ? true : undefined)),
        true,
      );
    } finally {
      for (const pid of await escaped()) process.kill(pid, 'SIGKILL');
    }
  });

  it('DENY_ALL reaches no filesystem UNIX socket: one beside the worktree, one under HOME, one in a folder the coordinator runs in', async function () {
    // Only bubblewrap's seccomp filter closes UNIX sockets; the unshare fallback does not (README, "Confinement").
    if ((await probeSandboxTools()).bwrap === undefined) this.skip();
    const homeDir = fs.mkdtempSync(path.join(os.homedir(), '.sw4rm-sock-'));
    const cwdDir = fs.mkdtempSync(path.join(process.cwd(), '.sw4rm-sock-'));
    const places = [
      path.join(path.dirname(worktree), `sw4rm-${process.pid}.sock`),
      path.join(homeDir, 's.sock'),
      path.join(cwdDir, 's.sock'),
    ];
    const servers = await Promise.all(
      places.map(
        (place) =>
          new Promise<net.Server>((resolve) => {
            const server = net.createServer((socket) => {
              socket.on('error', () => {
                /* client gone */
              });
              socket.end('hi');
            });
            server.listen(place, () => resolve(server));
          }),
      ),
    );
    try {
      for (const place of places) {
        const connect = [
          'node',
          '-e',
          `require("net").connect(${JSON.stringify(place)}).on("connect", () => { console.log("connected"); process.exit(0) }).on("error", (e) => { console.log(e.code); process.exit(7) })`,
        ];
        const open = await call(
          enabled(),
          worktree,
          { argv: connect },
          { policy: { networkPolicy: 'EGRESS_UNRESTRICTED' } },
        );
        assert.deepEqual([open.exit_code, open.stdout], [0, 'connected\n'], `reachable outside the sandbox: ${place}`);
        const denied = await call(enabled(), worktree, { argv: connect }, { policy: { networkPolicy: 'DENY_ALL' } });
        console.log(`      DENY_ALL connect ${place}: ${String(denied.stdout).trim()}`);
        assert.equal(denied.exit_code, 7, `${place}: ${denied.stdout}`);
      }
    } finally {
      for (const server of servers) server.close();
      fs.rmSync(homeDir, { recursive: true, force: true });
      fs.rmSync(cwdDir, { recursive: true, force: true });
    }
  });

  it("DENY_ALL never sees the coordinator's data folder (hiddenFolders), outside the worktree or inside it", async function () {
    if ((await probeSandboxTools()).bwrap === undefined) this.skip();
    // Neither under /tmp nor HOME (both are hidden anyway): a folder the coordinator runs in.
    const outside = fs.mkdtempSync(path.join(process.cwd(), '.sw4rm-data-'));
    const inside = path.join(worktree, '.sw4rm');
    fs.mkdirSync(inside, { recursive: true });
    try {
      for (const dir of [outside, inside]) fs.writeFileSync(path.join(dir, 'token'), 'secret\n');
      const provider = new ProcessProvider(
        { enabled: true, acceptUnenforcedNetworkPolicy: false, hiddenFolders: [outside, inside] },
        systemClock,
      );
      const read = {
        argv: [
          'sh',
          '-c',
          `cat ${JSON.stringify(path.join(outside, 'token'))} ${JSON.stringify(path.join(inside, 'token'))}; ls -A ${JSON.stringify(outside)} ${JSON.stringify(inside)}`,
        ],
      };
      const open = await call(provider, worktree, read, { policy: { networkPolicy: 'EGRESS_UNRESTRICTED' } });
      assert.match(String(open.stdout), /^secret\nsecret\n/, 'readable without the sandbox');
      const denied = await call(provider, worktree, read, { policy: { networkPolicy: 'DENY_ALL' } });
      assert.doesNotMatch(String(denied.stdout), /secret|token/, String(denied.stdout));
      assert.match(String(denied.stderr), /No such file/, String(denied.stderr));
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
      fs.rmSync(inside, { recursive: true, force: true });
    }
  });

  it("DENY_ALL cannot write the repository's shared git directory (config, hooks) from a linked worktree; git still works in it", async function () {
    if ((await probeSandboxTools()).bwrap === undefined) this.skip();
    const repo = path.join(worktree, 'repo');
    const linked = path.join(worktree, 'linked');
    const git = (cwd: string, ...a: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { cwd, stdio: 'pipe' }).toString();
    fs.mkdirSync(repo);
    git(repo, 'init', '-q');
    fs.writeFileSync(path.join(repo, 'a.txt'), 'a\n');
    git(repo, 'add', 'a.txt');
    git(repo, 'commit', '-qm', 'a');
    git(repo, 'worktree', 'add', '-q', linked, '-b', 'w');
    const config = path.join(repo, '.git', 'config');
    const before = fs.readFileSync(config, 'utf8');
    const attack = [
      'sh',
      '-c',
      `git config core.fsmonitor "touch /tmp/pwned"; echo '[core] hooksPath = /tmp' >> ${JSON.stringify(config)}; mkdir -p ${JSON.stringify(path.join(repo, '.git', 'hooks'))} && echo x > ${JSON.stringify(path.join(repo, '.git', 'hooks', 'post-checkout'))}; echo b > b.txt; git add b.txt && git status --short`,
    ];
    const denied = await call(enabled(), linked, { argv: attack }, { policy: { networkPolicy: 'DENY_ALL' } });
    console.log(
      `      DENY_ALL attack on .git: exit ${denied.exit_code}, stderr ${JSON.stringify(String(denied.stderr).slice(0, 300))}`,
    );
    assert.equal(fs.readFileSync(config, 'utf8'), before, 'the shared .git/config is unchanged');
    assert.equal(fs.existsSync(path.join(repo, '.git', 'hooks', 'post-checkout')), false, 'no hook planted');
    assert.match(String(denied.stdout), /A {2}b\.txt/, "the worktree's own index is writable: git add works");
    // The same attack without the sandbox writes the config (what DENY_ALL must prevent).
    const open = await call(enabled(), linked, { argv: attack }, { policy: { networkPolicy: 'EGRESS_UNRESTRICTED' } });
    assert.equal(open.exit_code, 0);
    assert.notEqual(fs.readFileSync(config, 'utf8'), before);
  });

  /** A repository with a linked worktree on an agent's branch (sw4rm/w), as the binding makes it. */
  function linkedWorktree(): { repo: string; linked: string; git: (cwd: string, ...a: string[]) => string } {
    const repo = path.join(worktree, 'repo');
    const linked = path.join(worktree, 'linked');
    const git = (cwd: string, ...a: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { cwd, stdio: 'pipe' }).toString();
    fs.mkdirSync(repo);
    git(repo, 'init', '-q', '-b', 'main');
    fs.writeFileSync(path.join(repo, 'a.txt'), 'a\n');
    git(repo, 'add', 'a.txt');
    git(repo, 'commit', '-qm', 'a');
    git(repo, 'tag', 'v1');
    git(repo, 'worktree', 'add', '-q', linked, '-b', 'sw4rm/w');
    return { repo, linked, git };
  }

  it('DENY_ALL cannot move main, tags or other refs of the shared git directory, nor rewrite its .git; it commits on its own branch', async function () {
    if ((await probeSandboxTools()).bwrap === undefined) this.skip();
    const { repo, linked, git } = linkedWorktree();
    const main = git(repo, 'rev-parse', 'main').trim();
    const dotGit = fs.readFileSync(path.join(linked, '.git'), 'utf8');
    const attack = [
      'sh',
      '-c',
      [
        'echo b > b.txt',
        'git add b.txt',
        'git -c user.name=t -c user.email=t@t commit -qm b',
        'c=$(git rev-parse HEAD)',
        'git update-ref refs/heads/main "$c"; echo "main:$?"',
        'git update-ref refs/tags/v1 "$c"; echo "tag:$?"',
        'git update-ref refs/sw4rm/snapshots/w/1 "$c"; echo "snapshot:$?"',
        `echo "gitdir: ${repo}/.git" > .git; echo "dotgit:$?"`,
      ].join('; '),
    ];
    const denied = await call(enabled(), linked, { argv: attack }, { policy: { networkPolicy: 'DENY_ALL' } });
    console.log(`      DENY_ALL on shared refs: ${JSON.stringify(String(denied.stdout))}`);
    assert.match(String(denied.stdout), /main:[1-9]/);
    assert.match(String(denied.stdout), /tag:[1-9]/);
    assert.match(String(denied.stdout), /snapshot:[1-9]/);
    assert.match(String(denied.stdout), /dotgit:[1-9]/);
    assert.equal(git(repo, 'rev-parse', 'main').trim(), main, 'main has not moved');
    assert.equal(git(repo, 'rev-parse', 'v1').trim(), main, 'the tag has not moved');
    assert.equal(fs.readFileSync(path.join(linked, '.git'), 'utf8'), dotGit, "the worktree's .git is unchanged");
    assert.notEqual(git(repo, 'rev-parse', 'sw4rm/w').trim(), main, "the agent's own branch took its commit");
  });

  it('a .git rewritten to name another folder (outside the sandbox) is not believed: DENY_ALL is refused, that folder never bound', async function () {
    if ((await probeSandboxTools()).bwrap === undefined) this.skip();
    const { linked } = linkedWorktree();
    // A folder of the user's that a rewritten .git names (its commondir and gitdir as an attacker would lay them out).
    const outside = fs.mkdtempSync(path.join(process.cwd(), '.sw4rm-outside-'));
    try {
      fs.writeFileSync(path.join(outside, 'secret'), 'secret\n');
      fs.writeFileSync(path.join(outside, 'commondir'), '..\n');
      fs.writeFileSync(path.join(linked, '.git'), `gitdir: ${outside}\n`);
      const read = {
        argv: [
          'sh',
          '-c',
          `cat ${JSON.stringify(path.join(outside, 'secret'))}; echo x >> ${JSON.stringify(path.join(outside, 'secret'))}`,
        ],
      };
      const refused = await refusal(call(enabled(), linked, read, { policy: { networkPolicy: 'DENY_ALL' } }));
      assert.equal(refused.code, 'PERMISSION_DENIED');
      assert.match(refused.message, /the worktree's \.git is not believed/);
      assert.equal(fs.readFileSync(path.join(outside, 'secret'), 'utf8'), 'secret\n', 'nothing ran');
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it('EGRESS_RESTRICTED is refused unless unenforced network policy is accepted (then the result says so)', async () => {
    const refused = await refusal(
      call(enabled(), worktree, { argv: ['true'] }, { policy: { networkPolicy: 'EGRESS_RESTRICTED' } }),
    );
    assert.equal(refused.code, 'PERMISSION_DENIED');
    assert.match(
      refused.message,
      /network_policy EGRESS_RESTRICTED cannot be enforced here .*sw4rm\.tools\.process\.acceptUnenforcedNetworkPolicy/,
    );
    const accepted = await call(
      enabled(systemClock, true),
      worktree,
      { argv: ['true'] },
      { policy: { networkPolicy: 'EGRESS_RESTRICTED' } },
    );
    assert.deepEqual([accepted.exit_code, accepted.network_enforced], [0, false]);
  });

  it('refuses privilege_level MINIMAL (no process spawning), GIT_*/SW4RM_* variables and a cwd outside the worktree', async () => {
    const minimal = await refusal(
      call(enabled(), worktree, { argv: ['true'] }, { policy: { privilegeLevel: 'MINIMAL' } }),
    );
    assert.deepEqual(
      [minimal.code, minimal.message],
      ['PERMISSION_DENIED', 'run_command spawns processes: ask for privilege_level DEFAULT'],
    );
    const elevated = await call(enabled(), worktree, { argv: ['true'] }, { policy: { privilegeLevel: 'ELEVATED' } });
    assert.equal(elevated.exit_code, 0, 'ELEVATED runs like DEFAULT');
    assert.equal(
      (await refusal(call(enabled(), worktree, { argv: ['true'], env: { GIT_DIR: '/x' } }))).code,
      'VALIDATION_ERROR',
    );
    assert.equal(
      (await refusal(call(enabled(), worktree, { argv: ['true'], env: { sw4rm_token: 'x' } }))).code,
      'VALIDATION_ERROR',
    );
    assert.equal(
      (await refusal(call(enabled(), worktree, { argv: ['true'], cwd: '../..' }))).code,
      'PERMISSION_DENIED',
    );
    assert.equal((await refusal(call(enabled(), worktree, { argv: ['true'], cwd: '/etc' }))).code, 'PERMISSION_DENIED');
  });

  it('a program that does not exist is NOT_FOUND, in a namespace or not; a path is looked up from cwd', async () => {
    for (const networkPolicy of ['DENY_ALL', 'EGRESS_UNRESTRICTED'] as const) {
      const error = await refusal(
        call(enabled(systemClock, true), worktree, { argv: ['no-such-program-sw4rm'] }, { policy: { networkPolicy } }),
      );
      assert.equal(error.code, 'NOT_FOUND', networkPolicy);
    }
    fs.writeFileSync(path.join(worktree, 'sub', 'hello.sh'), '#!/bin/sh\necho hello from $(basename "$PWD")\n', {
      mode: 0o755,
    });
    const result = await call(enabled(), worktree, { argv: ['./hello.sh'], cwd: 'sub' });
    assert.deepEqual([result.exit_code, result.stdout], [0, 'hello from sub\n']);
    assert.equal(
      (await refusal(call(enabled(), worktree, { argv: ['./hello.sh'] }))).code,
      'NOT_FOUND',
      'relative to cwd (the root here)',
    );
  });

  it('a disabled provider is unavailable and runs nothing', async () => {
    const disabled = new ProcessProvider({ enabled: false, acceptUnenforcedNetworkPolicy: false }, systemClock);
    assert.equal(disabled.available(), false);
    assert.equal(disabled.unavailableReason(), 'disabled: sw4rm.tools.process.enabled');
    const marker = path.join(worktree, 'ran');
    const error = await refusal(call(disabled, worktree, { argv: ['touch', marker] }));
    assert.equal(error.code, 'AGENT_UNAVAILABLE');
    assert.equal(fs.existsSync(marker), false);
  });
});
