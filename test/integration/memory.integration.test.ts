import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { useHost } from '../support/host';
import { bigJson } from '../support/bigSender';
import { RouterClient, registerRouterAgent } from '../support/routerClient';

const SENDER = path.join(__dirname, '../support/bigSender.js');

/** Runs the large-payload sender in its own process; answers its outcome line. */
function sendFromAnotherProcess(
  address: string,
  token: string,
  args: Array<string | number>,
): Promise<{ ms: number; outcomes: Record<string, number> }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [SENDER, address, token, ...args.map(String)],
      { maxBuffer: 1 << 20, timeout: 240_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as { ms: number; outcomes: Record<string, number> });
      },
    );
  });
}

/** A process's resident memory now (VmRSS) or at its peak (VmHWM), in MiB. */
function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(match, `${field} in /proc/<pid>/status`);
  return Number(match[1]) / 1024;
}

describe('memory and the event loop with 16 MB payloads (real sockets, a real store)', function () {
  this.timeout(300_000);

  describe('validation off the event loop', () => {
    const fixture = useHost('sw4rm-int-memory-');

    it('validates four 16 MB JSON payloads at once without holding the event loop for the parse (against a baseline of the same run)', async () => {
      await registerRouterAgent(fixture.clients, 'sender');
      for (let i = 0; i < 4; i++) await registerRouterAgent(fixture.clients, `r${i}`);
      const address = `127.0.0.1:${fixture.host.port}`;
      const hold = async (args: Array<string | number>) => {
        const delay = monitorEventLoopDelay({ resolution: 1 });
        delay.enable();
        const result = await sendFromAnotherProcess(address, fixture.host.token!, args);
        delay.disable();
        return { result, ms: delay.max / 1e6 };
      };
      // The baseline: the same four 16 MiB messages as application/octet-stream to recipients that do not exist, so
      // decoded by gRPC and refused, never parsed. What holds the loop there (gRPC's decoding of 16 MiB messages and
      // the garbage collector freeing them: one pause of ≈ 0.1 s in a CPU profile on a loaded machine) is common to
      // both; the parse, on the worker, must add nothing the size of a parse (JSON.parse of one such payload on the
      // event loop took 100-300 ms). Interleaved, three of each; the medians are compared.
      const baseline: number[] = [];
      const measured: number[] = [];
      for (let k = 0; k < 3; k++) {
        const base = await hold(['sender', 4, 16, 4, 'nobody-', 'octet']);
        assert.equal(base.result.outcomes.accepted, undefined, JSON.stringify(base.result));
        baseline.push(base.ms);
        // Invalid in the last byte: everything is parsed, nothing is stored, so the measure is the validation path.
        const { result, ms } = await hold(['sender', 4, 16, 4, 'r', 'broken']);
        assert.deepEqual(
          Object.keys(result.outcomes),
          ['VALIDATION_ERROR: the payload is not valid JSON for content_type application/json'],
          JSON.stringify(result),
        );
        assert.equal(
          result.outcomes['VALIDATION_ERROR: the payload is not valid JSON for content_type application/json'],
          4,
        );
        measured.push(ms);
      }
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1];
      const text = `validated: event loop held ${measured.map((m) => m.toFixed(1)).join(', ')} ms; baseline (not parsed): ${baseline.map((m) => m.toFixed(1)).join(', ')} ms`;
      console.log(`      (${text})`);
      assert.ok(median(measured) <= median(baseline) + 40, text);
    });
  });

  describe('valid 16 MB payloads stored as files off the event loop', () => {
    const fixture = useHost('sw4rm-int-payload-files-');

    it('accepts four valid 16 MB JSON payloads sent at once, holding the event loop under 80 ms, and delivers them whole', async () => {
      await registerRouterAgent(fixture.clients, 'sender');
      for (let i = 0; i < 4; i++) await registerRouterAgent(fixture.clients, `v${i}`);
      const address = `127.0.0.1:${fixture.host.port}`;
      const delay = monitorEventLoopDelay({ resolution: 1 });
      delay.enable();
      // Validated and hashed on the worker, written as files with async fs; the admission transaction stores no bytes.
      const result = await sendFromAnotherProcess(address, fixture.host.token!, ['sender', 4, 16, 4, 'v']);
      delay.disable();
      assert.deepEqual(result.outcomes, { accepted: 4 }, JSON.stringify(result));
      const maxMs = delay.max / 1e6;
      assert.ok(maxMs < 80, `the event loop was held at most ${maxMs.toFixed(1)} ms`);
      const files = fs.readdirSync(path.join(fixture.dataDir, 'payloads'));
      assert.equal(files.length, 4, 'one file per message');
      const expected = bigJson(16);
      for (const name of files)
        assert.equal(fs.statSync(path.join(fixture.dataDir, 'payloads', name)).size, expected.byteLength);
      const receivers = Array.from({ length: 4 }, (_, i) => new RouterClient(address, fixture.host.token, `v${i}`));
      try {
        for (const receiver of receivers) {
          const inbox = receiver.openInbox();
          const item = await inbox.waitFor((it) => it.msg.message_type === 'DATA', 60_000, 'the 16 MB message');
          assert.ok(Buffer.from(item.msg.payload).equals(expected), `${receiver.agentId} got every byte`);
          inbox.close();
        }
      } finally {
        for (const receiver of receivers) receiver.close();
      }
      console.log(`      (event loop held at most ${maxMs.toFixed(1)} ms; sent in ${result.ms} ms)`);
    });
  });

  describe('a headless coordinator receiving 16 MB messages for offline recipients', () => {
    const cli = useCliProcesses('sw4rm-int-memory-cli-');

    it('keeps the payloads in the store, not in memory: resident memory does not grow with the messages waiting', async () => {
      const coordinator = cli.run('--port', '0', '--data-dir', cli.dataDir());
      const env = await coordinator.environment();
      const address = env.SW4RM_ROUTER_ADDR;
      const token = fs.readFileSync(path.join(cli.dataDir(), 'token'), 'utf8').trim();
      const clients = new CoordinatorClients(address, token);
      const first = 8;
      const more = 16;
      try {
        await registerRouterAgent(clients, 'sender');
        await registerRouterAgent(clients, 'sender-2');
        for (let i = 0; i < first + more; i++) await registerRouterAgent(clients, `offline-${i}`);
        const idle = rssMiB(coordinator.pid!, 'VmRSS');
        const one = await sendFromAnotherProcess(address, token, ['sender', first, 16, 2, 'offline-']);
        assert.deepEqual(one.outcomes, { accepted: first });
        const afterFirst = rssMiB(coordinator.pid!, 'VmRSS');
        const two = await sendFromAnotherProcess(address, token, ['sender-2', more, 16, 2, 'offline-', 'from', first]);
        assert.deepEqual(two.outcomes, { accepted: more });
        const afterAll = rssMiB(coordinator.pid!, 'VmRSS');
        const peak = rssMiB(coordinator.pid!, 'VmHWM');
        // 16 more messages of 16 MiB (256 MiB) wait for offline recipients; held in memory they would add that much or more.
        // Resident memory of a fresh process moves with when its GC runs: the same build measured 80–97 MiB of growth on
        // one run and −3 on the next (before the scheduler landed too), so the bound sits between that noise and 256 MiB.
        const grew = afterAll - afterFirst;
        const report = `idle ${idle.toFixed(0)} MiB, after ${first} messages ${afterFirst.toFixed(0)}, after ${first + more} ${afterAll.toFixed(0)}, peak ${peak.toFixed(0)}`;
        assert.ok(grew < 160, `resident memory grew ${grew.toFixed(0)} MiB for 256 MiB more waiting (${report})`);
        assert.ok(peak < idle + 384, `peak ${report}`);
        // Payloads of 1 MiB or more are files in <data folder>/payloads (router/payloadFiles.ts).
        const payloads = path.join(cli.dataDir(), 'payloads');
        // A message whose ACK timeout (10 s) passed while the rest were sent is finished with and its file already deleted.
        const sizes = fs.readdirSync(payloads).map((name) => fs.statSync(path.join(payloads, name)).size);
        assert.ok(
          sizes.length >= more / 2 && sizes.length <= first + more,
          `the payload folder holds them, one file each (${sizes.length})`,
        );
        assert.ok(
          sizes.every((size) => size === bigJson(16).byteLength),
          'every file is a whole payload',
        );
        console.log(`      (${report})`);
      } finally {
        clients.close();
      }
    });
  });
});
