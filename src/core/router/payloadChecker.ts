import * as fs from 'node:fs';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Disposable } from '../events';
import type { ContentKind } from './payloadContent';

/** Where the worker's script is: beside this module (tsc output) or beside the bundle (dist/payloadWorker.js). */
export function payloadWorkerScript(dir: string = __dirname): string | undefined {
  const script = path.join(dir, 'payloadWorker.js');
  return fs.existsSync(script) ? script : undefined;
}

/** The worker's verdict, and the payload (the same bytes, whose memory went to the worker and came back). */
export interface PayloadVerdict {
  readonly refusal: string | undefined;
  readonly payload: Uint8Array;
  readonly digest?: string;
}

/** What the content digest covers besides the payload (contentDigest.ts), when the worker is to compute it. */
export interface DigestOf {
  readonly messageType: string;
  readonly contentType: string;
}

interface Pending {
  readonly resolve: (verdict: PayloadVerdict) => void;
  readonly reject: (err: Error) => void;
}

/**
 * Whether the payload's memory may move to the worker and back instead of being copied: only when the payload
 * owns its whole ArrayBuffer or nearly (a gRPC message's own buffer, of which the envelope's other fields are a
 * small part) and that buffer is not Node's shared pool.
 */
function transferable(payload: Uint8Array): boolean {
  const buffer = payload.buffer;
  return (
    buffer instanceof ArrayBuffer &&
    payload.byteLength >= 64 * 1024 &&
    buffer.byteLength - payload.byteLength <= 128 * 1024
  );
}

/**
 * Validates large payloads on one worker thread, in arrival order. Started on first use and unref'd, so an idle
 * coordinator keeps no thread busy and a process can exit. A large payload's memory is transferred to the worker and
 * back, not copied (the caller's views of it are empty meanwhile: use the verdict's `payload`); a payload sharing its
 * memory with other data is copied. A worker that dies fails what it had and is started again on next use.
 */
export class PayloadChecker implements Disposable {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private disposed = false;

  constructor(private readonly script: string) {}

  /**
   * Why the payload breaks rule 5 (`refusal`, undefined when it is valid; no check without a `kind`), the payload to
   * go on with, and with `digest` its content digest (contentDigest.ts), computed on the worker too.
   */
  check(kind: ContentKind | undefined, base: string, payload: Uint8Array, digest?: DigestOf): Promise<PayloadVerdict> {
    if (this.disposed) return Promise.reject(new Error('the payload checker has stopped'));
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) worker.ref();
      if (transferable(payload))
        worker.postMessage({ id, kind, base, payload, digest }, [payload.buffer as ArrayBuffer]);
      else worker.postMessage({ id, kind, base, payload, digest });
    });
  }

  /** Requests sent and not yet answered. */
  get busy(): number {
    return this.pending.size;
  }

  private start(): Worker {
    const worker = new Worker(this.script, { resourceLimits: { maxOldGenerationSizeMb: 64 } });
    worker.unref();
    worker.on('message', (answer: { id: number; refusal?: string; payload: Uint8Array; digest?: string }) => {
      const pending = this.pending.get(answer.id);
      if (!pending) return;
      this.pending.delete(answer.id);
      if (this.pending.size === 0) worker.unref();
      pending.resolve({
        refusal: answer.refusal,
        payload: answer.payload,
        ...(answer.digest ? { digest: answer.digest } : {}),
      });
    });
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      const waiting = [...this.pending.values()];
      this.pending.clear();
      for (const pending of waiting) pending.reject(err);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the payload worker stopped (exit code ${code})`)));
    this.worker = worker;
    return worker;
  }

  dispose(): void {
    this.disposed = true;
    const worker = this.worker;
    this.worker = undefined;
    if (worker) void worker.terminate();
  }
}
