// The unit rung runs without git or network (test/unit/.mocharc.json requires this file before any test): spawning
// git (child_process, in this process or, through a `git` on PATH that refuses, in a child) and any listen or
// connect of net, http, https, http2 (loopback included: that is how gRPC and HTTP servers work) throw at once, so a
// unit test that needs them fails with a message that says where it belongs. Worker threads and node:sqlite are fine.
import childProcess = require('node:child_process');
import * as fs from 'node:fs';
import net = require('node:net');
import * as os from 'node:os';
import * as path from 'node:path';

export const UNIT_RUNG_REFUSAL = 'the unit rung runs without git or network: move this test to test/integration';

function refuse(what: string): never {
  throw new Error(`${UNIT_RUNG_REFUSAL} (it ${what})`);
}

/** Whether a program named to child_process is git (`git`, `/usr/bin/git`, `git.exe`). */
function isGit(file: unknown): boolean {
  return typeof file === 'string' && /^git(\.exe)?$/i.test(path.basename(file.trim()));
}

/** Whether a shell command line (exec, execSync, or spawn with `shell`) runs git anywhere in it. */
function shellRunsGit(command: unknown): boolean {
  return typeof command === 'string' && /(^|[\s;&|(`'"/])git(\.exe)?(\s|$|[;&|)`'"])/i.test(command);
}

function withShell(args: unknown[]): boolean {
  const options = args.find((a) => typeof a === 'object' && a !== null && !Array.isArray(a)) as
    { shell?: unknown } | undefined;
  return options?.shell !== undefined && options.shell !== false;
}

type Mutable = Record<string, (...args: unknown[]) => unknown>;
const cp = childProcess as unknown as Mutable;

for (const name of ['spawn', 'spawnSync', 'execFile', 'execFileSync'] as const) {
  const original = cp[name];
  cp[name] = function guarded(this: unknown, file: unknown, ...rest: unknown[]) {
    const argv = Array.isArray(rest[0]) ? (rest[0] as unknown[]) : [];
    if (isGit(file) || (withShell(rest) && shellRunsGit([file, ...argv].join(' '))))
      refuse(`ran ${String(file)} ${argv.slice(0, 3).join(' ')}`.trim());
    return original.call(this, file, ...rest);
  };
}
for (const name of ['exec', 'execSync'] as const) {
  const original = cp[name];
  cp[name] = function guarded(this: unknown, command: unknown, ...rest: unknown[]) {
    if (shellRunsGit(command)) refuse(`ran ${String(command).slice(0, 80)}`);
    return original.call(this, command, ...rest);
  };
}

// Every server (net, http, https, http2, tls: all net.Server) listens through net.Server.prototype.listen; every client
// socket (net.connect, http.request's agents, http2.connect, tls.connect, fetch) connects through net.Socket.prototype.connect.
const server = net.Server.prototype as unknown as Mutable;
server.listen = function listen() {
  refuse('listened on a socket');
};
const socket = net.Socket.prototype as unknown as Mutable;
socket.connect = function connect() {
  refuse('connected a socket');
};

// A child process of a test (a CLI, a hook) finds this `git` first on PATH: it says the same and fails.
if (process.platform !== 'win32') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-unit-rung-'));
  fs.writeFileSync(
    path.join(dir, 'git'),
    `#!/bin/sh\necho "${UNIT_RUNG_REFUSAL} (a child process ran git)" >&2\nexit 128\n`,
    { mode: 0o755 },
  );
  process.env.PATH = `${dir}${path.delimiter}${process.env.PATH ?? ''}`;
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
}
