import type { NegotiationSummary } from '../../negotiation/model';
import type { PolicySet } from '../../policy/model';
import type { PolicySettings } from '../../policy/policies';
import type { NegotiationDetailView, NegotiationsApi, NegotiationsChange } from '../sections/negotiations';
import type { InProcessHost } from './host';
import { boundedLimit, DEFAULT_LIST, payloadText, withoutKey } from './views';

/** CoordinatorApi's negotiation section (the policy, the debates; the room's changes too) over a coordinator in this thread. */
export function negotiationsSection(host: InProcessHost): NegotiationsApi {
  const negotiationsChanged = host.emitter<NegotiationsChange>();
  host.subscribe(
    host.coordinator.negotiations.onDidChange((change) =>
      negotiationsChanged.fire({ kind: 'debate', id: change.negotiationId, state: change.state }),
    ),
    host.coordinator.room.onDidChange((change) =>
      negotiationsChanged.fire({ kind: 'room', id: change.artifactId, roomId: change.roomId, state: change.state }),
    ),
  );
  return {
    onDidChangeNegotiations: negotiationsChanged.event,

    negotiationPolicy(): Promise<PolicySet> {
      return host.run((c) => c.policies.current());
    },

    applyNegotiationSettings(settings: PolicySettings): Promise<PolicySet> {
      return host.run((c) => c.policies.applySettings(settings, { correlationId: c.ids.uuid() }));
    },

    negotiations(limit = DEFAULT_LIST): Promise<NegotiationSummary[]> {
      return host.run((c) => c.negotiations.list(boundedLimit(limit)));
    },

    negotiationDetail(negotiationId: string): Promise<NegotiationDetailView | undefined> {
      return host.run((c) => {
        const detail = c.negotiations.detail(negotiationId);
        if (!detail) return undefined;
        const r = detail.record;
        const decision = r.decision;
        return {
          negotiation: {
            id: r.id,
            correlationId: r.correlationId,
            topic: r.topic,
            participants: [...r.participants],
            intensity: r.intensity,
            openedBy: r.openedBy,
            openedAt: r.openedAt,
            deadlineAt: r.deadlineAt,
            effective: r.effective,
            schema: r.schema,
            state: r.state,
            rounds: r.rounds,
            tokensUsed: r.tokensUsed,
            oscillations: r.oscillations,
            roundStartedAt: r.roundStartedAt,
            pending: r.pending,
            abort: r.abort,
            updatedAt: r.updatedAt,
            decision: decision && {
              ...withoutKey(decision, 'result'),
              result: payloadText(decision.result, decision.contentType),
            },
          },
          rounds: detail.rounds.map((round) => ({
            ...withoutKey(round, 'payload'),
            payload: payloadText(round.payload, round.contentType),
          })),
        };
      });
    },
  };
}
