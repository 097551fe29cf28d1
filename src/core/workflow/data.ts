import type { DataPart } from './core';
import type { WorkflowStorage } from './model';
import type { DataWrites, LiveWorkflow } from './state';

/** A new workflow_data snapshot is stored once the writes since the last one hold more characters than it (at least this many). */
const DATA_SNAPSHOT_MIN_CHARS = 64 * 1024;

/**
 * workflow_data in the store: each write made in memory (state.ts applyWrites) stored as one row, inside the caller's
 * transition, and a new snapshot once the writes outweigh the last one (O(|workflow_data|), amortised).
 */
export class DataLog implements DataPart {
  constructor(private readonly store: Pick<WorkflowStorage, 'workflows'>) {}

  /** Stores writes applyWrites made (one row each, inside the caller's transaction); a new snapshot once they outweigh the last. */
  commitWrites(live: LiveWorkflow, written: DataWrites): void {
    if (written.writes.length === 0) return;
    live.dataBytes += written.bytes;
    for (const [path, value] of written.writes) {
      const json = JSON.stringify(value);
      this.store.workflows.appendData(live.record.workflowId, ++live.dataSeq, path, json);
      live.dataLogChars += json.length + path.reduce((n, p) => n + p.length + 3, 2);
    }
    if (live.dataLogChars > Math.max(DATA_SNAPSHOT_MIN_CHARS, live.dataBytes)) this.snapshotData(live);
  }

  /** Stores workflow_data whole (dropping the writes before): at start, and when the writes outweigh the last snapshot. */
  snapshotData(live: LiveWorkflow): void {
    const json = JSON.stringify(live.data);
    live.dataBytes = Buffer.byteLength(json);
    this.store.workflows.putData(live.record.workflowId, ++live.dataSeq, json);
    live.dataLogChars = 0;
  }
}
