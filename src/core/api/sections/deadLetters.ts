import type { Event } from '../../events';
import type { DeadLetter, DeadLetterFilter } from '../../router/model';
import type { SendResult } from '../../router/router';

/** Dead letters (RFC §21.1). Part of CoordinatorApi (coordinatorApi.ts). */
export interface DeadLettersApi {
  /** Dead letters matching `filter`, newest first (requeued ones only when the filter includes them). */
  deadLetters(filter?: DeadLetterFilter): Promise<DeadLetter[]>;
  deadLetter(id: number): Promise<DeadLetter | undefined>;
  /** Dead letters not yet requeued. */
  deadLetterCount(): Promise<number>;
  /** The diagnostic bundle (JSON) of the dead letters matching `filter`. */
  exportDeadLetters(filter?: DeadLetterFilter): Promise<Record<string, unknown>>;
  /** Sends a dead letter again as a new message; a refusal is an answer, not an error. */
  requeueDeadLetter(id: number, options?: { readonly correlationId?: string }): Promise<RequeueResult>;
  readonly onDidChangeDeadLetters: Event<DeadLettersChange>;
}

export interface DeadLettersChange {
  readonly kind: 'added' | 'requeued' | 'pruned';
  /** The dead letter added or requeued. */
  readonly id?: number;
}

/**
 * Accepted with the new message's id, or refused with the SW4RM error code (e.g. DUPLICATE_DETECTED for one
 * already requeued) and why.
 */
export type RequeueResult = SendResult;
