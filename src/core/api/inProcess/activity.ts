import type { ActivityUsage } from '../../activity/activityBuffer';
import type { ActivityChange, ActivityEntry, ActivityFilter } from '../../activity/model';
import type { ActivityApi } from '../sections/activity';
import type { InProcessHost } from './host';

/** CoordinatorApi's activity section over a coordinator in this thread. */
export function activitySection(host: InProcessHost): ActivityApi {
  const activityChanged = host.emitter<ActivityChange>();
  host.subscribe(host.coordinator.activity.onDidChange((change) => activityChanged.fire(change)));
  return {
    onDidChangeActivity: activityChanged.event,

    activity(filter?: ActivityFilter): Promise<ActivityEntry[]> {
      return host.run((c) => c.activity.entries(filter));
    },

    activityHistory(filter?: ActivityFilter, limit?: number): Promise<ActivityEntry[]> {
      return host.run((c) => c.activity.history(filter, limit));
    },

    activityUsage(): Promise<ActivityUsage> {
      return host.run((c) => c.activity.usage());
    },
  };
}
