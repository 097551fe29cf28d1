import * as path from 'node:path';
import { PAYLOAD_LIMITS } from '../core/limits';
import { formatEvent } from '../core/log/eventLog';
import { DEFAULT_LANE_OPTIONS } from '../core/router/lanes';
import { StoreOpenError, type StoredEvent } from '../core/store/store';
import { formatEnvironment } from '../server/agentEnvironment';
import { CoordinatorHost } from '../server/host';
import { ConfigurationError, PortInUseError } from '../server/server';
import { parseArgs, UsageError, USAGE } from './args';

/** The bundle lives in dist/; the protos ship beside it in ../protos. */
const PROTOS_DIR = path.join(__dirname, '..', 'protos');

/** Routine per-message events stay in the store (and --verbose); warnings and everything else are printed. */
function isPerMessage(event: StoredEvent): boolean {
  return event.level === 'INFO' && /^(message|dedup|stream)\./.test(event.eventType);
}

async function main(): Promise<number> {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sw4rm-coordinator: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (options.help) {
    process.stdout.write(USAGE);
    return 0;
  }

  let host: CoordinatorHost;
  try {
    host = await CoordinatorHost.start({
      dataDir: path.resolve(options.dataDir),
      protosDir: PROTOS_DIR,
      host: options.host,
      port: options.port,
      auth: options.auth,
      heartbeatDebounceMs: options.heartbeatDebounceSeconds * 1000,
      onEvent: (event) => {
        if (options.verbose || !isPerMessage(event)) process.stderr.write(formatEvent(event) + '\n');
      },
      router: {
        capacity: options.capacity,
        dedupWindowMs: options.dedupWindowSeconds * 1000,
        lanes: { ...DEFAULT_LANE_OPTIONS, privilegedRatePerSecond: options.privilegedRatePerSecond },
        payloadLimits: { ...PAYLOAD_LIMITS, ...options.payloadLimits },
      },
    });
  } catch (err) {
    if (err instanceof PortInUseError || err instanceof StoreOpenError || err instanceof ConfigurationError) {
      process.stderr.write(`sw4rm-coordinator: ${err.message}\n`);
      return 1;
    }
    throw err;
  }

  process.stdout.write(`# SW4RM coordinator serving on ${options.host}:${host.port} (auth ${options.auth}, store ${host.coordinator.store.location})\n`);
  process.stdout.write('# Agent environment:\n');
  process.stdout.write(formatEnvironment(host.environment()));

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`sw4rm-coordinator: ${signal} received, draining\n`);
      host.stop().then(() => resolve(0), (err) => {
        process.stderr.write(`sw4rm-coordinator: error while stopping: ${(err as Error).stack}\n`);
        resolve(1);
      });
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`sw4rm-coordinator: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
