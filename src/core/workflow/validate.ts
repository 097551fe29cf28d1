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
import { type AnalysedRoute, type CompiledRoute, compileRouteIn } from './cel';
import { DependentsMap, NONE, countUsable, listed, reportCycles, reportUnreachable } from './graphChecks';
import { IssueList, issuePath, quote } from './issues';
import { WORKFLOW_LIMITS, type WorkflowLimits } from './limits';
import type { ValidationIssue, WorkflowDefinition } from './model';
import { checkNode, checkStringMap, countEntries, hasOwn, idRefusal } from './nodeChecks';

export { DEFAULT_MAX_ITERATIONS, WORKFLOW_LIMITS, type WorkflowLimits } from './limits';

export interface ValidatedWorkflow {
  readonly ok: boolean; // no issue of severity 'error'
  readonly issues: readonly ValidationIssue[]; // errors and warnings (unreachable nodes)
  readonly routes: ReadonlyMap<string, CompiledRoute>;
  readonly dependents: ReadonlyMap<string, readonly string[]>; // node → nodes that list it in dependencies, author order
  readonly roots: readonly string[];
}

/** `limits`: WORKFLOW_LIMITS, what every caller uses; other limits only to show the algorithms linear at scale (tests). */
export function validateDefinition(
  definition: WorkflowDefinition,
  limits: WorkflowLimits = WORKFLOW_LIMITS,
): ValidatedWorkflow {
  return validateWithAllIssues(definition, limits).validated;
}

/** validateDefinition, and every issue (not only the first MAX_ISSUES): definition files place them all. */
export function validateWithAllIssues(
  definition: WorkflowDefinition,
  L: WorkflowLimits = WORKFLOW_LIMITS,
): { readonly validated: ValidatedWorkflow; readonly all: readonly ValidationIssue[] } {
  const issues = new IssueList();
  const routes = new Map<string, CompiledRoute>();
  let dependentsOut: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>();
  const roots: string[] = [];
  const done = () => ({
    validated: { ok: !issues.hasErrors, issues: issues.list(), routes, dependents: dependentsOut, roots },
    all: issues.all(),
  });

  if (definition.workflowId !== '') {
    const why = idRefusal('workflow_id', definition.workflowId);
    if (why) issues.error(-1, why[0], 'workflow_id', why[1]);
  }
  checkStringMap(
    issues,
    -1,
    definition.metadata,
    undefined,
    'metadata',
    WORKFLOW_LIMITS.maxMetadataEntries,
    WORKFLOW_LIMITS.maxMetadataKeyChars,
    WORKFLOW_LIMITS.maxMetadataValueChars,
  );

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
    const route =
      node.metadata && typeof node.metadata === 'object' && hasOwn(node.metadata, 'route')
        ? node.metadata.route
        : undefined;
    if (typeof route === 'string') routeChars += route.length;
    const schedule =
      node.trigger === 'SCHEDULE' &&
      node.metadata &&
      typeof node.metadata === 'object' &&
      hasOwn(node.metadata, 'schedule')
        ? node.metadata.schedule
        : undefined;
    if (typeof schedule === 'string') scheduleChars += schedule.length;
  }
  if (totalDependencies > L.maxTotalDependencies) {
    issues.error(
      -1,
      'limit_exceeded',
      'nodes',
      `a workflow has at most ${L.maxTotalDependencies} dependencies in all (this one has ${totalDependencies})`,
    );
    return done();
  }
  if (mapEntries > L.maxMapEntries) {
    issues.error(
      -1,
      'limit_exceeded',
      'nodes',
      `a workflow has at most ${L.maxMapEntries} map entries in all (metadata, input_mapping, output_mapping; this one has ${mapEntries})`,
    );
    return done();
  }
  if (routeChars > L.maxTotalRouteChars) {
    issues.error(
      -1,
      'limit_exceeded',
      'nodes',
      `the routes of a workflow have at most ${L.maxTotalRouteChars} characters in all (this one's have ${routeChars})`,
    );
    return done();
  }
  if (scheduleChars > L.maxTotalScheduleChars) {
    issues.error(
      -1,
      'limit_exceeded',
      'nodes',
      `the schedules of a workflow's SCHEDULE nodes have at most ${L.maxTotalScheduleChars} characters in all (this one's have ${scheduleChars})`,
    );
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
        issues.error(
          i,
          'duplicate_node',
          issuePath('nodes', id),
          `node ${quote(id)} is defined twice (nodes ${first + 1} and ${i + 1})`,
        );
        usable[i] = 0;
        continue;
      }
      index.set(id, i);
    }
  }

  // Dependency edges: dep → node, kept in flat arrays (CSR): for node i, edges depStart[i] … depStart[i + 1] - 1 hold the
  // dependency's position and the index in the author's list (for paths). Unknown, self and repeated ones are left out.
  let edgeCount = 0;
  for (let i = 0; i < n; i++)
    edgeCount += Array.isArray(nodes[i].dependencies) ? Math.min(nodes[i].dependencies.length, L.maxDependencies) : 0;
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
      issues.error(
        i,
        'invalid_field',
        issuePath('nodes', String(id), 'dependencies'),
        'dependencies must be a list of node ids',
      );
      continue;
    }
    if (deps.length === 0 && usable[i]) roots.push(id);
    if (deps.length > L.maxDependencies) {
      issues.error(
        i,
        'limit_exceeded',
        issuePath('nodes', id, 'dependencies'),
        `a node has at most ${L.maxDependencies} dependencies (this one has ${deps.length})`,
      );
    }
    const count = Math.min(deps.length, L.maxDependencies);
    const few = count <= 16;
    if (!few) lastSeen ??= new Int32Array(n).fill(-1);
    for (let k = 0; k < count; k++) {
      const dep = deps[k];
      if (typeof dep !== 'string' || dep === '') {
        issues.error(
          i,
          'invalid_field',
          issuePath('nodes', String(id), 'dependencies', k),
          'a dependency is a node id (a non-empty string)',
        );
        continue;
      }
      const d = index.get(dep);
      if (dep === id) {
        issues.error(
          i,
          'self_dependency',
          issuePath('nodes', id, 'dependencies', k),
          `node ${quote(id)} depends on itself`,
        );
      } else if (d === undefined) {
        issues.error(
          i,
          'unknown_dependency',
          issuePath('nodes', String(id), 'dependencies', k),
          `node ${quote(String(id))} depends on ${quote(dep)}, which is not a node of this workflow`,
        );
      } else if (few ? listed(depNode, depStart[i], e, d) : lastSeen![d] === i) {
        issues.error(
          i,
          'duplicate_dependency',
          issuePath('nodes', id, 'dependencies', k),
          `node ${quote(id)} lists ${quote(dep)} twice`,
        );
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
  if (roots.length === 0)
    issues.error(
      -1,
      'no_root',
      'nodes',
      'no node is a root: every node has dependencies, so none can start (give at least one node no dependencies)',
    );

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

  if (cycles === 0 && roots.length > 0)
    reportUnreachable(issues, nodes, usable, depStart, depNode, depPos, dependentStart, dependentNode, analysed, index);
  return done();
}
