// The coordinator's resident memory under large payloads, measured from outside (`npm run bench:memory`; README).
// Starts dist/cli.js (or BENCH_ROUTED_CLI) as a child process, samples its /proc/<pid>/status (VmRSS, VmHWM) every
// BENCH_MEMORY_SAMPLE_MS, and runs three loads in turn: the slow-consumer load (16 MB DATA messages to paused and to
// offline recipients until the router answers BUFFER_FULL), approval diffs of large tool inputs (the bridge's hook
// endpoint: Write / MultiEdit of 1 MiB files, a 4 MiB body) and HITL invocations with large diffs, and large
// CreateWorkflow definitions. Prints idle RSS, the peak under each load and the RSS after it settled, with PASS/MISS
// against BENCH_MEMORY_TARGET_MIB (256).
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { LOADER_OPTIONS } from '../src/server/protos';
import {
  canonicalProtos,
  createRoleClients,
  dataEnvelope,
  PROTOS_DIR,
  REPO_ROOT,
  type RoleClients,
  type StreamItem,
  unary,
} from './protocol';
import { stopChild } from './servers';

const MIB = 1024 * 1024;
const env = (name: string, fallback: number): number => {
  const value = process.env[name];
  return value === undefined || value === '' ? fallback : Number(value);
};
const CLI = process.env.BENCH_ROUTED_CLI ?? path.join(REPO_ROOT, 'dist', 'cli.js');
const TARGET_MIB = env('BENCH_MEMORY_TARGET_MIB', 256);
const SAMPLE_MS = env('BENCH_MEMORY_SAMPLE_MS', 50);
const PAUSED = env('BENCH_MEMORY_PAUSED', 3);
const OFFLINE = env('BENCH_MEMORY_OFFLINE', 3);
const CONCURRENCY = env('BENCH_MEMORY_CONCURRENCY', 4);
const MAX_MESSAGES = env('BENCH_MEMORY_MAX_MESSAGES', 160);
const PAYLOAD_BYTES = env('BENCH_MEMORY_PAYLOAD_BYTES', 16 * MIB - 4096);
const SETTLE_SECONDS = env('BENCH_MEMORY_SETTLE_SECONDS', 20);
const MEMORY_BUDGET_MIB = process.env.BENCH_MEMORY_BUDGET_MIB;

// ---------------------------------------------------------------------------------------------------------------
// The coordinator and its memory, from outside.

interface Coordinator {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly address: string;
  readonly bridgePort: number;
  readonly token: string;
  readonly dir: string;
  readonly repo: string;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.email=bench@sw4rm', '-c', 'user.name=bench', ...args], { cwd, stdio: 'ignore' });
}

async function startCoordinator(): Promise<Coordinator> {
  if (!fs.existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-bench-memory-'));
  const workspace = path.join(dir, 'workspace');
  const repo = path.join(workspace, 'app');
  fs.mkdirSync(repo, { recursive: true });
  fs.writeFileSync(path.join(repo, 'README.md'), 'hello\n');
  git(repo, 'init', '-q');
  git(repo, 'add', '.');
  git(repo, 'commit', '-qm', 'init');
  const args = ['--port', '0', '--bridge-port', '0', '--auth', 'token', '--data-dir', path.join(dir, 'data')];
  args.push('--workspace', workspace);
  if (MEMORY_BUDGET_MIB) args.push('--memory-budget', MEMORY_BUDGET_MIB);
  const stderrPath = path.join(dir, 'stderr.log');
  const stderrFd = fs.openSync(stderrPath, 'w');
  const nodeArgs: string[] = [];
  if (process.env.BENCH_MEMORY_TRACE === '1') {
    // Diagnosis: the coordinator logs process.memoryUsage() (heap vs ArrayBuffers) every 250 ms to trace.log.
    const tracer = path.join(dir, 'tracer.js');
    fs.writeFileSync(
      tracer,
      `const fs = require('fs'); const out = ${JSON.stringify(path.join(dir, 'trace.log'))};
setInterval(() => { if (global.gc && process.env.BENCH_GC === '1') global.gc(); const m = process.memoryUsage(); const M = (n) => (n / 1048576).toFixed(0);
fs.appendFileSync(out, Date.now() + ' rss ' + M(m.rss) + ' heapTotal ' + M(m.heapTotal) + ' heapUsed ' + M(m.heapUsed) + ' external ' + M(m.external) + ' arrayBuffers ' + M(m.arrayBuffers) + '\\n'); }, 250).unref();`,
    );
    nodeArgs.push('--require', tracer);
  }
  if (process.env.BENCH_MEMORY_NODE_OPTIONS) nodeArgs.push(...process.env.BENCH_MEMORY_NODE_OPTIONS.split(' '));
  const child = spawn(process.execPath, [...nodeArgs, CLI, ...args], { stdio: ['ignore', 'pipe', stderrFd] });
  fs.closeSync(stderrFd);
  children.add(child);
  child.on('exit', () => children.delete(child));
  const found = new Map<string, string>();
  await new Promise<void>((resolve, reject) => {
    let partial = '';
    const timer = setTimeout(() => reject(new Error(`coordinator not ready:\n${tail(stderrPath)}`)), 30_000);
    child.once('exit', (code) => reject(new Error(`coordinator exited (${code}):\n${tail(stderrPath)}`)));
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const exported = /^export (SW4RM_[A-Z_]+)=(.*)$/.exec(line.trim());
        if (exported) found.set(exported[1], exported[2]);
        const bridge = /MCP bridge for agents: http:\/\/127\.0\.0\.1:(\d+)\//.exec(line);
        if (bridge) found.set('BRIDGE_PORT', bridge[1]);
      }
      if (found.has('SW4RM_TOKEN') && found.has('SW4RM_ROUTER_ADDR') && found.has('BRIDGE_PORT')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return {
    child,
    pid: child.pid as number,
    address: found.get('SW4RM_ROUTER_ADDR') as string,
    bridgePort: Number(found.get('BRIDGE_PORT')),
    token: found.get('SW4RM_TOKEN') as string,
    dir,
    repo,
    stop: async () => {
      await stopChild(child);
      if (process.env.BENCH_KEEP_TEMP !== '1' && process.env.BENCH_MEMORY_TRACE !== '1')
        fs.rmSync(dir, { recursive: true, force: true });
      else console.log(`kept ${dir}`);
    },
  };
}

function tail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-10).join('\n');
  } catch {
    return '';
  }
}

/** VmRSS and VmHWM of a process, in MiB. */
function status(pid: number): { rss: number; hwm: number } {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text)?.[1] ?? NaN) / 1024;
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}

/** Samples a process's RSS; `phase()` starts a new peak (the kernel's VmHWM reset with clear_refs when allowed). */
class Sampler {
  private timer: NodeJS.Timeout;
  private peak = 0;
  private last = 0;
  private hwmReset = false;

  constructor(private readonly pid: number) {
    this.timer = setInterval(() => this.sample(), SAMPLE_MS);
  }

  sample(): number {
    try {
      this.last = status(this.pid).rss;
      this.peak = Math.max(this.peak, this.last);
    } catch {
      // The process is gone.
    }
    return this.last;
  }

  /** Starts a phase: the peak from now. */
  phase(): void {
    try {
      fs.writeFileSync(`/proc/${this.pid}/clear_refs`, '5');
      this.hwmReset = true;
    } catch {
      this.hwmReset = false;
    }
    this.peak = this.sample();
  }

  /** The peak since phase(): the highest sample, or the kernel's VmHWM when it could be reset (it misses nothing). */
  phasePeak(): number {
    this.sample();
    const hwm = this.hwmReset ? status(this.pid).hwm : 0;
    return Math.max(this.peak, hwm);
  }

  /** The RSS once it stops falling: the median of the samples over the last second of `seconds`. */
  async settle(seconds: number): Promise<number> {
    const end = Date.now() + seconds * 1000;
    const recent: number[] = [];
    while (Date.now() < end) {
      await sleep(SAMPLE_MS);
      recent.push(this.sample());
      if (recent.length > 1000 / SAMPLE_MS) recent.shift();
    }
    return [...recent].sort((a, b) => a - b)[Math.floor(recent.length / 2)];
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------------
// Agents over real gRPC.

interface Agent {
  readonly id: string;
  readonly clients: RoleClients;
  stream?: grpc.ClientReadableStream<StreamItem>;
  received: number;
}

function metadata(token: string, to?: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  if (to !== undefined) md.set('sw4rm-to', to);
  return md;
}

async function registerAgent(c: Coordinator, id: string): Promise<Agent> {
  const clients = createRoleClients(c.address, id);
  const registered = await unary<{ accepted: boolean; reason: string }>((cb) =>
    clients.registry.RegisterAgent(
      {
        agent: { agent_id: id, name: id, communication_class: 'STANDARD', modalities_supported: ['application/json'] },
      },
      metadata(c.token),
      cb,
    ),
  );
  if (!registered.accepted) throw new Error(`RegisterAgent ${id}: ${registered.reason}`);
  await heartbeat(c, clients, id);
  return { id, clients, received: 0 };
}

function heartbeat(c: Coordinator, clients: RoleClients, id: string): Promise<unknown> {
  return unary((cb) =>
    clients.registry.Heartbeat({ agent_id: id, state: 'RUNNABLE', health: {} }, metadata(c.token), cb),
  );
}

/** A recipient whose inbox stream is open and never read: gRPC's flow control stops the coordinator's writes. */
function openPaused(c: Coordinator, agent: Agent): void {
  const stream = agent.clients.router.StreamIncoming({ agent_id: agent.id }, metadata(c.token));
  stream.pause();
  stream.on('data', () => {
    agent.received += 1;
  });
  stream.on('error', () => undefined);
  agent.stream = stream;
}

// ---------------------------------------------------------------------------------------------------------------
// The loads.

interface PhaseFigures {
  readonly name: string;
  readonly peak: number;
  readonly after: number;
  readonly notes: string[];
}

async function slowConsumers(c: Coordinator, sampler: Sampler): Promise<PhaseFigures> {
  const producer = await registerAgent(c, 'mem-producer');
  const paused: Agent[] = [];
  const offline: Agent[] = [];
  for (let i = 0; i < PAUSED; i++) paused.push(await registerAgent(c, `mem-paused-${i}`));
  for (let i = 0; i < OFFLINE; i++) offline.push(await registerAgent(c, `mem-offline-${i}`));
  for (const agent of paused) openPaused(c, agent);
  const recipients = [...paused, ...offline];
  const beating = setInterval(() => {
    for (const agent of [producer, ...recipients]) void heartbeat(c, agent.clients, agent.id).catch(() => undefined);
  }, 5_000);
  const payload = Buffer.from(`{"pad":"${'x'.repeat(PAYLOAD_BYTES - 10)}"}`);
  await sleep(500);
  sampler.phase();
  const outcomes: Record<string, number> = {};
  let sent = 0;
  let refusedInARow = 0;
  let sequence = 0;
  const started = Date.now();
  const deadline = started + 120_000;
  const stopAfter = 2 * recipients.length;
  const worker = async (): Promise<void> => {
    while (sent < MAX_MESSAGES && refusedInARow < stopAfter && Date.now() < deadline) {
      const to = recipients[sent++ % recipients.length].id;
      const envelope = dataEnvelope(producer.id, ++sequence, payload);
      const outcome = await new Promise<string>((resolve) => {
        producer.clients.router.SendMessage({ msg: envelope }, metadata(c.token, to), (err, response) => {
          if (err) resolve(`${grpc.status[err.code]}`);
          else if (response?.accepted) resolve('accepted');
          else resolve((response?.reason ?? '?').split(':')[0]);
        });
      });
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      if (outcome === 'accepted') refusedInARow = 0;
      else refusedInARow += 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const loadSeconds = (Date.now() - started) / 1000;
  const peak = sampler.phasePeak();
  // The load stops: the paused recipients read (and their messages, like the offline ones', are read or expire).
  for (const agent of paused) agent.stream?.resume();
  const after = await sampler.settle(SETTLE_SECONDS);
  clearInterval(beating);
  for (const agent of paused) agent.stream?.cancel();
  for (const agent of [producer, ...recipients]) agent.clients.close();
  const received = paused.reduce((n, a) => n + a.received, 0);
  return {
    name: `slow consumers (${PAUSED} paused, ${OFFLINE} offline, ${CONCURRENCY} sends in flight)`,
    peak,
    after,
    notes: [
      `${sent} sends of ${(PAYLOAD_BYTES / MIB).toFixed(1)} MiB in ${loadSeconds.toFixed(1)} s: ${JSON.stringify(outcomes)}`,
      `paused recipients got ${received} stream items once resumed`,
    ],
  };
}

/** A POST to the bridge's hook endpoint (an agent's PreToolUse hook). */
function postHook(c: Coordinator, token: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: c.bridgePort,
        method: 'POST',
        path: '/hooks/pre-tool-use?cli=claude-code',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function lines(count: number, tag: string, width = 24): string {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(`${tag}${i}`.padEnd(width, i % 2 === 0 ? 'x' : 'y'));
  return `${out.join('\n')}\n`;
}

async function approvals(c: Coordinator, sampler: Sampler): Promise<PhaseFigures> {
  const agentId = 'mem-claude';
  const agent = await registerAgent(c, agentId);
  const defs = protoLoader.loadSync(['sw4rm_vscode/credentials.proto', 'worktree.proto', 'hitl.proto'], {
    ...LOADER_OPTIONS,
    includeDirs: [PROTOS_DIR],
  });
  const tree = grpc.loadPackageDefinition(defs) as unknown as Record<string, Record<string, Record<string, unknown>>>;
  type Ctor = new (
    address: string,
    creds: grpc.ChannelCredentials,
    options?: grpc.ClientOptions,
  ) => grpc.Client & Record<string, (...args: unknown[]) => grpc.ClientUnaryCall>;
  const channel = { channelOverride: agent.clients.router.getChannel() };
  const credentials = new (
    tree.sw4rm.vscode as unknown as Record<string, Record<string, Ctor>>
  ).credentials.CredentialsService(c.address, grpc.credentials.createInsecure(), channel);
  const worktree = new (tree.sw4rm.worktree.WorktreeService as Ctor)(
    c.address,
    grpc.credentials.createInsecure(),
    channel,
  );
  const hitl = new (tree.sw4rm.hitl.HitlService as Ctor)(c.address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': 64 * MIB,
  });
  const minted = await unary<{ token: string }>((cb) =>
    credentials.MintAgentCredential({ agent_id: agentId, label: 'bench', by: 'bench' }, metadata(c.token), cb),
  );
  const bound = await unary<{ ok: boolean; reason: string }>((cb) =>
    worktree.Bind({ agent_id: agentId, repo_id: 'app', worktree_id: '' }, metadata(c.token), cb),
  );
  if (!bound.ok) throw new Error(`Bind: ${bound.reason}`);
  const folder = `${c.repo}.sw4rm-worktrees`;
  const found = (fs.readdirSync(folder, { recursive: true }) as string[]).find((p) =>
    fs.existsSync(path.join(folder, p, 'README.md')),
  );
  if (found === undefined) throw new Error(`no worktree under ${folder}`);
  const root = path.join(folder, found);
  const mib1 = (tag: string) => lines(44_000, tag).slice(0, MIB - 1) + '\n';
  fs.writeFileSync(path.join(root, 'huge.txt'), mib1('old'));
  fs.writeFileSync(path.join(root, 'aaa.txt'), 'a'.repeat(256 * 1024));
  fs.writeFileSync(path.join(root, 'many.txt'), lines(40_000, 'line'));
  const hook = (tool: string, input: Record<string, unknown>) =>
    JSON.stringify({
      session_id: 's1',
      transcript_path: '/tmp/t.jsonl',
      cwd: root,
      permission_mode: 'default',
      hook_event_name: 'PreToolUse',
      tool_name: tool,
      tool_input: input,
      tool_use_id: `toolu_${randomUUID()}`,
    });
  const bodies = [
    hook('Write', { file_path: 'huge.txt', content: mib1('new') }),
    hook('MultiEdit', {
      file_path: 'aaa.txt',
      edits: [
        { old_string: 'a', new_string: 'b'.repeat(64), replace_all: true },
        { old_string: 'b', new_string: 'c'.repeat(64), replace_all: true },
      ],
    }),
    hook('MultiEdit', {
      file_path: 'many.txt',
      edits: Array.from({ length: 30_000 }, (_, i) =>
        i % 2 === 0
          ? { old_string: 'line39999', new_string: 'LINE39999' }
          : { old_string: 'LINE39999', new_string: 'line39999' },
      ),
    }),
    // Ten files of 1 MiB each in one MultiEdit of 4 MiB (the largest body): each diffed against its current text.
    hook('MultiEdit', {
      file_path: 'huge.txt',
      edits: [{ old_string: 'old0', new_string: `${'z'.repeat(3 * MIB)}` }],
    }),
    hook('Write', { file_path: 'new.txt', content: 'n'.repeat(4 * MIB - 1024) }),
  ];
  // A HITL invocation's context is at most 256 KiB: two texts of ~120 KiB, every other line changed.
  const before = lines(4_500, 'old');
  const after = before
    .split('\n')
    .map((l, i) => (i % 2 ? `${l}!` : l))
    .join('\n');
  const context = Buffer.from(
    JSON.stringify({ summary: 'bench', diffs: [{ title: 'big.txt', before, after }], deadline_ms: 1000 }),
  );
  sampler.phase();
  const started = Date.now();
  const statuses: Record<string, number> = {};
  const rounds = env('BENCH_MEMORY_APPROVAL_ROUNDS', 3);
  for (let round = 0; round < rounds; round++) {
    const results = await Promise.all([
      ...bodies.map((body) => postHook(c, minted.token, body).then(String)),
      ...Array.from({ length: 4 }, () =>
        unary((cb) =>
          hitl.Decide(
            { reason_type: 'SECURITY_APPROVAL', context, proposed_actions: ['approve', 'deny'] },
            metadata(c.token),
            cb,
          ),
        ).then(
          () => 'decided',
          (err: grpc.ServiceError) => grpc.status[err.code],
        ),
      ),
    ]);
    for (const r of results) statuses[r] = (statuses[r] ?? 0) + 1;
  }
  const seconds = (Date.now() - started) / 1000;
  const peak = sampler.phasePeak();
  const afterRss = await sampler.settle(SETTLE_SECONDS / 2);
  hitl.close();
  worktree.close();
  credentials.close();
  agent.clients.close();
  return {
    name: 'approval diffs (hook: Write / MultiEdit of 1 MiB files, 4 MiB bodies; HITL Decide with 2 × 120 KB texts)',
    peak,
    after: afterRss,
    notes: [
      `${rounds} rounds of ${bodies.length} hook posts and 4 Decide calls in ${seconds.toFixed(1)} s: ${JSON.stringify(statuses)}`,
    ],
  };
}

async function workflows(c: Coordinator, sampler: Sampler): Promise<PhaseFigures> {
  const tree = canonicalProtos().grpcObject as unknown as Record<string, Record<string, Record<string, unknown>>>;
  type Ctor = new (
    address: string,
    creds: grpc.ChannelCredentials,
    options?: grpc.ClientOptions,
  ) => grpc.Client & Record<string, (...args: unknown[]) => grpc.ClientUnaryCall>;
  const client = new (tree.sw4rm.workflow.WorkflowService as Ctor)(c.address, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 64 * MIB,
  });
  /** A definition of `nodes` nodes, each with metadata of `valueBytes` characters (about nodes × valueBytes encoded). */
  const definition = (id: string, nodes: number, valueBytes: number) => {
    const map: Record<string, unknown> = {};
    for (let i = 0; i < nodes; i++) {
      map[`n${i}`] = {
        node_id: `n${i}`,
        agent_id: 'mem-worker',
        dependencies: i === 0 ? [] : [`n${i - 1}`],
        trigger_type: i === 0 ? 'MANUAL' : 'DEPENDENCY',
        input_mapping: { in: `k${i}` },
        output_mapping: { out: `k${i + 1}` },
        metadata: { note: 'm'.repeat(valueBytes) },
      };
    }
    return { definition: { workflow_id: id, nodes: map, metadata: { by: 'bench' } } };
  };
  const large = (i: number) => definition(`mem-wf-${i}`, 500, 2000);
  const oversized = (i: number) => definition(`mem-wf-big-${i}`, 500, 16_000);
  sampler.phase();
  const started = Date.now();
  const outcomes: Record<string, number> = {};
  const count = env('BENCH_MEMORY_WORKFLOWS', 24);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const request = i % 4 === 3 ? oversized(i) : large(i);
      const outcome = await unary<{ success: boolean; error: string }>((cb) =>
        client.CreateWorkflow(request, metadata(c.token), cb),
      ).then(
        (r) => (r.success ? 'created' : r.error.split(':')[0]),
        (err: grpc.ServiceError) => `${grpc.status[err.code]} ${err.details.split(':')[0]}`,
      );
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  const seconds = (Date.now() - started) / 1000;
  const peak = sampler.phasePeak();
  const after = await sampler.settle(SETTLE_SECONDS / 2);
  client.close();
  return {
    name: 'workflow definitions (CreateWorkflow: 500 nodes of ~1 MiB, every fourth 8 MiB)',
    peak,
    after,
    notes: [`${count} CreateWorkflow calls, 4 in flight, in ${seconds.toFixed(1)} s: ${JSON.stringify(outcomes)}`],
  };
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const phases = (process.env.BENCH_MEMORY_PHASES ?? 'slow,approval,workflow').split(',');
  const runs: Record<string, (c: Coordinator, s: Sampler) => Promise<PhaseFigures>> = {
    slow: slowConsumers,
    approval: approvals,
    workflow: workflows,
  };
  console.log(`memory bench: ${CLI}, target ${TARGET_MIB} MiB; each load on a fresh coordinator`);
  let failed = false;
  for (const name of phases) {
    const run = runs[name];
    if (!run) throw new Error(`unknown phase ${name} (slow, approval, workflow)`);
    const c = await startCoordinator();
    const sampler = new Sampler(c.pid);
    try {
      const idle = await sampler.settle(3);
      const f = await run(c, sampler);
      if (c.child.exitCode !== null || c.child.signalCode !== null)
        throw new Error(`coordinator died:\n${tail(path.join(c.dir, 'stderr.log'))}`);
      const verdict = f.peak <= TARGET_MIB ? 'PASS' : 'MISS';
      const text = fs.readFileSync(`/proc/${c.pid}/status`, 'utf8');
      const kinds = ['RssAnon', 'RssFile', 'RssShmem']
        .map(
          (k) => `${k} ${(Number(new RegExp(`^${k}:\\s+(\\d+) kB$`, 'm').exec(text)?.[1] ?? NaN) / 1024).toFixed(0)}`,
        )
        .join(', ');
      const back = f.after <= idle + 0.25 * (f.peak - idle) ? 'back near idle' : 'NOT back near idle';
      console.log(`${f.name}`);
      for (const note of f.notes) console.log(`  ${note}`);
      console.log(
        `  idle ${idle.toFixed(0)} MiB; peak ${f.peak.toFixed(0)} MiB ${verdict} (<= ${TARGET_MIB}); after ${f.after.toFixed(0)} MiB (${back}; ${kinds} MiB)`,
      );
      if (process.env.BENCH_MEMORY_TRACE === '1') console.log(`  trace: ${path.join(c.dir, 'trace.log')}`);
    } catch (err) {
      failed = true;
      console.error(err);
    } finally {
      sampler.stop();
      await c.stop();
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
