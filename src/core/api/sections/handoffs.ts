import type { Event } from '../../events';
import type { HandoffChange, HandoffRecord } from '../../handoff/model';
import type { PayloadText } from './payloadText';

export type { HandoffChange, HandoffRecord };

/** Handoffs (RFC §17.6; README, "Handoffs"). Part of CoordinatorApi (coordinatorApi.ts). */
export interface HandoffsApi {
  /** Handoffs: pending first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  handoffs(limit?: number): Promise<HandoffView[]>;
  handoff(requestId: string): Promise<HandoffView | undefined>;
  /**
   * The operator takes a handoff that policy routed to a person (`awaitingOperator`): ACCEPTED by `operator:<by>`.
   * Rejects `not_found`, or `refused` when it is not waiting for a person.
   */
  acceptHandoff(requestId: string, by: string): Promise<HandoffView>;
  /** The operator declines it: REJECTED with `reason` (required). Same refusals as acceptHandoff. */
  rejectHandoff(requestId: string, reason: string, by: string): Promise<HandoffView>;
  readonly onDidChangeHandoffs: Event<HandoffChange>;
}

/** A handoff for the editor: the record without the context's bytes, the context as bounded text. */
export type HandoffView = Omit<HandoffRecord, 'context'> & { readonly context: PayloadText };
