import * as inspector from 'node:inspector';

/** The sampling interval of the profile (µs). */
const SAMPLE_US = 500;

/** A CPU profile as the inspector's Profiler answers it (the fields read here). */
interface Profile {
  readonly nodes: ReadonlyArray<{
    readonly id: number;
    readonly callFrame: {
      readonly url: string;
      readonly functionName?: string;
      readonly lineNumber?: number;
      readonly columnNumber?: number;
    };
    readonly children?: readonly number[];
  }>;
  readonly samples: readonly number[];
}

/**
 * The extension's own work on this thread, apart from other extensions' and the editor's: the thread's CPU profile
 * (the inspector's sampling Profiler, in this process, every 0.5 ms), cut into stretches of consecutive samples whose
 * call stack holds a frame of `ownScript` (this extension's bundle). Each stretch is one hold of the thread by the
 * extension; its length is its samples × the interval. Only for the tests (SW4RM_MAIN_THREAD_REPORT): profiling costs.
 */
export class OwnWorkProfiler {
  private readonly session = new inspector.Session();
  private running = false;

  constructor(private readonly ownScript: string) {
    this.session.connect();
    this.post('Profiler.enable')
      .then(() => this.post('Profiler.setSamplingInterval', { interval: SAMPLE_US }))
      .then(() => this.start())
      .catch(() => undefined);
  }

  /** The stretches since the last call, in ms, longest first, and where the longest began; profiling goes on. */
  async take(): Promise<{ holds: number[]; longestAt: string | undefined }> {
    if (!this.running) return { holds: [], longestAt: undefined };
    this.running = false;
    const { profile } = (await this.post('Profiler.stop')) as { profile: Profile };
    await this.start();
    return { holds: stretches(profile, this.ownScript), longestAt: longestAt(profile, this.ownScript) };
  }

  dispose(): void {
    this.session.disconnect();
  }

  private async start(): Promise<void> {
    await this.post('Profiler.start');
    this.running = true;
  }

  private post(method: string, params?: object): Promise<unknown> {
    return new Promise((resolve, reject) =>
      this.session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
    );
  }
}

/** The profile's stretches of consecutive samples with a frame of `script` on the stack, in ms, longest first. */
export function stretches(profile: Profile, script: string): number[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const ours = new Set<number>();
  const isOurs = (url: string) => url === script || url.endsWith(script);
  // Parents come before their children in the inspector's node list; walk from the root (the first node) down.
  const visit = (id: number, inside: boolean): void => {
    const node = byId.get(id);
    if (!node) return;
    const mine = inside || isOurs(node.callFrame.url);
    if (mine) ours.add(id);
    for (const child of node.children ?? []) visit(child, mine);
  };
  if (profile.nodes.length) visit(profile.nodes[0].id, false);
  const found: number[] = [];
  let run = 0;
  for (const sample of profile.samples) {
    if (ours.has(sample)) run++;
    else if (run > 0) {
      found.push((run * SAMPLE_US) / 1000);
      run = 0;
    }
  }
  if (run > 0) found.push((run * SAMPLE_US) / 1000);
  return found.sort((a, b) => b - a);
}

/** The extension's outermost frame in the longest stretch: `function@line:column` (a bundle's position). */
export function longestAt(profile: Profile, script: string): string | undefined {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const isOurs = (url: string) => url === script || url.endsWith(script);
  const outermost = (id: number): string | undefined => {
    let found: string | undefined;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (frame && isOurs(frame.url))
        found = `${frame.functionName || '(anonymous)'}@${frame.lineNumber}:${frame.columnNumber}`;
    }
    return found;
  };
  let best: { length: number; at: string | undefined } = { length: 0, at: undefined };
  let run = 0;
  let first: string | undefined;
  for (const sample of [...profile.samples, -1]) {
    const at = sample >= 0 ? outermost(sample) : undefined;
    if (at !== undefined) {
      if (run++ === 0) first = at;
    } else if (run > 0) {
      if (run > best.length) best = { length: run, at: first };
      run = 0;
    }
  }
  return best.at;
}
