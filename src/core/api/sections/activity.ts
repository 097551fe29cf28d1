import type { Event } from '../../events';
import type { ActivityChange, ActivityEntry, ActivityFilter } from '../../activity/model';
import type { ActivityUsage } from '../../activity/activityBuffer';

export type { ActivityChange, ActivityEntry, ActivityFilter, ActivityUsage };

/** Activity (RFC §10): the activity buffer. Part of CoordinatorApi (coordinatorApi.ts). */
export interface ActivityApi {
  /** Active entries matching `filter`, newest first. */
  activity(filter?: ActivityFilter): Promise<ActivityEntry[]>;
  /** Ended entries (the recent history) matching `filter`, newest ended first. */
  activityHistory(filter?: ActivityFilter, limit?: number): Promise<ActivityEntry[]>;
  /** How full the buffer is (a warning from 80%). */
  activityUsage(): Promise<ActivityUsage>;
  /** An entry was added or ended, or entries were purged (a live feed). */
  readonly onDidChangeActivity: Event<ActivityChange>;
}
