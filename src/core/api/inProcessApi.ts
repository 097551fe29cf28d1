import type { Coordinator } from '../coordinator';
import type { Disposable } from '../events';
import type { CoordinatorApi } from './coordinatorApi';
import { activitySection } from './inProcess/activity';
import { credentialsSection } from './inProcess/credentials';
import { deadLettersSection } from './inProcess/deadLetters';
import { handoffsSection } from './inProcess/handoffs';
import { hitlSection } from './inProcess/hitl';
import { InProcessHost } from './inProcess/host';
import { launchSection } from './inProcess/launch';
import { sessionsSection } from './inProcess/sessions';
import { negotiationsSection } from './inProcess/negotiations';
import { registrySection } from './inProcess/registry';
import { roomSection } from './inProcess/room';
import { routerSection } from './inProcess/router';
import { schedulerSection } from './inProcess/scheduler';
import { toolsSection } from './inProcess/tools';
import { workflowsSection } from './inProcess/workflows';
import { worktreesSection } from './inProcess/worktrees';

export { payloadText } from './inProcess/views';

/** The members of every section of a tuple together. */
type Together<T extends readonly unknown[]> = T extends readonly [infer First, ...infer Rest]
  ? First & Together<Rest>
  : unknown;

/**
 * Puts every section's members on `api` (getters stay getters). `_whole` is `true` only when the sections together are
 * the whole CoordinatorApi: a section missing from the list is a compile error at the call.
 */
function compose<S extends readonly object[]>(
  api: object,
  sections: readonly [...S],
  _whole: Together<S> extends CoordinatorApi ? true : false,
): void {
  for (const section of sections) Object.defineProperties(api, Object.getOwnPropertyDescriptors(section));
}

/** The class has CoordinatorApi's members: the sections put them on each instance (`compose`). */
export interface InProcessCoordinatorApi extends CoordinatorApi {}

/**
 * The CoordinatorApi over a coordinator in this thread. Every call does its work at once (before the first
 * `await` of its caller), so the order of calls is the order of effects, as with direct calls; the answer is
 * a Promise all the same. Core events are passed on as they happen. After `dispose` (the coordinator is
 * stopping) calls reject with CoordinatorApiError `stopped` and no event fires.
 *
 * Each area's part is its own section (inProcess/<area>.ts, beside the area's interface in sections/<area>.ts): a
 * method of an area is implemented there only. They share an InProcessHost (inProcess/host.ts): the coordinator,
 * `run` / `runAsync` with the core's errors translated (inProcess/translate.ts), and what `dispose` releases.
 */
export class InProcessCoordinatorApi implements CoordinatorApi, Disposable {
  private readonly host: InProcessHost;

  constructor(coordinator: Coordinator) {
    const host = (this.host = new InProcessHost(coordinator));
    // In this order they subscribe to the core, as the one constructor did.
    compose(
      this,
      [
        registrySection(host),
        routerSection(host),
        deadLettersSection(host),
        hitlSection(host),
        credentialsSection(host),
        worktreesSection(host),
        schedulerSection(host),
        activitySection(host),
        toolsSection(host),
        negotiationsSection(host),
        roomSection(host),
        handoffsSection(host),
        workflowsSection(host),
        launchSection(host),
        sessionsSection(host),
      ],
      true,
    );
  }

  /** Detaches the operators attached through this API and stops answering; the coordinator itself is not touched. */
  dispose(): void {
    this.host.dispose();
  }
}
