/**
 * Conditional edges (graph-design-notes: edge targets as CEL expressions, `score > 0.5 ? 'agent_b' : 'agent_c'`): a node's
 * metadata `route`, compiled once with @marcbachmann/cel-js and evaluated when the node COMPLETES.
 *
 * The environment. `data` (map): workflow_data after the node's outputs were written; `output` (map): the node's output
 * object; and each key of the node's output_mapping that is a CEL identifier (letters, digits, `_`; not a reserved word,
 * not `data`, `output` or `cel`) as a `dyn` variable holding `output[key]` (null when the output lacks it). Other keys are
 * reached as `output['a-key']`. Nothing else is declared: an unknown variable is a compile error.
 *
 * Values are the JSON values as parsed. JSON numbers are CEL doubles (as google.protobuf.Value's number_value): comparisons
 * across int and double work (`score > 0.5` with score 0.7 or 1, `count == 3`, `count >= 1`); arithmetic does not mix
 * them (`count + 1` fails at run time; write `count + 1.0` or `int(count) + 1`). A missing map key is an evaluation error
 * (`has(data.x)` tests for it).
 *
 * Compile (validation, before anything is persisted): the expression must be at most ROUTE_LIMITS.maxExpressionChars, parse
 * (at most ROUTE_LIMITS.maxAstNodes nodes, nesting ROUTE_LIMITS.maxDepth) and type-check; its type must be string,
 * list<string>, list (of dyn), bool or dyn. Every problem is an `invalid_route` issue at `nodes.<id>.metadata.route` with
 * the library's message and the character it points at.
 *
 * Targets: the string literals in result position (the whole expression; both branches of `?:`; the elements of a list
 * literal; the body of `cel.bind`; the argument of `dyn()`) are node ids, and each must be a node of the workflow. They are
 * the route's conditional edges for validation (a target that is not a dependent of the node is a loop back). A literal
 * anywhere else (`data.verdict == 'ok'`) is data, not a target. A result computed from data (`output.next`) may name any
 * node: it is checked when it is evaluated.
 *
 * Choose: a string → [it]; a list of strings → it (repeats dropped); true → every dependent of the node; false → [] (none);
 * anything else, a string that is not a node id of the workflow, or an evaluation error → { ok: false, error }.
 *
 * Bounded: a small expression (at most ROUTE_LIMITS.directMaxAstNodes AST nodes) built only from literals, variables, field
 * and index access, operators, `?:` and the functions size, has, dyn, int, uint, double, string, bool, startsWith,
 * endsWith, lowerAscii, upperAscii and trim touches each input value a bounded number of times (each of its few nodes
 * costs at most the size of its operands), and is evaluated directly: that is `score > 0.5 ? 'ship' : 'revise'` and most
 * routes. Any other — comprehension macros such as exists / map / filter (which may nest), cel.bind, matches (whose
 * regular expression may backtrack exponentially), substring searches (`in`, contains…), or a long chain of list
 * concatenations — is evaluated under a wall-clock limit of ROUTE_LIMITS.evaluationTimeoutMs (node:vm's timeout, the one
 * real-time bound here: a hung evaluation cannot be left to the injected Clock) and fails with a clear error when it takes
 * longer. The guard costs about 0.2 ms per evaluation.
 */
import * as vm from 'node:vm';
import type { ASTNode, Environment, ParseResult } from '@marcbachmann/cel-js' with { 'resolution-mode': 'import' };
import { issuePath, quote } from './issues';
import type { ValidationIssue, WorkflowDefinition, WorkflowNodeDefinition } from './model';

/**
 * @marcbachmann/cel-js is an ES module; the core compiles to CommonJS (tests) and is bundled by esbuild (the extension, the
 * CLI), so it is loaded by `require` (Node loads ES modules that way since 20.19 / 22.12).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const cel = require('@marcbachmann/cel-js') as { Environment: new (options?: object) => Environment };

export const ROUTE_LIMITS = {
  /** The most characters of a `route` expression (the metadata value bound). */
  maxExpressionChars: 4096,
  /** Parser limits: AST nodes and nesting of calls, selects, indexes and aggregates. */
  maxAstNodes: 2048,
  maxDepth: 64,
  /**
   * Wall-clock bound of one evaluation of an expression that is not linear by construction (see above): the evaluation
   * is one synchronous turn of the coordinator's event loop, so this is that turn's bound too (issue 30, item 1: at
   * most 50 ms for any request; node:vm stops it within about 2 ms of the bound).
   */
  evaluationTimeoutMs: 30,
  /** The most AST nodes of an expression evaluated without the wall-clock guard (see above). */
  directMaxAstNodes: 32,
} as const;

export type RouteChoice =
  { readonly ok: true; readonly chosen: readonly string[] } | { readonly ok: false; readonly error: string };

export interface CompiledRoute {
  readonly nodeId: string;
  readonly source: string;
  /** Node ids the expression names as string literals (the possible targets; validation's conditional edges). */
  readonly targets: readonly string[];
  /** Evaluates with `data` (workflow_data after this node's outputs were written), `output` (the node's output object)
   *  and each output_mapping key of the node as a bare variable. A string → [it]; a list of strings → it; true → every
   *  dependent of the node; false → []; anything else, an unknown node id, or an evaluation error → ok:false. */
  choose(data: Readonly<Record<string, unknown>>, output: Readonly<Record<string, unknown>>): RouteChoice;
}

/** What validation also needs to know about a route: which nodes it can choose. */
export interface AnalysedRoute extends CompiledRoute {
  /** It can answer a bool (true chooses every dependent). */
  readonly mayChooseDependents: boolean;
  /** Some result is computed from data (not a literal): it may choose any node. */
  readonly computed: boolean;
  /** Evaluated under the wall-clock limit (not linear by construction). */
  readonly guarded: boolean;
  /** Can this route ever choose `nodeId` (a dependent or a loop back)? */
  mayChoose(nodeId: string, isDependent: boolean): boolean;
}

const RESERVED = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'namespace',
  'package',
  'return',
  'var',
  'void',
  'while',
  'data',
  'output',
  'cel',
  // CEL's type names and namespaces: cel-js refuses them as variable names (reach such keys as output['type']).
  'type',
  'int',
  'uint',
  'double',
  'bool',
  'string',
  'bytes',
  'list',
  'map',
  'null_type',
  'dyn',
  'google',
  'optional',
  'timestamp',
  'duration',
]);
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESULT_TYPES = new Set(['string', 'list<string>', 'list', 'bool', 'dyn']);
/** Functions whose cost is linear in their operands (see the module comment); any other call is evaluated guarded. */
const LINEAR_FUNCTIONS = new Set([
  'size',
  'has',
  'dyn',
  'int',
  'uint',
  'double',
  'string',
  'bool',
  'startsWith',
  'endsWith',
  'lowerAscii',
  'upperAscii',
  'trim',
]);

/** The output_mapping keys of a node that become CEL variables. */
export function routeVariables(node: WorkflowNodeDefinition): string[] {
  return Object.keys(node.outputMapping).filter((k) => IDENTIFIER.test(k) && !RESERVED.has(k));
}

let baseEnvironment: Environment | undefined;
/**
 * Environments by their variables (the names joined): the routes of a workflow mostly share their output keys, and an
 * environment holds a registry of its own (tens of kilobytes). Parsed expressions keep the one they were parsed in.
 */
const environments = new Map<string, Environment>();
const MAX_ENVIRONMENTS = 256;

function environmentFor(variables: readonly string[]): Environment {
  const key = variables.join(',');
  const known = environments.get(key);
  if (known) return known;
  baseEnvironment ??= new cel.Environment({
    limits: { maxAstNodes: ROUTE_LIMITS.maxAstNodes, maxDepth: ROUTE_LIMITS.maxDepth },
  })
    .registerVariable('data', 'map')
    .registerVariable('output', 'map');
  // clone() leaves the base untouched; the base itself takes no more registrations.
  const env = baseEnvironment.clone();
  for (const name of variables) env.registerVariable(name, 'dyn');
  if (environments.size >= MAX_ENVIRONMENTS) environments.clear();
  environments.set(key, env);
  return env;
}

/** The dependents of a node, when validation has not computed them: one pass over the definition, at first need. */
function dependentsOf(nodeId: string, definition: WorkflowDefinition): string[] {
  const out: string[] = [];
  for (const n of definition.nodes) if (n.dependencies.includes(nodeId) && !out.includes(n.nodeId)) out.push(n.nodeId);
  return out;
}

export function compileRoute(
  node: WorkflowNodeDefinition,
  definition: WorkflowDefinition,
): { readonly route?: CompiledRoute; readonly issues: readonly ValidationIssue[] } {
  const ids = new Set(definition.nodes.map((n) => n.nodeId));
  let dependents: readonly string[] | undefined;
  return compileRouteIn(node, ids, () => (dependents ??= dependentsOf(node.nodeId, definition)));
}

/**
 * compileRoute with what validation already has: the node ids of the workflow and the node's dependents (asked for only
 * when a `true` result needs them).
 */
export function compileRouteIn(
  node: WorkflowNodeDefinition,
  nodeIds: ReadonlySet<string> | ReadonlyMap<string, unknown>,
  dependents: () => readonly string[],
): { readonly route?: AnalysedRoute; readonly issues: readonly ValidationIssue[] } {
  const path = issuePath('nodes', node.nodeId, 'metadata', 'route');
  const source = node.metadata.route;
  const refuse = (message: string) => ({
    issues: [{ severity: 'error' as const, code: 'invalid_route', path, message }],
  });
  if (typeof source !== 'string') return { issues: [] };
  if (source.trim() === '')
    return refuse(
      'route is empty: write a CEL expression that answers a node id, a list of node ids or a bool, or remove it',
    );
  if (source.length > ROUTE_LIMITS.maxExpressionChars)
    return refuse(`route is longer than ${ROUTE_LIMITS.maxExpressionChars} characters (${source.length})`);

  const variables = routeVariables(node);
  let parsed: ParseResult;
  try {
    parsed = environmentFor(variables).parse(source);
  } catch (err) {
    return refuse(`route does not parse: ${celMessage(err)}`);
  }
  const checked = parsed.check();
  if (!checked.valid) return refuse(`route does not type-check: ${celMessage(checked.error)}`);
  if (!RESULT_TYPES.has(checked.type ?? '')) {
    return refuse(
      `route answers ${checked.type}; it must answer a node id (string), a list of node ids (list<string>) or a bool`,
    );
  }

  const shape = analyse(parsed.ast);
  const issues: ValidationIssue[] = [];
  for (const target of shape.targets) {
    if (!nodeIds.has(target))
      issues.push({
        severity: 'error',
        code: 'invalid_route',
        path,
        message: `route names ${quote(target)}, which is not a node of this workflow`,
      });
  }
  for (const literal of shape.badLiterals) {
    issues.push({
      severity: 'error',
      code: 'invalid_route',
      path,
      message: `route answers ${literal}, which is not a node id, a list of node ids or a bool`,
    });
  }
  if (issues.length) return { issues };
  return { route: new Route(node.nodeId, source, parsed, variables, shape, nodeIds, dependents), issues: [] };
}

/** The library's message without its source excerpt, and where in the expression it points. */
function celMessage(err: unknown): string {
  const e = err as { summary?: unknown; message?: unknown; range?: { start: number; end: number } } | undefined;
  const summary =
    typeof e?.summary === 'string'
      ? e.summary
      : typeof e?.message === 'string'
        ? e.message.split('\n')[0]
        : String(err);
  const at =
    e?.range && typeof e.range.start === 'number' ? ` (at character ${e.range.start + 1} of the expression)` : '';
  return `${summary}${at}`;
}

interface Shape {
  readonly targets: string[];
  readonly badLiterals: string[];
  readonly mayChooseDependents: boolean;
  readonly computed: boolean;
  readonly guarded: boolean;
}

/** Pushes the AST nodes among `value` (a node's args: a node, a list of nodes or of pairs, names) onto `stack`. */
function pushChildren(value: unknown, stack: ASTNode[]): void {
  if (Array.isArray(value)) for (const v of value) pushChildren(v, stack);
  else if (value !== null && typeof value === 'object' && 'op' in value) stack.push(value as ASTNode);
}

function isNode(value: unknown): value is ASTNode {
  return value !== null && typeof value === 'object' && 'op' in value;
}

/** Result positions (targets), and whether evaluation must be guarded. Iterative: the AST may be deep (2,048 nodes). */
function analyse(root: ASTNode): Shape {
  const literals: { at: number; value: string }[] = [];
  const badLiterals: string[] = [];
  let mayChooseDependents = false;
  let computed = false;
  let guarded = false;

  // Result positions.
  const results: ASTNode[] = [root];
  while (results.length) {
    const n = results.pop()!;
    const args = n.args as unknown;
    if (n.op === 'value') {
      if (typeof args === 'string') literals.push({ at: n.start, value: args });
      else if (typeof args === 'boolean') mayChooseDependents ||= args;
      else
        badLiterals.push(
          args === null ? 'null' : typeof args === 'bigint' ? String(args) : (JSON.stringify(args) ?? String(args)),
        );
    } else if (n.op === '?:' && Array.isArray(args)) {
      results.push(args[2] as ASTNode, args[1] as ASTNode);
    } else if (n.op === 'list' && Array.isArray(args)) {
      // Elements: node ids. A literal is a target; dyn() and ?: are looked through; anything else is computed.
      const elements = [...(args as ASTNode[])];
      while (elements.length) {
        const el = elements.pop()!;
        const a = el.args as unknown;
        if (el.op === 'value') {
          if (typeof a === 'string') results.push(el);
          else badLiterals.push(`a list holding ${typeof a === 'bigint' ? String(a) : JSON.stringify(a)}`);
        } else if (el.op === '?:' && Array.isArray(a)) elements.push(a[2] as ASTNode, a[1] as ASTNode);
        else if (el.op === 'call' && Array.isArray(a) && a[0] === 'dyn' && Array.isArray(a[1]) && a[1].length === 1)
          elements.push(a[1][0] as ASTNode);
        else computed = true;
      }
    } else if (
      n.op === 'rcall' &&
      Array.isArray(args) &&
      args[0] === 'bind' &&
      isNode(args[1]) &&
      args[1].op === 'id' &&
      args[1].args === 'cel' &&
      Array.isArray(args[2]) &&
      isNode(args[2][2])
    ) {
      results.push(args[2][2]);
    } else if (
      n.op === 'call' &&
      Array.isArray(args) &&
      args[0] === 'dyn' &&
      Array.isArray(args[1]) &&
      args[1].length === 1
    ) {
      results.push(args[1][0] as ASTNode);
    } else if ((n as { checkedType?: { name?: string } }).checkedType?.name === 'bool') {
      mayChooseDependents = true;
    } else {
      computed = true;
    }
  }

  // Cost: a call outside LINEAR_FUNCTIONS, `in` (a substring search on strings) or more than directMaxAstNodes nodes is
  // evaluated guarded.
  const stack: ASTNode[] = [root];
  let count = 0;
  while (stack.length && !guarded) {
    const n = stack.pop()!;
    const args = n.args as unknown;
    if ((n.op === 'call' || n.op === 'rcall') && Array.isArray(args) && !LINEAR_FUNCTIONS.has(String(args[0])))
      guarded = true;
    if (n.op === 'in' || ++count > ROUTE_LIMITS.directMaxAstNodes) guarded = true;
    pushChildren(n.args, stack);
  }
  // In the order they are written (results were visited last branch first).
  if (literals.length > 1) literals.sort((x, y) => x.at - y.at);
  const targets: string[] = [];
  for (const l of literals) if (!targets.includes(l.value)) targets.push(l.value);
  return { targets, badLiterals, mayChooseDependents, computed, guarded };
}

let guardContext: vm.Context | undefined;
let guardScript: vm.Script | undefined;

/** Runs `fn` with node:vm's wall-clock timeout (it interrupts synchronous code, ours included). */
function runGuarded<T>(fn: () => T, timeoutMs: number): T {
  guardContext ??= vm.createContext(Object.create(null) as object);
  guardScript ??= new vm.Script('run()', { filename: 'workflow-route' });
  const ctx = guardContext as { run?: () => T };
  ctx.run = fn;
  try {
    return guardScript.runInContext(guardContext, { timeout: timeoutMs, breakOnSigint: false }) as T;
  } finally {
    ctx.run = undefined;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list holding something other than node ids';
  if (typeof value === 'bigint') return `the int ${value}`;
  if (typeof value === 'number') return `the number ${value}`;
  if (typeof value === 'object') return value instanceof Uint8Array ? 'bytes' : 'a map';
  return typeof value;
}

class Route implements AnalysedRoute {
  readonly targets: readonly string[];
  readonly mayChooseDependents: boolean;
  readonly computed: boolean;
  readonly guarded: boolean;
  private readonly targetSet: ReadonlySet<string>;

  constructor(
    readonly nodeId: string,
    readonly source: string,
    private readonly parsed: ParseResult,
    private readonly variables: readonly string[],
    shape: Shape,
    private readonly nodeIds: ReadonlySet<string> | ReadonlyMap<string, unknown>,
    private readonly dependents: () => readonly string[],
  ) {
    this.targets = shape.targets;
    this.targetSet = new Set(shape.targets);
    this.mayChooseDependents = shape.mayChooseDependents;
    this.computed = shape.computed;
    this.guarded = shape.guarded;
  }

  mayChoose(nodeId: string, isDependent: boolean): boolean {
    return this.computed || (isDependent && this.mayChooseDependents) || this.targetSet.has(nodeId);
  }

  choose(data: Readonly<Record<string, unknown>>, output: Readonly<Record<string, unknown>>): RouteChoice {
    if (!isPlainObject(data))
      return { ok: false, error: `route of ${quote(this.nodeId)}: workflow_data is not a JSON object` };
    if (!isPlainObject(output))
      return { ok: false, error: `route of ${quote(this.nodeId)}: the node's output is not a JSON object` };
    const context: Record<string, unknown> = { data, output };
    for (const name of this.variables)
      context[name] = Object.prototype.hasOwnProperty.call(output, name) ? output[name] : null;
    let value: unknown;
    try {
      value = this.guarded
        ? runGuarded(() => this.parsed(context), ROUTE_LIMITS.evaluationTimeoutMs)
        : this.parsed(context);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
        return {
          ok: false,
          error: `route of ${quote(this.nodeId)} took longer than ${ROUTE_LIMITS.evaluationTimeoutMs} ms and was stopped`,
        };
      }
      return { ok: false, error: `route of ${quote(this.nodeId)} failed: ${celMessage(err)}` };
    }
    if (value instanceof Promise) return { ok: false, error: `route of ${quote(this.nodeId)} answered a promise` };
    let chosen: string[];
    if (typeof value === 'string') chosen = [value];
    else if (value === true) return { ok: true, chosen: [...this.dependents()] };
    else if (value === false) return { ok: true, chosen: [] };
    else if (Array.isArray(value) && value.every((v) => typeof v === 'string'))
      chosen = [...new Set(value as string[])];
    else
      return {
        ok: false,
        error: `route of ${quote(this.nodeId)} answered ${describe(value)}, not a node id, a list of node ids or a bool`,
      };
    const unknown = chosen.find((id) => !this.nodeIds.has(id));
    if (unknown !== undefined)
      return {
        ok: false,
        error: `route of ${quote(this.nodeId)} chose ${quote(unknown)}, which is not a node of this workflow`,
      };
    return { ok: true, chosen };
  }
}
