import { Emitter, type Event } from '../../events';
import type { HandoffChange, HandoffRecord } from '../../handoff/model';
import type { HandoffsApi, HandoffView } from '../sections/handoffs';
import type { InProcessHost } from './host';
import { boundedLimit, DEFAULT_LIST, payloadText } from './views';

/** CoordinatorApi's handoff section over a coordinator in this thread. */
export function handoffsSection(host: InProcessHost): HandoffsApi {
  let handoffsChanged: Emitter<HandoffChange> | undefined;
  return {
    /** Subscribed to the core on first use. */
    get onDidChangeHandoffs(): Event<HandoffChange> {
      if (host.disposed) return () => ({ dispose: () => undefined });
      if (!handoffsChanged) {
        const emitter = (handoffsChanged = new Emitter<HandoffChange>());
        host.subscribe(
          host.coordinator.handoffs.onDidChange((change) => {
            if (!host.disposed) emitter.fire(change);
          }),
          emitter,
        );
      }
      return handoffsChanged.event;
    },

    handoffs(limit = DEFAULT_LIST): Promise<HandoffView[]> {
      return host.run((c) => c.handoffs.recent(boundedLimit(limit)).map((r) => handoffView(r)));
    },

    handoff(requestId: string): Promise<HandoffView | undefined> {
      return host.run((c) => {
        const record = c.handoffs.get(requestId);
        return record && handoffView(record);
      });
    },

    acceptHandoff(requestId: string, by: string): Promise<HandoffView> {
      return host.run((c) =>
        handoffView(c.handoffs.acceptAsOperator(requestId, by, { correlationId: c.ids.uuid(), principal: 'operator' })),
      );
    },

    rejectHandoff(requestId: string, reason: string, by: string): Promise<HandoffView> {
      return host.run((c) =>
        handoffView(
          c.handoffs.rejectAsOperator(requestId, reason, by, { correlationId: c.ids.uuid(), principal: 'operator' }),
        ),
      );
    },
  };
}

/** The record for the editor: the context as bounded text (a listed record holds only its first bytes; contextBytes is the size). */
function handoffView(record: HandoffRecord): HandoffView {
  const { context, ...rest } = record;
  return { ...rest, context: { ...payloadText(context, record.contextContentType), bytes: record.contextBytes } };
}
