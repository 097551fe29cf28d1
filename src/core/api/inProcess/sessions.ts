import type { Event } from '../../events';
import type { SessionRecord, StoredEntry } from '../../sessions/model';
import type { SessionsChange } from '../../sessions/sessions';
import type { SessionsApi } from '../sections/sessions';
import type { InProcessHost } from './host';

/** CoordinatorApi's sessions section over a coordinator in this thread. */
export function sessionsSection(host: InProcessHost): SessionsApi {
  const onDidChangeSessions: Event<SessionsChange> = (listener) =>
    host.coordinator.sessions.onDidChange((change) => {
      if (!host.disposed) listener(change);
    });
  return {
    onDidChangeSessions,

    sessions(): Promise<SessionRecord[]> {
      return host.run((c) => c.sessions.list());
    },

    session(agentId: string): Promise<SessionRecord | undefined> {
      return host.run((c) => c.sessions.get(agentId));
    },

    sessionTranscript(agentId: string, limit?: number): Promise<{ entries: StoredEntry[]; dropped: number }> {
      return host.run((c) => c.sessions.transcript(agentId, limit));
    },

    promptSession(agentId: string, text: string, by: string): Promise<void> {
      return host.run((c) => c.sessions.prompt(agentId, text, by));
    },

    stopSessionTurn(agentId: string): Promise<void> {
      return host.runAsync((c) => c.sessions.stop(agentId));
    },

    endSession(agentId: string): Promise<void> {
      return host.runAsync((c) => c.sessions.end(agentId));
    },
  };
}
