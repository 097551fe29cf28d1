import { type AnalysedRoute } from './cel';
import { IssueList, issuePath, quote } from './issues';
import type { WorkflowNodeDefinition } from './model';

// The graph's checks over validate.ts' flat edge arrays (CSR): the dependents, cycles of dependency edges, nodes that can never run.

export const NONE: readonly string[] = Object.freeze([]);

/**
 * node → the nodes that list it in dependencies (author order), for every node with a valid id: a ReadonlyMap over
 * the validation's arrays, each list made at its first `get` (validating 100,000 nodes makes no 100,000 lists).
 */
export class DependentsMap implements ReadonlyMap<string, readonly string[]> {
  private readonly lists: (readonly string[] | undefined)[];

  constructor(
    private readonly nodes: readonly WorkflowNodeDefinition[],
    private readonly index: ReadonlyMap<string, number>,
    private readonly start: Int32Array,
    private readonly dependent: Int32Array,
  ) {
    this.lists = new Array(nodes.length);
  }

  get size(): number {
    return this.index.size;
  }

  has(nodeId: string): boolean {
    return this.index.has(nodeId);
  }

  get(nodeId: string): readonly string[] | undefined {
    const i = this.index.get(nodeId);
    return i === undefined ? undefined : this.at(i);
  }

  private at(i: number): readonly string[] {
    let list = this.lists[i];
    if (list === undefined) {
      const count = this.start[i + 1] - this.start[i];
      if (count === 0) list = NONE;
      else {
        const ids = new Array<string>(count);
        for (let k = 0; k < count; k++) ids[k] = this.nodes[this.dependent[this.start[i] + k]].nodeId;
        list = Object.freeze(ids);
      }
      this.lists[i] = list;
    }
    return list;
  }

  *entries(): MapIterator<[string, readonly string[]]> {
    for (const [id, i] of this.index) yield [id, this.at(i)];
  }

  keys(): MapIterator<string> {
    return this.index.keys();
  }

  *values(): MapIterator<readonly string[]> {
    for (const i of this.index.values()) yield this.at(i);
  }

  [Symbol.iterator](): MapIterator<[string, readonly string[]]> {
    return this.entries();
  }

  forEach(
    callback: (value: readonly string[], key: string, map: ReadonlyMap<string, readonly string[]>) => void,
    thisArg?: unknown,
  ): void {
    for (const [id, i] of this.index) callback.call(thisArg, this.at(i), id, this);
  }
}

/** Is `d` among from … to - 1 of `list`? (a node's first few dependencies: compared in place, no lookup table) */
export function listed(list: Int32Array, from: number, to: number, d: number): boolean {
  for (let k = from; k < to; k++) if (list[k] === d) return true;
  return false;
}

export function countUsable(usable: Uint8Array): number {
  let c = 0;
  for (let i = 0; i < usable.length; i++) c += usable[i];
  return c;
}

/**
 * One real cycle per walk: from each node left unordered (author order), follow a dependency that is also unordered (one
 * always exists) until the walk meets itself (a cycle: report it) or an earlier walk (nothing new). Every node is walked
 * at most once: O(V + E).
 */
export function reportCycles(
  issues: IssueList,
  nodes: readonly WorkflowNodeDefinition[],
  usable: Uint8Array,
  remaining: Uint32Array,
  depStart: Int32Array,
  depNode: Int32Array,
  depPos: Int32Array,
): number {
  const n = nodes.length;
  const walkOf = new Int32Array(n); // 0: not walked; else the walk's number
  const stepOf = new Int32Array(n); // the node's position in its walk
  const walk: number[] = [];
  let walks = 0;
  let found = 0;
  for (let start = 0; start < n; start++) {
    if (!usable[start] || remaining[start] === 0 || walkOf[start] !== 0) continue;
    walks++;
    walk.length = 0;
    let cur = start;
    for (;;) {
      walkOf[cur] = walks;
      stepOf[cur] = walk.length;
      walk.push(cur);
      let next = -1;
      for (let k = depStart[cur]; k < depStart[cur + 1]; k++) {
        if (remaining[depNode[k]] > 0) {
          next = depNode[k];
          break;
        }
      }
      if (next < 0) break; // cannot happen: an unordered node has an unordered dependency
      if (walkOf[next] === walks) {
        found++;
        reportCycle(issues, nodes, walk.slice(stepOf[next]), depStart, depNode, depPos);
        break;
      }
      if (walkOf[next] !== 0) break;
      cur = next;
    }
  }
  return found;
}

/** `cycle`: each depends on the next, the last on the first. Reported at the node the author wrote first. */
function reportCycle(
  issues: IssueList,
  nodes: readonly WorkflowNodeDefinition[],
  cycle: number[],
  depStart: Int32Array,
  depNode: Int32Array,
  depPos: Int32Array,
): void {
  let first = 0;
  for (let k = 1; k < cycle.length; k++) if (cycle[k] < cycle[first]) first = k;
  const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
  const ids = ordered.map((i) => nodes[i].nodeId);
  const head = ordered[0];
  let pos = 0;
  for (let k = depStart[head]; k < depStart[head + 1]; k++) if (depNode[k] === ordered[1]) pos = depPos[k];
  const MAX_SHOWN = 20;
  const shown =
    ids.length <= MAX_SHOWN
      ? ids.map((id) => quote(id, 40))
      : [
          ...ids.slice(0, MAX_SHOWN - 1).map((id) => quote(id, 40)),
          `… (${ids.length - MAX_SHOWN} more)`,
          quote(ids[ids.length - 1], 40),
        ];
  issues.error(
    head,
    'workflow_cycle_detected',
    issuePath('nodes', ids[0], 'dependencies', pos),
    `dependency cycle: ${shown.join(' → ')} → ${quote(ids[0], 40)} (each depends on the next): a node runs only when all its dependencies are COMPLETED, so none of these ${ids.length} nodes can start. Remove one of these dependencies; a way back belongs in a route (a conditional edge), not in dependencies`,
    { cycle: ids },
  );
}

/**
 * Which nodes can ever run (no cycle here): roots can; a node can when each of its dependencies can and either has no
 * route or has one that may choose it; a loop back from a node that can run makes its target run. A worklist, each node
 * entered once: O(V + E).
 */
export function reportUnreachable(
  issues: IssueList,
  nodes: readonly WorkflowNodeDefinition[],
  usable: Uint8Array,
  depStart: Int32Array,
  depNode: Int32Array,
  depPos: Int32Array,
  dependentStart: Int32Array,
  dependentNode: Int32Array,
  routes: readonly (AnalysedRoute | undefined)[],
  index: ReadonlyMap<string, number>,
): void {
  const n = nodes.length;
  const runs = new Uint8Array(n);
  const enabled = new Uint32Array(n); // ≤ maxDependencies
  const work = new Int32Array(n); // a stack: each node is pushed once
  let top = 0;
  const mark = (i: number) => {
    if (!runs[i]) {
      runs[i] = 1;
      work[top++] = i;
    }
  };
  for (let i = 0; i < n; i++)
    if (usable[i] && depStart[i + 1] === depStart[i] && nodes[i].dependencies.length === 0) mark(i);
  while (top > 0) {
    const v = work[--top];
    const route = routes[v];
    if (route?.computed) return; // it may choose any node: none is provably unreachable
    for (let k = dependentStart[v]; k < dependentStart[v + 1]; k++) {
      const w = dependentNode[k];
      if (route && !route.mayChoose(nodes[w].nodeId, true)) continue;
      if (++enabled[w] === depStart[w + 1] - depStart[w]) mark(w);
    }
    if (route)
      for (const target of route.targets) {
        const t = index.get(target);
        if (t !== undefined) mark(t);
      }
  }
  for (let i = 0; i < n; i++) {
    if (!usable[i] || runs[i]) continue;
    const id = nodes[i].nodeId;
    let path = issuePath('nodes', id);
    let reason = 'no root leads to it';
    for (let k = depStart[i]; k < depStart[i + 1]; k++) {
      const d = depNode[k];
      const dep = nodes[d].nodeId;
      path = issuePath('nodes', id, 'dependencies', depPos[k]);
      if (!runs[d]) {
        reason = `its dependency ${quote(dep)} never runs`;
        break;
      }
      const route = routes[d];
      if (route && !route.mayChoose(id, true)) {
        const answers = [...route.targets.map((t) => quote(t)), ...(route.mayChooseDependents ? ['a bool'] : [])];
        reason = `the route of its dependency ${quote(dep)} never chooses it (it answers ${answers.join(', ') || 'nothing'})`;
        break;
      }
    }
    issues.warning(i, 'unreachable_node', path, `node ${quote(id)} can never run: ${reason}; it will be SKIPPED`);
  }
}
