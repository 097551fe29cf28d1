import type { Clock } from '../clock';
import { MIB } from '../limits';
import type { RouterRepository } from './model';

/** The store's size is read back at most this often; in between, admitted payloads are added to the estimate. */
export const STORE_USAGE_READ_MS = 5_000;

/** What the store holds against its disk budget (RouterOptions.storeBudgetBytes). Plain data. */
export interface StoreUsage {
  /** Bytes of the store file in use (pages in use × page size), as last estimated. */
  readonly bytes: number;
  readonly budget: number;
}

/**
 * A running estimate of the store's size for the disk budget, cheap enough for admission: the store is asked
 * (pages in use × page size, no filesystem call) at most every STORE_USAGE_READ_MS, and every admitted message
 * adds its payload bytes until the next read. Releases and pruning show at the next read.
 */
export class StoreBudget {
  private bytes = 0;
  private readAt = -Infinity;

  constructor(
    private readonly repo: RouterRepository,
    private readonly clock: Clock,
    readonly budget: number,
  ) {}

  /** The estimate, read back from the store when the last read is STORE_USAGE_READ_MS old. */
  usage(): StoreUsage {
    const now = this.clock.now();
    if (now - this.readAt >= STORE_USAGE_READ_MS || now < this.readAt) {
      // The store file's pages in use and the payload files it references (payloadFiles.ts).
      this.bytes = this.repo.storeBytes() + this.repo.payloadFileBytes();
      this.readAt = now;
    }
    return { bytes: this.bytes, budget: this.budget };
  }

  /** Counts bytes just committed (until the next read replaces the estimate). */
  added(bytes: number): void {
    this.bytes += bytes;
  }

  /** Why `incoming` more bytes would take the store over its budget; undefined when they fit. */
  refusal(incoming: number): string | undefined {
    const { bytes, budget } = this.usage();
    if (bytes + incoming <= budget) return undefined;
    return (
      `the store holds ${mib(bytes)} of its ${mib(budget)} disk budget (storeBudgetBytes, the setting sw4rm.storeBudgetMiB); ` +
      `a message of ${incoming} bytes would take it over. Finished messages release their payloads; retry later or raise the budget`
    );
  }
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return `${(bytes / MIB).toFixed(1)} MiB`;
}
