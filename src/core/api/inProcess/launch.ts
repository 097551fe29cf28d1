import type { Event } from '../../events';
import type {
  BridgeEndpoints,
  LaunchesChange,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  ProfileAvailability,
  ProfileIssue,
} from '../../launch/model';
import type { LaunchApi } from '../sections/launch';
import type { InProcessHost } from './host';

/** CoordinatorApi's launch section over a coordinator in this thread. */
export function launchSection(host: InProcessHost): LaunchApi {
  /** Launch changes, passed on while this API is not disposed. */
  const onDidChangeLaunches: Event<LaunchesChange> = (listener) =>
    host.coordinator.launches.onDidChange((change) => {
      if (!host.disposed) listener(change);
    });
  return {
    onDidChangeLaunches,

    launchProfiles(): Promise<{ readonly profiles: LaunchProfile[]; readonly issues: ProfileIssue[] }> {
      return host.run((c) => c.launches.profiles());
    },

    setLaunchProfileSettings(value: unknown): Promise<ProfileIssue[]> {
      return host.run((c) => c.launches.setSettingsProfiles(value));
    },

    profileAvailability(profileId: string): Promise<ProfileAvailability> {
      return host.run((c) => c.launches.availability(profileId));
    },

    launchAgent(request: LaunchRequest, by: string): Promise<LaunchPlan> {
      return host.runAsync((c) =>
        c.sessions.launch(request, by, { correlationId: c.ids.uuid(), principal: 'operator' }),
      );
    },

    relaunchAgent(agentId: string, by: string): Promise<LaunchPlan> {
      return host.runAsync((c) =>
        c.sessions.relaunch(agentId, by, { correlationId: c.ids.uuid(), principal: 'operator' }),
      );
    },

    launchStarted(agentId: string): Promise<LaunchRecord> {
      return host.run((c) => c.launches.started(agentId, { correlationId: c.ids.uuid(), principal: 'operator' }));
    },

    launchExited(agentId: string, exitCode: number | null, by: string): Promise<LaunchRecord> {
      return host.run((c) =>
        c.launches.exited(agentId, exitCode, by, { correlationId: c.ids.uuid(), principal: 'operator' }),
      );
    },

    launches(): Promise<LaunchRecord[]> {
      return host.run((c) => c.launches.list());
    },

    launch(agentId: string): Promise<LaunchRecord | undefined> {
      return host.run((c) => c.launches.get(agentId));
    },

    bridgeEndpoints(): Promise<BridgeEndpoints | undefined> {
      return host.run((c) => c.launches.bridgeEndpoints());
    },
  };
}
