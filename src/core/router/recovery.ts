import * as path from 'node:path';
import { StoreOpenError } from '../store/store';
import type { RouterRepository, RouterStorage } from './model';
import type { RouterOptions } from './options';
import type { Deadlines, RouterShared } from './parts';

/** What recovery and the payload-file checks use of the router. */
export interface RecoveryCore extends Pick<
  RouterShared,
  'log' | 'ids' | 'guard' | 'live' | 'disposed' | 'files' | 'inbox' | 'setState'
> {
  readonly store: Pick<RouterStorage, 'transaction'>;
  readonly repo: Pick<RouterRepository, 'liveMessages' | 'payloadFiles' | 'payloadFileReferenced'>;
  readonly options: Pick<RouterOptions, 'payloadDir'>;
  readonly timeouts: Pick<Deadlines, 'arm' | 'armLease'>;
}

/** After a restart: every message not finished with is back in its inbox, with its deadlines. */
export function recover(core: RecoveryCore): void {
  const records = core.repo.liveMessages();
  core.store.transaction(() => {
    for (const record of records) {
      core.live.set(record.envelope.messageId, record);
      const inbox = core.inbox(record.recipientId);
      core.setState(record, record.state);
      if (record.delivery === 'inflight' && record.deliverySeq !== null) inbox.inflight.set(record.deliverySeq, record);
      else if (record.delivery === 'queued') inbox.queue.push(record.lane, record);
    }
    if (records.length) {
      core.log.record({
        correlationId: core.ids.uuid(),
        actor: 'router',
        eventType: 'router.recovered',
        details: { messages: records.length },
      });
    }
  });
  for (const record of records) {
    core.timeouts.arm(record);
    if (record.tracked && record.delivery === 'inflight') core.timeouts.armLease(record);
  }
}

/**
 * At start, before recovery: every payload file the store references must be there with its size, or the store
 * refuses to start (`missing-data`): messages would otherwise be delivered without their bytes.
 */
export function checkPayloadFiles(core: RecoveryCore): void {
  const referenced = core.repo.payloadFiles();
  if (referenced.length === 0) return;
  const dir = core.files?.dir ?? core.options.payloadDir ?? '<data folder>/payloads';
  const what = core.files
    ? core.files.missing(referenced)
    : `${referenced.length} payload file${referenced.length === 1 ? '' : 's'} referenced by the store, and no payload folder was given`;
  if (what === undefined) return;
  throw new StoreOpenError(
    dir,
    'missing-data',
    `The SW4RM store has lost committed data: ${what}. The payload folder ${dir} holds the payloads of 1 MiB or more of ` +
      'messages and dead letters the store references. The coordinator will not start and has not changed anything. ' +
      `Restore the folder ${dir} from a backup (together with the store files beside it) and start again. ` +
      `Only if you accept losing those messages: move the data folder ${path.dirname(dir)} aside to start with an empty store.`,
  );
}

/**
 * After start: deletes the payload files nobody references (a crash between a file's write and its commit, or between
 * the commit that removed its last owner and the unlink), asynchronously, and logs what it deleted.
 */
export async function sweepPayloadFiles(core: RecoveryCore): Promise<string[]> {
  const files = core.files;
  if (!files) return [];
  // Asked just before each deletion, so that a file referenced since the listing stays.
  const deleted = await files
    .sweep((fileId) => core.disposed || core.repo.payloadFileReferenced(fileId))
    .catch((err: Error) => {
      if (!core.disposed)
        core.guard.run('', () => {
          throw err;
        });
      return [] as string[];
    });
  if (deleted.length > 0 && !core.disposed) {
    core.guard.run('', () =>
      core.store.transaction(() =>
        core.log.record({
          correlationId: core.ids.uuid(),
          actor: 'router',
          eventType: 'router.payload_files_swept',
          level: 'WARN',
          details: { folder: files.dir, deleted: deleted.length, files: deleted.slice(0, 20) },
        }),
      ),
    );
  }
  return deleted;
}
