import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { findFreePort } from '../../src/server/server';
import { bigJson } from '../support/bigSender';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { pollUntil } from '../support/poll';
import { registerRouterAgent, retryTransport, RouterClient, type Inbox } from '../support/routerClient';

/** Messages of 4 MiB (payload files), sent CONCURRENCY at a time; the coordinator is SIGKILLed after KILL_AFTER accepted. */
const MESSAGES = 24;
const CONCURRENCY = 6;
const KILL_AFTER = 8;
const PRODUCER = 'files-producer';
const recipient = (i: number): string => `files-r${i % 4}`;

describe('payload files across a coordinator crash (kill -9 while 4 MiB messages are being written)', () => {
  const coordinators = useCliProcesses('sw4rm-int-payload-files-crash-');
  const startCoordinator = async (port: number): Promise<Record<string, string>> =>
    (await coordinators.serve(port, [], 15_000)).env;

  it('delivers every accepted message whole after the restart, nothing refused, and leaves no orphan file', async function () {
    this.timeout(120_000);
    const port = await findFreePort('127.0.0.1');
    const env = await startCoordinator(port);
    const address = env.SW4RM_ROUTER_ADDR;
    const token = env.SW4RM_TOKEN;
    const registry = new CoordinatorClients(address, token);
    coordinators.closeAfter(registry);
    await registerRouterAgent(registry, PRODUCER);
    for (let i = 0; i < 4; i++) await registerRouterAgent(registry, recipient(i));
    const producer = new RouterClient(address, token, PRODUCER);
    coordinators.closeAfter(producer);
    // The recipients stream throughout (reconnecting after the crash) and finish every message they get: confirmed
    // (AckDelivery) and FULFILLED, so that each file is released once its message is done with.
    const receivers = Array.from({ length: 4 }, (_, i) => new RouterClient(address, token, recipient(i)));
    coordinators.closeAfter(...receivers);
    const inboxes: Inbox[] = [];
    for (const receiver of receivers) {
      const inbox = receiver.openInbox(receiver.agentId, { reconnect: true });
      inbox.onItem((item) => {
        if (item.msg.message_type !== 'DATA') return;
        void receiver
          .ackDelivery(receiver.agentId, item.seq, item.msg.message_id)
          .then(() => receiver.ack(item.msg.message_id, 'FULFILLED'))
          .catch(() => undefined);
      });
      coordinators.closeAfter(inbox);
      inboxes.push(inbox);
    }

    const valid = bigJson(4);
    const broken = Buffer.from(valid);
    broken[broken.length - 1] = 0x2c;
    // Every third message is refused: invalid JSON (refused on the worker, before any file) or no such recipient
    // (refused after its file was written, which must then be deleted).
    const accepted = new Map<string, string>();
    const refused = new Set<string>();
    let next = 0;
    let killed = false;
    const first = coordinators.last();
    const sender = async (): Promise<void> => {
      while (next < MESSAGES) {
        const i = next++;
        const kind = i % 3 === 2 ? (i % 2 === 0 ? 'broken' : 'no-route') : 'valid';
        const msg = producer.envelope({ payload: kind === 'broken' ? broken : valid });
        const to = kind === 'no-route' ? 'files-nobody' : recipient(i);
        const result = await producer.send(msg, { to, deadlineMs: 30_000 }).catch(() => undefined);
        if (result?.accepted) accepted.set(msg.message_id, to);
        else if (result) refused.add(msg.message_id);
        if (!killed && accepted.size >= KILL_AFTER) {
          killed = true;
          first.signal('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, sender));
    if (!killed) first.signal('SIGKILL');
    await first.exit();
    assert.equal(first.exitSignal, 'SIGKILL');
    assert.ok(accepted.size >= KILL_AFTER, `${accepted.size} accepted before the kill`);
    assert.ok(refused.size >= 1, 'some were refused before the kill');

    const atKill = fs.readdirSync(path.join(coordinators.dataDir(), 'payloads')).length;
    await startCoordinator(port);
    for (const agentId of [PRODUCER, ...receivers.map((r) => r.agentId)]) {
      await retryTransport(
        `re-registering ${agentId}`,
        () => registerRouterAgent(registry, agentId),
        Date.now() + 15_000,
      );
    }
    const delivered = (): Map<string, Buffer> => {
      const all = new Map<string, Buffer>();
      for (const inbox of inboxes)
        for (const item of inbox.items)
          if (item.msg.message_type === 'DATA') all.set(item.msg.message_id, Buffer.from(item.msg.payload));
      return all;
    };
    // Every accepted message arrives (before the kill, or again after it); so may one whose answer the kill cut off.
    await pollUntil(
      'every accepted message delivered',
      () => [...accepted.keys()].every((id) => delivered().has(id)) || undefined,
      60_000,
      100,
    );
    const payloads = path.join(coordinators.dataDir(), 'payloads');
    // Finished messages release their files after the commit; the sweep after start deletes the files of
    // transactions the kill cut short and of unlinks it prevented. Nothing is left.
    await pollUntil('an empty payload folder', () => fs.readdirSync(payloads).length === 0 || undefined, 30_000, 100);
    const got = delivered();
    for (const [id, bytes] of got) assert.ok(bytes.equals(valid), `${id} was delivered whole`);
    for (const id of refused) assert.ok(!got.has(id), `refused ${id} was delivered`);
    const swept = /payload_files_swept[^\n]*/.exec(coordinators.last().stderr)?.[0] ?? 'no orphan file to sweep';
    console.log(
      `      (${accepted.size} accepted and ${refused.size} refused before the kill; ${got.size} delivered; ${atKill} files at the kill; after the restart: ${swept.slice(0, 160)})`,
    );
  });
});
