import type {
  CoordinatorSendInput,
  InboxStats,
  MessageDetail,
  MessageQuery,
  MessageSummary,
  SendResult,
  StoreUsage,
} from '../../router/router';
import type { InboxChange, RouterApi } from '../sections/router';
import type { InProcessHost } from './host';

/** CoordinatorApi's router section (inboxes, messages, the store's usage) over a coordinator in this thread. */
export function routerSection(host: InProcessHost): RouterApi {
  const inboxChanged = host.emitter<InboxChange>();
  host.subscribe(host.coordinator.router.onDidChange(({ agentId }) => inboxChanged.fire({ agentId })));
  return {
    onDidChangeInbox: inboxChanged.event,

    inboxStats(agentId: string): Promise<InboxStats> {
      return host.run((c) => c.router.inboxStats(agentId));
    },

    deliveredMessageCount(): Promise<number> {
      return host.run((c) => c.router.deliveredMessageCount());
    },

    metricsText(): Promise<string> {
      return host.run((c) => c.router.metricsText());
    },

    storeLocation(): Promise<string> {
      return host.run((c) => c.store.location);
    },

    storeUsage(): Promise<StoreUsage> {
      return host.run((c) => c.router.storeUsage());
    },

    messages(query?: MessageQuery): Promise<MessageSummary[]> {
      return host.run((c) => c.router.messages(query));
    },

    message(messageId: string): Promise<MessageDetail | undefined> {
      return host.run((c) => c.router.messageDetail(messageId));
    },

    sendMessage(message: CoordinatorSendInput, by: string): Promise<SendResult> {
      return host.run((c) => {
        const correlationId = message.correlationId || c.ids.uuid();
        const result = c.router.sendFromCoordinator({ ...message, correlationId }, { correlationId });
        c.log.record({
          correlationId,
          actor: by,
          eventType: 'operator.message_sent',
          level: result.accepted ? 'INFO' : 'WARN',
          details: {
            to: message.to.slice(0, 128),
            content_type: message.contentType,
            ...(result.accepted ? { message_id: result.messageId } : { error_code: result.code }),
          },
        });
        return result;
      });
    },
  };
}
