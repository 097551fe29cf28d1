import type { Event } from '../../events';
import type { PolicySet } from '../../policy/model';
import type { PolicySettings } from '../../policy/policies';
import type { NegotiationDecision, NegotiationRecord, NegotiationSummary, RoundRecord } from '../../negotiation/model';
import type { PayloadText } from './payloadText';

/**
 * Negotiation (RFC §17, §17.2; README, "Negotiations view"): the policy in force and the debates.
 * `onDidChangeNegotiations` also tells of room artifacts (RoomApi). Part of CoordinatorApi (coordinatorApi.ts).
 */
export interface NegotiationsApi {
  /** The negotiation policy set in force (its newest version). */
  negotiationPolicy(): Promise<PolicySet>;
  /**
   * The editor's sw4rm.negotiation.* settings (laid over the newest version): a new version when anything differs, the
   * same one otherwise. Rejects `invalid` with the field named (`policy.max_rounds: must be within …`).
   */
  applyNegotiationSettings(settings: PolicySettings): Promise<PolicySet>;
  /** Debates: open and paused first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  negotiations(limit?: number): Promise<NegotiationSummary[]>;
  /** A debate with its rounds, payloads as bounded text; undefined for an unknown id. */
  negotiationDetail(negotiationId: string): Promise<NegotiationDetailView | undefined>;
  /** A debate or a room artifact changed state (opened, a round, a vote, escalated, decided…). Refresh throttled. */
  readonly onDidChangeNegotiations: Event<NegotiationsChange>;
}

/** A debate's record for the editor: what it shows (not the core's delivery bookkeeping), the decision's result as text. */
export type NegotiationView = Pick<
  NegotiationRecord,
  | 'id'
  | 'correlationId'
  | 'topic'
  | 'participants'
  | 'intensity'
  | 'openedBy'
  | 'openedAt'
  | 'deadlineAt'
  | 'effective'
  | 'schema'
  | 'state'
  | 'rounds'
  | 'tokensUsed'
  | 'oscillations'
  | 'roundStartedAt'
  | 'pending'
  | 'abort'
  | 'updatedAt'
> & {
  readonly decision: (Omit<NegotiationDecision, 'result'> & { readonly result: PayloadText }) | null;
};

export type RoundView = Omit<RoundRecord, 'payload'> & { readonly payload: PayloadText };

export interface NegotiationDetailView {
  readonly negotiation: NegotiationView;
  readonly rounds: readonly RoundView[];
}

export type NegotiationsChange =
  | { readonly kind: 'debate'; readonly id: string; readonly state: string }
  | { readonly kind: 'room'; readonly id: string; readonly roomId: string; readonly state: string };
