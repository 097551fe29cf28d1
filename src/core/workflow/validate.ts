/**
 * RFC §17.7 workflow validation: everything CreateWorkflow checks before anything is persisted, in O(V + E).
 *
 * The graph. `dependencies` are unconditional edges dep → node: a node runs only when every dependency is COMPLETED (RFC
 * MUST). A node with metadata `route` (cel.ts) also has a conditional edge to each node its expression names; a target
 * that is not one of its dependents is a loop back. A cycle made only of dependency edges can never start (each of its
 * nodes waits for the previous one) and is refused with `workflow_cycle_detected`, naming the nodes of one real cycle in
 * order, each depending on the next (`a → b → c → a`); a conditional edge never makes such a cycle acceptable. A cycle
 * that goes through a loop back is allowed: the route can break it (graph-design-notes), and `max_iterations` bounds it.
 *
 * Refused (severity error; the code, then the path in file terms):
 * - `invalid_field`: an empty node id or workflow id, or one with whitespace, control characters, `,`, `:` or `/` (ids
 *   appear in task ids `wf:<workflow>:<node>:<run>` and scopes); an empty agent_id (or `type:` without a type); a trigger
 *   that is not one of TRIGGER_TYPES; an empty mapping key or value, a data path with an empty segment (`a..b`), two data
 *   keys mapped to the same input or two outputs to the same data key; `priority` not a whole number from -19 to 20,
 *   `scope` not a scheduler scope, `on_failure` not `fail` or `hitl`, `max_iterations` not a whole number from 1 to 1,000.
 * - `limit_exceeded`: more than WORKFLOW_LIMITS.maxNodes nodes, more than maxTotalDependencies dependencies,
 *   maxMapEntries map entries, maxTotalRouteChars route characters or maxTotalScheduleChars schedule characters in all (these five are counted before anything else is looked at, and refuse alone), ids
 *   longer than maxIdChars, more than maxDependencies dependencies on a node, metadata or mapping entries beyond their bounds.
 * - `duplicate_node` (two nodes with one id), `duplicate_dependency`, `unknown_dependency`, `self_dependency`, `no_root`
 *   (no node without dependencies), `workflow_cycle_detected`.
 * - `invalid_route` (cel.ts), `invalid_schedule` (a SCHEDULE node without a valid `schedule`, cron.ts), `invalid_event`
 *   (an EVENT node without `event`).
 * Warned (severity warning): `unreachable_node`, a node that can never run: a dependency never runs, or a dependency's
 * route never chooses it (its literals name other nodes) and no loop back names it; `unused_metadata`: `schedule` on a
 * node that is not SCHEDULE, `event` on one that is not EVENT. A route computing its answer from data may choose any node,
 * so then nothing is called unreachable.
 *
 * Issues come errors first, then warnings, each group in the author's node order (the workflow's own fields first); at
 * most MAX_ISSUES (100), then one `more_issues`. Nothing recurses, and every step is O(V + E) (a 100,000-node chain takes well under a second, though only 500 nodes are accepted).
 */
import { identifierRefusal } from '../fieldLimits';
import { isScopeRefusal, parseScope } from '../scheduler/model';
import { type AnalysedRoute, type CompiledRoute, compileRouteIn } from './cel';
import { scheduleError } from './cron';
import { IssueList, issuePath, quote } from './issues';
import { TRIGGER_TYPES, type ValidationIssue, type WorkflowDefinition, type WorkflowNodeDefinition } from './model';

export const WORKFLOW_LIMITS = {
  maxNodes: 500,
  /** Dependencies of one node. */
  maxDependencies: 500,
  /** Dependencies of all the nodes together. */
  maxTotalDependencies: 10_000,
  /** Entries of every map of a definition together: its metadata, and each node's input_mapping, output_mapping, metadata. */
  maxMapEntries: 8_192,
  /** Characters of every `route` of a definition together (each one also at most ROUTE_LIMITS.maxExpressionChars, 4 KiB): CEL compiles each. */
  maxTotalRouteChars: 32_768,
  /** Characters of every SCHEDULE node's `schedule` together (each also at most SCHEDULE_LIMITS.maxChars, 256): cron-parser reads each, ≈ 0.06 ms for a long one. */
  maxTotalScheduleChars: 16_384,
  /** Node ids and workflow ids. */
  maxIdChars: 128,
  /** An agent id or `type:<agent type>` (the scheduler's target bound). */
  maxAgentIdChars: 256,
  maxMetadataEntries: 64,
  maxMetadataKeyChars: 128,
  maxMetadataValueChars: 4_096,
  /** Entries of input_mapping and of output_mapping, and the characters of each key and value. */
  maxMappingEntries: 256,
  maxMappingChars: 1_024,
  maxIterations: 1_000,
} as const;

/** How often loop backs may re-run a node when its metadata has no `max_iterations`. */
export const DEFAULT_MAX_ITERATIONS = 10;

export interface ValidatedWorkflow {
  readonly ok: boolean;                         // no issue of severity 'error'
  readonly issues: readonly ValidationIssue[];  // errors and warnings (unreachable nodes)
  readonly routes: ReadonlyMap<string, CompiledRoute>;
  readonly dependents: ReadonlyMap<string, readonly string[]>; // node → nodes that list it in dependencies, author order
  readonly roots: readonly string[];
}

/** Anything an id may not hold (whitespace, `,` `:` `/`, control characters, U+FFFD): one scan for the usual case. */
const ID_REFUSED = /[\s,:/\u0000-\u001f\u007f\uFFFD]/;
const NONE: readonly string[] = Object.freeze([]);
const BLANK = /^\s*$/;

/** Why a node id or workflow id cannot be used ([code, message]), or undefined. */
function idRefusal(what: string, id: unknown): [string, string] | undefined {
  if (typeof id !== 'string') return ['invalid_field', `${what} must be a string`];
  if (id !== '' && id.length <= WORKFLOW_LIMITS.maxIdChars && !ID_REFUSED.test(id)) return undefined;
  if (id === '') return ['invalid_field', `${what} is empty`];
  if (id.length > WORKFLOW_LIMITS.maxIdChars) return ['limit_exceeded', `${what} ${quote(id, 40)} is longer than ${WORKFLOW_LIMITS.maxIdChars} characters (${id.length})`];
  const why = identifierRefusal(what, id, WORKFLOW_LIMITS.maxIdChars);
  if (why) return ['invalid_field', why];
  return ['invalid_field', `${what} ${quote(id)} contains whitespace, ',', ':' or '/'`];
}

/** Own enumerable keys of a map (0 when it is not one). */
function countEntries(map: unknown): number {
  if (map === null || typeof map !== 'object') return 0;
  let c = 0;
  for (const key in map) if (Object.prototype.hasOwnProperty.call(map, key)) c++;
  return c;
}

function hasOwn(map: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(map, key);
}

const WHOLE_NUMBER = /^\s*-?\d{1,6}\s*$/;
const TYPE_WITHOUT_NAME = /^type:\s*$/;

function isWholeNumber(text: string, min: number, max: number): boolean {
  if (!WHOLE_NUMBER.test(text)) return false;
  const n = Number(text);
  return n >= min && n <= max;
}

export type WorkflowLimits = { readonly [K in keyof typeof WORKFLOW_LIMITS]: number };

/** `limits`: WORKFLOW_LIMITS, what every caller uses; other limits only to show the algorithms linear at scale (tests). */
export function validateDefinition(definition: WorkflowDefinition, limits: WorkflowLimits = WORKFLOW_LIMITS): ValidatedWorkflow {
  return validateWithAllIssues(definition, limits).validated;
}

/** validateDefinition, and every issue (not only the first MAX_ISSUES): definition files place them all. */
export function validateWithAllIssues(definition: WorkflowDefinition, L: WorkflowLimits = WORKFLOW_LIMITS): { readonly validated: ValidatedWorkflow; readonly all: readonly ValidationIssue[] } {
  const issues = new IssueList();
  const routes = new Map<string, CompiledRoute>();
  let dependentsOut: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>();
  const roots: string[] = [];
  const done = () => ({ validated: { ok: !issues.hasErrors, issues: issues.list(), routes, dependents: dependentsOut, roots }, all: issues.all() });

  if (definition.workflowId !== '') {
    const why = idRefusal('workflow_id', definition.workflowId);
    if (why) issues.error(-1, why[0], 'workflow_id', why[1]);
  }
  checkStringMap(issues, -1, definition.metadata, undefined, 'metadata', WORKFLOW_LIMITS.maxMetadataEntries, WORKFLOW_LIMITS.maxMetadataKeyChars, WORKFLOW_LIMITS.maxMetadataValueChars);

  const nodes = definition.nodes;
  const n = nodes.length;
  if (n === 0) {
    issues.error(-1, 'invalid_field', 'nodes', 'a workflow needs at least one node');
    return done();
  }
  if (n > L.maxNodes) {
    issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${L.maxNodes} nodes (this one has ${n})`);
    return done();
  }
  // The totals, counted before any other work (each a plain count, no allocation): what the rest costs is bounded by them.
  let totalDependencies = 0;
  let mapEntries = countEntries(definition.metadata);
  let routeChars = 0;
  let scheduleChars = 0;
  for (let i = 0; i < n; i++) {
    const node = nodes[i];
    if (Array.isArray(node.dependencies)) totalDependencies += node.dependencies.length;
    mapEntries += countEntries(node.inputMapping) + countEntries(node.outputMapping) + countEntries(node.metadata);
    const route = node.metadata && typeof node.metadata === 'object' && hasOwn(node.metadata, 'route') ? node.metadata.route : undefined;
    if (typeof route === 'string') routeChars += route.length;
    const schedule = node.trigger === 'SCHEDULE' && node.metadata && typeof node.metadata === 'object' && hasOwn(node.metadata, 'schedule') ? node.metadata.schedule : undefined;
    if (typeof schedule === 'string') scheduleChars += schedule.length;
  }
  if (totalDependencies > L.maxTotalDependencies) {
    issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${L.maxTotalDependencies} dependencies in all (this one has ${totalDependencies})`);
    return done();
  }
  if (mapEntries > L.maxMapEntries) {
    issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${L.maxMapEntries} map entries in all (metadata, input_mapping, output_mapping; this one has ${mapEntries})`);
    return done();
  }
  if (routeChars > L.maxTotalRouteChars) {
    issues.error(-1, 'limit_exceeded', 'nodes', `the routes of a workflow have at most ${L.maxTotalRouteChars} characters in all (this one's have ${routeChars})`);
    return done();
  }
  if (scheduleChars > L.maxTotalScheduleChars) {
    issues.error(-1, 'limit_exceeded', 'nodes', `the schedules of a workflow's SCHEDULE nodes have at most ${L.maxTotalScheduleChars} characters in all (this one's have ${scheduleChars})`);
    return done();
  }

  // Ids → author positions. One Map operation per node when no id repeats (the usual case); a second pass otherwise.
  const index = new Map<string, number>();
  const usable = new Uint8Array(n); // 1: this node's id is valid and its first occurrence
  let valid = 0;
  for (let i = 0; i < n; i++) {
    const id = nodes[i].nodeId;
    const why = idRefusal('node id', id);
    if (why) {
      issues.error(i, why[0], issuePath('nodes', String(id)), why[1]);
      continue;
    }
    index.set(id, i);
    usable[i] = 1;
    valid++;
  }
  if (index.size < valid) {
    index.clear();
    for (let i = 0; i < n; i++) {
      if (!usable[i]) continue;
      const id = nodes[i].nodeId;
      const first = index.get(id);
      if (first !== undefined) {
        issues.error(i, 'duplicate_node', issuePath('nodes', id), `node ${quote(id)} is defined twice (nodes ${first + 1} and ${i + 1})`);
        usable[i] = 0;
        continue;
      }
      index.set(id, i);
    }
  }

  // Dependency edges: dep → node, kept in flat arrays (CSR): for node i, edges depStart[i] … depStart[i + 1] - 1 hold the
  // dependency's position and the index in the author's list (for paths). Unknown, self and repeated ones are left out.
  let edgeCount = 0;
  for (let i = 0; i < n; i++) edgeCount += Array.isArray(nodes[i].dependencies) ? Math.min(nodes[i].dependencies.length, L.maxDependencies) : 0;
  const depStart = new Int32Array(n + 1);
  const depNode = new Int32Array(edgeCount);
  const depPos = new Int32Array(edgeCount);
  const indegree = new Uint32Array(n); // ≤ maxDependencies
  let lastSeen: Int32Array | undefined; // for nodes with many dependencies; a few are compared with each other
  let e = 0;
  for (let i = 0; i < n; i++) {
    depStart[i] = e;
    const node = nodes[i];
    const id = node.nodeId;
    const deps = node.dependencies;
    if (!Array.isArray(deps)) {
      issues.error(i, 'invalid_field', issuePath('nodes', String(id), 'dependencies'), 'dependencies must be a list of node ids');
      continue;
    }
    if (deps.length === 0 && usable[i]) roots.push(id);
    if (deps.length > L.maxDependencies) {
      issues.error(i, 'limit_exceeded', issuePath('nodes', id, 'dependencies'), `a node has at most ${L.maxDependencies} dependencies (this one has ${deps.length})`);
    }
    const count = Math.min(deps.length, L.maxDependencies);
    const few = count <= 16;
    if (!few) lastSeen ??= new Int32Array(n).fill(-1);
    for (let k = 0; k < count; k++) {
      const dep = deps[k];
      if (typeof dep !== 'string' || dep === '') {
        issues.error(i, 'invalid_field', issuePath('nodes', String(id), 'dependencies', k), 'a dependency is a node id (a non-empty string)');
        continue;
      }
      const d = index.get(dep);
      if (dep === id) {
        issues.error(i, 'self_dependency', issuePath('nodes', id, 'dependencies', k), `node ${quote(id)} depends on itself`);
      } else if (d === undefined) {
        issues.error(i, 'unknown_dependency', issuePath('nodes', String(id), 'dependencies', k), `node ${quote(String(id))} depends on ${quote(dep)}, which is not a node of this workflow`);
      } else if (few ? listed(depNode, depStart[i], e, d) : lastSeen![d] === i) {
        issues.error(i, 'duplicate_dependency', issuePath('nodes', id, 'dependencies', k), `node ${quote(id)} lists ${quote(dep)} twice`);
      } else if (usable[i]) {
        if (!few) lastSeen![d] = i;
        depNode[e] = d;
        depPos[e] = k;
        e++;
        indegree[i]++;
      }
    }
  }
  depStart[n] = e;
  if (roots.length === 0) issues.error(-1, 'no_root', 'nodes', 'no node is a root: every node has dependencies, so none can start (give at least one node no dependencies)');

  // Dependents (the reverse edges, CSR like the dependencies), in author order: node i is written into each of its
  // dependencies' slots as i grows. The lists are made when asked for (DependentsMap).
  const dependentCount = new Int32Array(n);
  for (let k = 0; k < e; k++) dependentCount[depNode[k]]++;
  const dependentStart = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) dependentStart[i + 1] = dependentStart[i] + dependentCount[i];
  const dependentNode = new Int32Array(e);
  const fill = dependentStart.slice(0, n);
  for (let i = 0; i < n; i++) for (let k = depStart[i]; k < depStart[i + 1]; k++) dependentNode[fill[depNode[k]]++] = i;
  dependentsOut = new DependentsMap(nodes, index, dependentStart, dependentNode);

  // Per-node fields, metadata and routes.
  const analysed: (AnalysedRoute | undefined)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    if (!usable[i]) continue;
    const node = nodes[i];
    checkNode(issues, i, node);
    if (node.metadata && Object.prototype.hasOwnProperty.call(node.metadata, 'route')) {
      const compiled = compileRouteIn(node, index, () => dependentsOut.get(node.nodeId) ?? NONE);
      for (const issue of compiled.issues) issues.add(i, issue);
      if (compiled.route) {
        routes.set(node.nodeId, compiled.route);
        analysed[i] = compiled.route;
      }
    }
  }

  // Cycles of dependency edges: Kahn's algorithm; what it cannot order lies on or after a cycle.
  const remaining = indegree; // consumed below: > 0 afterwards means "not ordered"
  const queue = new Int32Array(n);
  let head = 0;
  let tail = 0;
  for (let i = 0; i < n; i++) if (usable[i] && remaining[i] === 0) queue[tail++] = i;
  while (head < tail) {
    const v = queue[head++];
    for (let k = dependentStart[v]; k < dependentStart[v + 1]; k++) {
      const w = dependentNode[k];
      if (--remaining[w] === 0) queue[tail++] = w;
    }
  }
  let cycles = 0;
  if (tail < countUsable(usable)) cycles = reportCycles(issues, nodes, usable, remaining, depStart, depNode, depPos);

  if (cycles === 0 && roots.length > 0) reportUnreachable(issues, nodes, usable, depStart, depNode, depPos, dependentStart, dependentNode, analysed, index);
  return done();
}

/**
 * node → the nodes that list it in dependencies (author order), for every node with a valid id: a ReadonlyMap over
 * the validation's arrays, each list made at its first `get` (validating 100,000 nodes makes no 100,000 lists).
 */
class DependentsMap implements ReadonlyMap<string, readonly string[]> {
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

  forEach(callback: (value: readonly string[], key: string, map: ReadonlyMap<string, readonly string[]>) => void, thisArg?: unknown): void {
    for (const [id, i] of this.index) callback.call(thisArg, this.at(i), id, this);
  }
}

/** Is `d` among from … to - 1 of `list`? (a node's first few dependencies: compared in place, no lookup table) */
function listed(list: Int32Array, from: number, to: number, d: number): boolean {
  for (let k = from; k < to; k++) if (list[k] === d) return true;
  return false;
}

function countUsable(usable: Uint8Array): number {
  let c = 0;
  for (let i = 0; i < usable.length; i++) c += usable[i];
  return c;
}

/**
 * One real cycle per walk: from each node left unordered (author order), follow a dependency that is also unordered (one
 * always exists) until the walk meets itself (a cycle: report it) or an earlier walk (nothing new). Every node is walked
 * at most once: O(V + E).
 */
function reportCycles(
  issues: IssueList, nodes: readonly WorkflowNodeDefinition[], usable: Uint8Array, remaining: Uint32Array,
  depStart: Int32Array, depNode: Int32Array, depPos: Int32Array,
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
        if (remaining[depNode[k]] > 0) { next = depNode[k]; break; }
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
function reportCycle(issues: IssueList, nodes: readonly WorkflowNodeDefinition[], cycle: number[], depStart: Int32Array, depNode: Int32Array, depPos: Int32Array): void {
  let first = 0;
  for (let k = 1; k < cycle.length; k++) if (cycle[k] < cycle[first]) first = k;
  const ordered = [...cycle.slice(first), ...cycle.slice(0, first)];
  const ids = ordered.map((i) => nodes[i].nodeId);
  const head = ordered[0];
  let pos = 0;
  for (let k = depStart[head]; k < depStart[head + 1]; k++) if (depNode[k] === ordered[1]) pos = depPos[k];
  const MAX_SHOWN = 20;
  const shown = ids.length <= MAX_SHOWN ? ids.map((id) => quote(id, 40)) : [...ids.slice(0, MAX_SHOWN - 1).map((id) => quote(id, 40)), `… (${ids.length - MAX_SHOWN} more)`, quote(ids[ids.length - 1], 40)];
  issues.error(head, 'workflow_cycle_detected', issuePath('nodes', ids[0], 'dependencies', pos),
    `dependency cycle: ${shown.join(' → ')} → ${quote(ids[0], 40)} (each depends on the next): a node runs only when all its dependencies are COMPLETED, so none of these ${ids.length} nodes can start. Remove one of these dependencies; a way back belongs in a route (a conditional edge), not in dependencies`,
    { cycle: ids });
}

/**
 * Which nodes can ever run (no cycle here): roots can; a node can when each of its dependencies can and either has no
 * route or has one that may choose it; a loop back from a node that can run makes its target run. A worklist, each node
 * entered once: O(V + E).
 */
function reportUnreachable(
  issues: IssueList, nodes: readonly WorkflowNodeDefinition[], usable: Uint8Array, depStart: Int32Array, depNode: Int32Array, depPos: Int32Array,
  dependentStart: Int32Array, dependentNode: Int32Array, routes: readonly (AnalysedRoute | undefined)[], index: ReadonlyMap<string, number>,
): void {
  const n = nodes.length;
  const runs = new Uint8Array(n);
  const enabled = new Uint32Array(n); // ≤ maxDependencies
  const work = new Int32Array(n); // a stack: each node is pushed once
  let top = 0;
  const mark = (i: number) => { if (!runs[i]) { runs[i] = 1; work[top++] = i; } };
  for (let i = 0; i < n; i++) if (usable[i] && depStart[i + 1] === depStart[i] && nodes[i].dependencies.length === 0) mark(i);
  while (top > 0) {
    const v = work[--top];
    const route = routes[v];
    if (route?.computed) return; // it may choose any node: none is provably unreachable
    for (let k = dependentStart[v]; k < dependentStart[v + 1]; k++) {
      const w = dependentNode[k];
      if (route && !route.mayChoose(nodes[w].nodeId, true)) continue;
      if (++enabled[w] === depStart[w + 1] - depStart[w]) mark(w);
    }
    if (route) for (const target of route.targets) { const t = index.get(target); if (t !== undefined) mark(t); }
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
      if (!runs[d]) { reason = `its dependency ${quote(dep)} never runs`; break; }
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

function checkNode(issues: IssueList, i: number, node: WorkflowNodeDefinition): void {
  const id = node.nodeId;
  const agent = node.agentId;
  if (typeof agent !== 'string' || BLANK.test(agent)) {
    issues.error(i, 'invalid_field', issuePath('nodes', id, 'agent_id'), `node ${quote(id)} has no agent_id: give the agent that runs it (an agent id, or type:<agent type>)`);
  } else {
    const why = identifierRefusal('agent_id', agent, WORKFLOW_LIMITS.maxAgentIdChars);
    if (why) issues.error(i, agent.length > WORKFLOW_LIMITS.maxAgentIdChars ? 'limit_exceeded' : 'invalid_field', issuePath('nodes', id, 'agent_id'), why);
    else if (TYPE_WITHOUT_NAME.test(agent)) issues.error(i, 'invalid_field', issuePath('nodes', id, 'agent_id'), 'agent_id "type:" names no agent type');
  }
  if (!(TRIGGER_TYPES as readonly string[]).includes(node.trigger)) {
    issues.error(i, 'invalid_field', issuePath('nodes', id, 'trigger_type'), `trigger_type ${quote(String(node.trigger))} is not one of ${TRIGGER_TYPES.join(', ')}`);
  }
  checkMapping(issues, i, node, 'input_mapping', node.inputMapping, true);
  checkMapping(issues, i, node, 'output_mapping', node.outputMapping, false);

  const metadata = node.metadata;
  if (!checkStringMap(issues, i, metadata, id, 'metadata', WORKFLOW_LIMITS.maxMetadataEntries, WORKFLOW_LIMITS.maxMetadataKeyChars, WORKFLOW_LIMITS.maxMetadataValueChars)) return;
  if (hasOwn(metadata, 'priority') && !isWholeNumber(metadata.priority, -19, 20)) {
    issues.error(i, 'invalid_field', mapPath(id, 'metadata', 'priority'), `priority ${quote(metadata.priority)} is not a whole number from -19 to 20`);
  }
  if (hasOwn(metadata, 'scope')) {
    const scope = parseScope(metadata.scope);
    if (isScopeRefusal(scope)) issues.error(i, 'invalid_field', mapPath(id, 'metadata', 'scope'), scope);
  }
  if (hasOwn(metadata, 'on_failure') && metadata.on_failure !== 'fail' && metadata.on_failure !== 'hitl') {
    issues.error(i, 'invalid_field', mapPath(id, 'metadata', 'on_failure'), `on_failure ${quote(metadata.on_failure)} is neither "fail" nor "hitl"`);
  }
  if (hasOwn(metadata, 'max_iterations') && !isWholeNumber(metadata.max_iterations, 1, WORKFLOW_LIMITS.maxIterations)) {
    issues.error(i, 'invalid_field', mapPath(id, 'metadata', 'max_iterations'), `max_iterations ${quote(metadata.max_iterations)} is not a whole number from 1 to ${WORKFLOW_LIMITS.maxIterations}`);
  }
  if (node.trigger === 'SCHEDULE') {
    if (!hasOwn(metadata, 'schedule')) issues.error(i, 'invalid_schedule', issuePath('nodes', id, 'metadata'), `node ${quote(id)} is a SCHEDULE node without metadata schedule (a 5-field cron expression, UTC)`);
    else {
      const why = scheduleError(metadata.schedule);
      if (why) issues.error(i, 'invalid_schedule', mapPath(id, 'metadata', 'schedule'), why);
    }
  } else if (hasOwn(metadata, 'schedule')) {
    issues.warning(i, 'unused_metadata', mapPath(id, 'metadata', 'schedule'), `schedule is read only for SCHEDULE nodes; node ${quote(id)} is ${node.trigger}`);
  }
  if (node.trigger === 'EVENT') {
    if (!hasOwn(metadata, 'event') || BLANK.test(metadata.event)) issues.error(i, 'invalid_event', hasOwn(metadata, 'event') ? mapPath(id, 'metadata', 'event') : issuePath('nodes', id, 'metadata'), `node ${quote(id)} is an EVENT node without metadata event (the event name it waits for)`);
  } else if (hasOwn(metadata, 'event')) {
    issues.warning(i, 'unused_metadata', mapPath(id, 'metadata', 'event'), `event is read only for EVENT nodes; node ${quote(id)} is ${node.trigger}`);
  }
}

/** The path of a map field (`nodeId` undefined: the workflow's own) or of one of its keys. */
function mapPath(nodeId: string | undefined, field: string, key?: string): string {
  const base: (string | number)[] = nodeId === undefined ? [field] : ['nodes', nodeId, field];
  if (key !== undefined) base.push(key);
  return issuePath(...base);
}

/** A map of strings within its bounds; false when it is not a map at all. Allocates nothing unless it finds an issue. */
function checkStringMap(issues: IssueList, i: number, map: unknown, nodeId: string | undefined, field: string, maxEntries: number, maxKey: number, maxValue: number): boolean {
  if (map === null || typeof map !== 'object' || Array.isArray(map)) {
    issues.error(i, 'invalid_field', mapPath(nodeId, field), `${field} must be a map of strings`);
    return false;
  }
  let ok = true;
  let entries = 0;
  for (const key in map) {
    if (!Object.prototype.hasOwnProperty.call(map, key)) continue;
    entries++;
    const value = (map as Record<string, unknown>)[key];
    if (typeof value !== 'string') {
      issues.error(i, 'invalid_field', mapPath(nodeId, field, key), `${field} ${quote(key)} must be a string`);
      ok = false;
    } else if (value.length > maxValue) {
      issues.error(i, 'limit_exceeded', mapPath(nodeId, field, key), `${field} ${quote(key)} is longer than ${maxValue} characters (${value.length})`);
    }
    if (key.length > maxKey) issues.error(i, 'limit_exceeded', mapPath(nodeId, field, key), `${field} key ${quote(key, 40)} is longer than ${maxKey} characters`);
  }
  if (entries > maxEntries) issues.error(i, 'limit_exceeded', mapPath(nodeId, field), `${field} has ${entries} entries; at most ${maxEntries}`);
  return ok;
}

/** Dot-separated keys, none empty. */
function isDataPath(text: string): boolean {
  return text !== '' && text.charCodeAt(0) !== 0x2e && text.charCodeAt(text.length - 1) !== 0x2e && !text.includes('..');
}

/**
 * input_mapping: workflow data key (a dotted path) → node input name; output_mapping: node output key → workflow data key
 * (a dotted path). Keys and values non-empty and bounded; data paths without empty segments; no input or data key twice.
 */
function checkMapping(issues: IssueList, i: number, node: WorkflowNodeDefinition, field: 'input_mapping' | 'output_mapping', mapping: unknown, input: boolean): void {
  const id = node.nodeId;
  if (!checkStringMap(issues, i, mapping, id, field, WORKFLOW_LIMITS.maxMappingEntries, WORKFLOW_LIMITS.maxMappingChars, WORKFLOW_LIMITS.maxMappingChars)) return;
  // Which key wrote each input (or data key): made at the second entry.
  let seen: Map<string, string> | undefined;
  let firstKey: string | undefined;
  let firstValue = '';
  for (const key in mapping as Record<string, string>) {
    if (!Object.prototype.hasOwnProperty.call(mapping, key)) continue;
    const value = (mapping as Record<string, string>)[key];
    const dataPath = input ? key : value;
    if (key === '' || value === '') {
      issues.error(i, 'invalid_field', mapPath(id, field, key), `${field} has an empty ${key === '' ? 'key' : 'value'}`);
      continue;
    }
    if (!isDataPath(dataPath)) {
      issues.error(i, 'invalid_field', mapPath(id, field, key), `${quote(dataPath)} is not a workflow data path (dot-separated keys, none empty)`);
      continue;
    }
    if (firstKey === undefined) {
      firstKey = key;
      firstValue = value;
      continue;
    }
    seen ??= new Map([[firstValue, firstKey]]);
    const previous = seen.get(value);
    if (previous !== undefined) {
      issues.error(i, 'invalid_field', mapPath(id, field, key), input
        ? `input ${quote(value)} is mapped from both ${quote(previous)} and ${quote(key)}`
        : `data key ${quote(value)} is written by both outputs ${quote(previous)} and ${quote(key)}`);
    } else {
      seen.set(value, key);
    }
  }
}
