/**
 * Worktree benchmark (`npm run bench:worktree`, also run at the end of `npm run bench`): what the worktree area adds
 * on top of git and of plain file calls, measured in the same run on the same repository and files.
 *
 * 1. Worktree creation: `Worktrees.create` (base checks, base ref, `git worktree add`, base branch in the config, the
 *    worktree read back from `git worktree list`) against `git worktree add` alone; and `Worktrees.create` followed by
 *    `runWorktreeSetup` with a copy step (`.env*`, `config/*.json`) and a small setup command (`node -e …`).
 * 2. One confined `readFile` / `writeFile` (a `Confinement` held for the worktree) against `fs.promises.readFile` /
 *    `writeFile` of the same file, 4 KiB and 1 MiB; the confined write is atomic and durable (temporary file, fsync,
 *    rename), so a plain write with the same fsync and rename is printed beside it.
 *
 * Variants are interleaved run by run, and medians are printed with their ratios: the machine is shared, so the
 * ratios are what compare between runs. Everything happens in one temporary folder, removed at the end (also on
 * failure and on Ctrl-C). Not a test: it asserts nothing beyond each step succeeding.
 *
 * Environment: BENCH_WORKTREE_RUNS (12, worktree creations per variant), BENCH_FILE_RUNS_SMALL (400),
 * BENCH_FILE_RUNS_LARGE (40), BENCH_KEEP_TEMP=1 keeps the temporary folder.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { systemClock } from '../src/core/clock';
import { Confinement } from '../src/core/worktree/confinement';
import { cleanEnvironment, createGit } from '../src/core/worktree/git';
import { discoverRepositories } from '../src/core/worktree/repositories';
import { runWorktreeSetup } from '../src/core/worktree/setup';
import { Snapshots } from '../src/core/worktree/snapshots';
import { Worktrees } from '../src/core/worktree/worktrees';

const execFileAsync = promisify(execFile);

function envNumber(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!(Number.isInteger(value) && value >= 1)) throw new Error(`${name} must be a whole number ≥ 1`);
  return value;
}

const WORKTREE_RUNS = envNumber('BENCH_WORKTREE_RUNS', 12);
const FILE_RUNS_SMALL = envNumber('BENCH_FILE_RUNS_SMALL', 400);
const FILE_RUNS_LARGE = envNumber('BENCH_FILE_RUNS_LARGE', 40);

/** The setup measured: a few files copied from the main checkout and one small command run in the worktree. */
const SETUP_SETTINGS = {
  copy: ['.env*', 'config/*.json'],
  setup: {
    command: process.execPath,
    args: ['-e', "require('fs').writeFileSync('setup-done.txt', 'ok')"],
    timeoutSeconds: 60,
  },
};

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await action();
  return performance.now() - start;
}

async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await execFileAsync('git', args, { cwd, env: cleanEnvironment(), maxBuffer: 16 * 1024 * 1024 })).stdout;
}

function ms(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function us(valueMs: number): string {
  return (valueMs * 1000).toFixed(valueMs * 1000 >= 100 ? 0 : 1);
}

/** A repository like a small project: 200 tracked files in a few folders, two `.env` files and a config folder. */
async function makeRepository(dir: string): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  await git(dir, 'init', '-q', '-b', 'main');
  await git(dir, 'config', 'user.name', 'Bench');
  await git(dir, 'config', 'user.email', 'bench@example.invalid');
  await git(dir, 'config', 'commit.gpgsign', 'false');
  for (let i = 0; i < 200; i++) {
    const file = path.join(dir, 'src', `module${i % 10}`, `file${i}.ts`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `export const value${i} = ${i};\n`.repeat(40));
  }
  fs.mkdirSync(path.join(dir, 'config'));
  fs.writeFileSync(path.join(dir, 'config', 'app.json'), '{"port": 8080}\n');
  fs.writeFileSync(path.join(dir, '.gitignore'), '.env*\nconfig/local.json\nsetup-done.txt\n');
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'initial');
  // Untracked (ignored) files a setup copies, as a user's `.env` would be.
  fs.writeFileSync(path.join(dir, '.env'), 'API_URL=http://localhost:8080\n');
  fs.writeFileSync(path.join(dir, '.env.local'), 'SECRET=local\n');
  fs.writeFileSync(path.join(dir, 'config', 'local.json'), '{"debug": true}\n');
}

interface CreationFigures {
  bare: number[];
  create: number[];
  createWithSetup: number[];
  setupOnly: number[];
}

async function benchCreation(tmp: string): Promise<CreationFigures> {
  const repoDir = path.join(tmp, 'app');
  await makeRepository(repoDir);
  const realGit = createGit();
  const [repository] = await discoverRepositories(realGit, [repoDir]);
  const worktrees = new Worktrees(realGit, new Snapshots(realGit, systemClock), repository);
  const root = worktrees.root;
  const figures: CreationFigures = { bare: [], create: [], createWithSetup: [], setupOnly: [] };

  /** Removes what a run made (untimed), so every run starts from the same repository state. */
  const cleanUp = async (worktreePath: string, branch: string, id?: string) => {
    await git(repository.path, 'worktree', 'remove', '--force', worktreePath);
    await git(repository.path, 'branch', '-q', '-D', branch);
    if (id !== undefined) {
      await git(repository.path, 'update-ref', '-d', `refs/sw4rm/bases/${id}`);
      await git(repository.path, 'config', '--remove-section', `sw4rm-worktree.${id}`).catch(() => undefined);
    }
  };

  // One untimed round of each variant warms git's and the file system's caches.
  for (let run = -1; run < WORKTREE_RUNS; run++) {
    const bareId = `bare-${run + 1}`;
    const barePath = path.join(root, bareId);
    const bareTime = await timed(() =>
      git(repository.path, 'worktree', 'add', '-q', '-b', `bench/${bareId}`, '--', barePath, 'HEAD'),
    );
    await cleanUp(barePath, `bench/${bareId}`);

    const id = `agent-${run + 1}`;
    const createTime = await timed(() => worktrees.create(id));
    await cleanUp(path.join(root, id), `sw4rm/${id}`, id);

    const setupId = `setup-${run + 1}`;
    let setupTime = 0;
    const withSetupTime = await timed(async () => {
      const made = await worktrees.create(setupId);
      const start = performance.now();
      const result = await runWorktreeSetup(repository.path, made.path, {
        clock: systemClock,
        settings: SETUP_SETTINGS,
      });
      setupTime = performance.now() - start;
      if (!result.ok || result.copied.length !== 3)
        throw new Error(`the setup failed: ${result.failure ?? `copied ${result.copied.join(', ')}`}`);
      if (!fs.existsSync(path.join(made.path, 'setup-done.txt'))) throw new Error('the setup command did not run');
    });
    await cleanUp(path.join(root, setupId), `sw4rm/${setupId}`, setupId);

    if (run < 0) continue;
    figures.bare.push(bareTime);
    figures.create.push(createTime);
    figures.createWithSetup.push(withSetupTime);
    figures.setupOnly.push(setupTime);
  }
  return figures;
}

interface FileFigures {
  label: string;
  runs: number;
  plainRead: number[];
  confinedRead: number[];
  plainWrite: number[];
  plainAtomicWrite: number[];
  confinedWrite: number[];
}

/** A plain write with what the confined write adds for durability: a temporary file, fsync, rename. */
async function plainAtomicWrite(file: string, data: Buffer): Promise<void> {
  const temp = `${file}.tmp`;
  const handle = await fs.promises.open(temp, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.promises.rename(temp, file);
}

async function benchFiles(tmp: string, label: string, bytes: number, runs: number): Promise<FileFigures> {
  const worktree = path.join(tmp, `files-${label}`);
  const dir = path.join(worktree, 'src', 'deep', 'er');
  fs.mkdirSync(dir, { recursive: true });
  const relative = 'src/deep/er/data.bin';
  const file = path.join(worktree, relative);
  const data = Buffer.alloc(bytes, 0x61);
  fs.writeFileSync(file, data);
  const confinement = await Confinement.forWorktree(worktree);
  const figures: FileFigures = {
    label,
    runs,
    plainRead: [],
    confinedRead: [],
    plainWrite: [],
    plainAtomicWrite: [],
    confinedWrite: [],
  };
  const warmUp = Math.max(5, Math.floor(runs / 10));
  for (let run = -warmUp; run < runs; run++) {
    const keep = run >= 0;
    const plainRead = await timed(async () => {
      if ((await fs.promises.readFile(file)).length !== bytes) throw new Error('short read');
    });
    const confinedRead = await timed(async () => {
      if ((await confinement.readFile(relative)).length !== bytes) throw new Error('short read');
    });
    const plainWrite = await timed(() => fs.promises.writeFile(file, data));
    const atomicWrite = await timed(() => plainAtomicWrite(file, data));
    const confinedWrite = await timed(() => confinement.writeFile(relative, data));
    if (!keep) continue;
    figures.plainRead.push(plainRead);
    figures.confinedRead.push(confinedRead);
    figures.plainWrite.push(plainWrite);
    figures.plainAtomicWrite.push(atomicWrite);
    figures.confinedWrite.push(confinedWrite);
  }
  return figures;
}

function printCreation(f: CreationFigures): void {
  const bare = median(f.bare);
  const create = median(f.create);
  const withSetup = median(f.createWithSetup);
  console.log(`worktree creation (median of ${f.bare.length} interleaved runs; a repository of 200 tracked files)`);
  console.log(`  git worktree add alone                  ${ms(bare).padStart(7)} ms`);
  console.log(
    `  Worktrees.create                        ${ms(create).padStart(7)} ms   ratio ${(create / bare).toFixed(2)}× git worktree add`,
  );
  console.log(
    `  Worktrees.create + runWorktreeSetup     ${ms(withSetup).padStart(7)} ms   ratio ${(withSetup / bare).toFixed(2)}× git worktree add, ${(withSetup / create).toFixed(2)}× Worktrees.create`,
  );
  console.log(`    of which the setup (copy 3 files, node -e)  ${ms(median(f.setupOnly))} ms`);
}

function printFiles(f: FileFigures): void {
  const plainRead = median(f.plainRead);
  const confinedRead = median(f.confinedRead);
  const plainWrite = median(f.plainWrite);
  const atomicWrite = median(f.plainAtomicWrite);
  const confinedWrite = median(f.confinedWrite);
  console.log(`one ${f.label} file, 3 folders deep (median of ${f.runs} interleaved runs)`);
  console.log(
    `  readFile   plain ${us(plainRead).padStart(7)} µs   confined ${us(confinedRead).padStart(7)} µs   ratio ${(confinedRead / plainRead).toFixed(2)}`,
  );
  console.log(
    `  writeFile  plain ${us(plainWrite).padStart(7)} µs   confined ${us(confinedWrite).padStart(7)} µs   ratio ${(confinedWrite / plainWrite).toFixed(2)}` +
      `   (plain + fsync + rename ${us(atomicWrite)} µs: ratio ${(confinedWrite / atomicWrite).toFixed(2)})`,
  );
}

async function main(): Promise<void> {
  const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-worktree-bench-')));
  const cleanUp = () => {
    if (process.env.BENCH_KEEP_TEMP === '1') console.log(`kept ${tmp}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  };
  const interrupted = () => {
    cleanUp();
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  const started = performance.now();
  try {
    console.log(
      `== worktree bench (Node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(2)}) ==`,
    );
    printCreation(await benchCreation(tmp));
    printFiles(await benchFiles(tmp, '4 KiB', 4 * 1024, FILE_RUNS_SMALL));
    printFiles(await benchFiles(tmp, '1 MiB', 1024 * 1024, FILE_RUNS_LARGE));
    console.log(
      `(${((performance.now() - started) / 1000).toFixed(1)} s; ratios compare between runs, times depend on the machine's load)`,
    );
  } finally {
    cleanUp();
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
