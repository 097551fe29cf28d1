// A sender of large payloads in its own process, so that building and encoding them never runs on the event loop
// of the coordinator under test: `node bigSender.js ADDRESS TOKEN PRODUCER COUNT MIB CONCURRENCY RECIPIENT_PREFIX [broken] [from FROM]`.
// Message i goes to `${RECIPIENT_PREFIX}${FROM + i}` (`from FROM`, default 0); with `broken`, each JSON payload is invalid
// in its very last byte; with `octet`, each is sent as application/octet-stream (never parsed: a baseline of the
// transport's own cost).
// Prints one JSON line: {ms, outcomes: {accepted | reason prefix: count}}.
import { RouterClient } from './routerClient';

/** About `mib` MiB of valid JSON: an array of small objects. */
export function bigJson(mib: number): Buffer {
  const item = '{"k":12345,"v":"abcdefghijklmnopqrstuv"},';
  const count = Math.floor((mib * 1024 * 1024 - 16) / item.length);
  return Buffer.from(`{"items":[${item.repeat(count)}{}]}`);
}

async function main(): Promise<void> {
  const [address, token, producer, count, mib, concurrency, prefix, ...flags] = process.argv.slice(2);
  const broken = flags.includes('broken');
  const contentType = flags.includes('octet') ? 'application/octet-stream' : 'application/json';
  const from = flags.includes('from') ? Number(flags[flags.indexOf('from') + 1]) : 0;
  const client = new RouterClient(address, token, producer);
  const payload = bigJson(Number(mib));
  if (broken) payload[payload.length - 1] = 0x2c; // `,` for the final `}`
  const outcomes: Record<string, number> = {};
  const started = Date.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < Number(count)) {
      const i = next++;
      const result = await client
        .send(client.envelope({ payload, content_type: contentType }), {
          to: `${prefix}${from + i}`,
          deadlineMs: 120_000,
        })
        .catch((err: Error) => ({ accepted: false, reason: `ERROR ${err.message}` }));
      const key = result.accepted ? 'accepted' : result.reason.split(':').slice(0, 2).join(':').slice(0, 120);
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: Number(concurrency) }, worker));
  process.stdout.write(`${JSON.stringify({ ms: Date.now() - started, outcomes })}\n`);
  client.close();
}

if (require.main === module) void main();
