import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';
import { REPO_ROOT } from '../support/paths';
import { CORE, moduleRefs, parse, repoPath, resolveRelative, SRC, tsFiles } from '../support/sources';

/**
 * The rules that keep the core in the shape of ARCHITECTURE.md and src/core/kernel/README.md, read from the
 * sources with the TypeScript parser:
 *  - cycles:        no import cycle in src/ (type imports count too);
 *  - areaImports:   an area reaches another area only through that area's model.ts (types too);
 *  - lines:         no source over MAX_LINES lines;
 *  - stateParts:    an area's state.ts is pure: no store, no transitions or timers, no events, no log, no timers;
 *  - safely:        no private `safely` (the kernel's Guard is the one error guard);
 *  - timerMaps:     no `Map<…, Disposable>` of timers in the core (the kernel's KeyedTimers);
 *  - setTimerCalls: no `….setTimer(` in the core but in kernel/timers.ts and clock.ts (KeyedTimers, `tx.arm`);
 *  - errorClasses:  no error class in the core that extends plain Error (extend SwarmError, or use CoreError).
 *
 * What breaks a rule today is listed with its count in boundaries.allow.json. That list may only shrink: a new
 * entry, a count above the listed one, a listed entry that no longer occurs and (but for lines) a count below the
 * listed one all fail, each saying what to do.
 *
 * After code improved, `BOUNDARIES_UPDATE=shrink npx mocha --no-config out/test/unit/boundaries.test.js` lowers the
 * listed counts to today's and drops the entries that are gone (it never adds one). `BOUNDARIES_UPDATE=all` writes
 * today's findings as they are, new ones included: only for moving entries after files were split or renamed;
 * review its diff (an entry may move to the file its code moved to, never be new).
 */

const MAX_LINES = 700;
const ALLOW_FILE = path.join(REPO_ROOT, 'test', 'unit', 'boundaries.allow.json');
const ALLOW_NAME = 'test/unit/boundaries.allow.json';
/** Folders under src/core that are not areas: the store engine, the editor's API, the kernel. */
const NOT_AREAS = new Set(['store', 'api', 'kernel']);

type RuleName = 'cycles' | 'areaImports' | 'lines' | 'safely' | 'timerMaps' | 'setTimerCalls' | 'errorClasses';
const RULES: readonly RuleName[] = [
  'cycles',
  'areaImports',
  'lines',
  'safely',
  'timerMaps',
  'setTimerCalls',
  'errorClasses',
];
type Findings = Map<string, number>;

// ---------------------------------------------------------------------------------------------------------------
// The sources: real (src/) or made up (the tests of the rules themselves).

/** The files a rule reads, by absolute path, and how a relative specifier resolves among them. */
interface Project {
  readonly files: ReadonlyMap<string, ts.SourceFile>;
  resolve(fromFile: string, specifier: string): string | undefined;
}

function realProject(): Project {
  const files = new Map(tsFiles(SRC).map((file) => [file, parse(file)] as const));
  return { files, resolve: resolveRelative };
}

/** A project of made-up sources, named relative to the repository (`src/core/a/b.ts`). */
function fakeProject(sources: Record<string, string>): Project {
  const files = new Map(
    Object.entries(sources).map(([name, text]) => {
      const file = path.join(REPO_ROOT, name);
      return [file, parse(file, text)] as const;
    }),
  );
  return {
    files,
    resolve: (fromFile, specifier) => {
      if (!specifier.startsWith('.')) return undefined;
      const stem = path.resolve(path.dirname(fromFile), specifier).replace(/\.(js|ts)$/, '');
      return [`${stem}.ts`, path.join(stem, 'index.ts')].find((candidate) => files.has(candidate));
    },
  };
}

function isUnder(dir: string, file: string): boolean {
  const relative = path.relative(dir, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}

/** The area a file of src/core belongs to (its first folder), unless that folder is not an area. */
function areaOf(file: string): string | undefined {
  if (!isUnder(CORE, file)) return undefined;
  const [first, ...rest] = path.relative(CORE, file).split(path.sep);
  return rest.length > 0 && !NOT_AREAS.has(first) ? first : undefined;
}

function add(findings: Findings, key: string, count = 1): void {
  findings.set(key, (findings.get(key) ?? 0) + count);
}

// ---------------------------------------------------------------------------------------------------------------
// The rules: each returns what breaks it, by allow-list key, with a count.

/** The import graph: each file and the files of src/ it names (type imports, re-exports and dynamic imports too). */
function importGraph(project: Project): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const [file, source] of project.files) {
    const targets = new Set<string>();
    for (const ref of moduleRefs(source)) {
      const target = project.resolve(file, ref.specifier);
      if (target && target !== file && project.files.has(target)) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Each cycle (strongly connected set of files, Tarjan's), keyed by its sorted files; the count is its imports. */
function cycles(project: Project): Findings {
  const graph = importGraph(project);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: Findings = new Map();
  let next = 0;
  const connect = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const members: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      members.push(member);
    } while (member !== file);
    if (members.length < 2) return;
    const inside = new Set(members);
    const edges = members.reduce((sum, m) => sum + [...graph.get(m)!].filter((t) => inside.has(t)).length, 0);
    found.set(members.map(repoPath).sort().join(' '), edges);
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) connect(file);
  return found;
}

/** Imports of an area's file from another area's file other than its model.ts: `file -> target`, the names taken. */
function areaImports(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    const area = areaOf(file);
    if (!area) continue;
    for (const ref of moduleRefs(source)) {
      const target = project.resolve(file, ref.specifier);
      const other = target && areaOf(target);
      if (!target || !other || other === area) continue;
      if (path.relative(path.join(CORE, other), target) === 'model.ts') continue;
      add(found, `${repoPath(file)} -> ${repoPath(target)}`, Math.max(1, ref.names.length));
    }
  }
  return found;
}

function lineCount(text: string): number {
  if (text.length === 0) return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

/** Sources over MAX_LINES lines, with their line counts. */
function longFiles(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    const lines = lineCount(source.text);
    if (lines > MAX_LINES) found.set(repoPath(file), lines);
  }
  return found;
}

/** Every node of a source, depth first. */
function nodes(root: ts.Node): ts.Node[] {
  const all: ts.Node[] = [];
  const visit = (node: ts.Node): void => {
    all.push(node);
    ts.forEachChild(node, visit);
  };
  visit(root);
  return all;
}

function declaredName(node: ts.Node): string | undefined {
  if (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isPropertyDeclaration(node) ||
    ts.isVariableDeclaration(node) ||
    ts.isPropertyAssignment(node) ||
    ts.isGetAccessorDeclaration(node)
  ) {
    return node.name &&
      (ts.isIdentifier(node.name) || ts.isPrivateIdentifier(node.name) || ts.isStringLiteral(node.name))
      ? node.name.text.replace(/^#/, '')
      : undefined;
  }
  return undefined;
}

/** Functions, methods and properties named `safely` outside src/core/kernel (all of src/). */
function privateSafely(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    if (isUnder(path.join(CORE, 'kernel'), file)) continue;
    for (const node of nodes(source)) if (declaredName(node) === 'safely') add(found, repoPath(file));
  }
  return found;
}

const KERNEL_TIMERS = path.join(CORE, 'kernel', 'timers.ts');
const CLOCK = path.join(CORE, 'clock.ts');

/** In src/core but kernel/timers.ts: each `Map<…, Disposable>` type (a map of timers by key). */
function timerMaps(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    if (!isUnder(CORE, file) || file === KERNEL_TIMERS) continue;
    for (const node of nodes(source)) {
      const args = ts.isTypeReferenceNode(node) || ts.isNewExpression(node) ? node.typeArguments : undefined;
      const name = ts.isTypeReferenceNode(node)
        ? node.typeName.getText(source)
        : ts.isNewExpression(node)
          ? node.expression.getText(source)
          : '';
      if (name !== 'Map' || args?.length !== 2) continue;
      const value = args[1];
      if (ts.isTypeReferenceNode(value) && value.typeName.getText(source) === 'Disposable') add(found, repoPath(file));
    }
  }
  return found;
}

function isSetTimerCall(node: ts.Node): boolean {
  return (
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    node.expression.name.text === 'setTimer'
  );
}

/** In src/core but kernel/timers.ts and clock.ts: each `….setTimer(…)` call. */
function setTimerCalls(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    if (!isUnder(CORE, file) || file === KERNEL_TIMERS || file === CLOCK) continue;
    for (const node of nodes(source)) if (isSetTimerCall(node)) add(found, repoPath(file));
  }
  return found;
}

/** In src/core: each class that extends plain `Error` (but SwarmError itself), keyed `file#Class`. */
function errorClasses(project: Project): Findings {
  const found: Findings = new Map();
  for (const [file, source] of project.files) {
    if (!isUnder(CORE, file)) continue;
    for (const node of nodes(source)) {
      if (!ts.isClassDeclaration(node) && !ts.isClassExpression(node)) continue;
      const extendsError = node.heritageClauses?.some(
        (clause) =>
          clause.token === ts.SyntaxKind.ExtendsKeyword &&
          clause.types.some((type) => ts.isIdentifier(type.expression) && type.expression.text === 'Error'),
      );
      if (!extendsError) continue;
      const name =
        node.name?.text ?? `<class at line ${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}>`;
      if (file === path.join(CORE, 'kernel', 'errors.ts') && name === 'SwarmError') continue;
      add(found, `${repoPath(file)}#${name}`);
    }
  }
  return found;
}

/** An area's state part: a file named state.ts in an area folder. What it may not touch, one line per problem. */
function statePartProblems(project: Project): string[] {
  const problems: string[] = [];
  const forbidden: Array<{
    what: string;
    test: (target: string | undefined, ref: { specifier: string; names: readonly string[] }) => boolean;
  }> = [
    { what: 'the store (store/)', test: (target) => target !== undefined && isUnder(path.join(CORE, 'store'), target) },
    { what: 'SQLite code (sqlite*)', test: (_t, ref) => /^sqlite/i.test(path.basename(ref.specifier)) },
    {
      what: 'a repository (*Repository)',
      test: (_t, ref) =>
        ref.names.some((n) => /Repository$/.test(n)) || /Repository$/.test(path.basename(ref.specifier)),
    },
    { what: 'kernel/transitions', test: (target) => target === path.join(CORE, 'kernel', 'transitions.ts') },
    { what: 'kernel/timers', test: (target) => target === KERNEL_TIMERS },
    { what: 'events.ts (emitters)', test: (target) => target === path.join(CORE, 'events.ts') },
    { what: 'the event log (log/eventLog)', test: (target) => target === path.join(CORE, 'log', 'eventLog.ts') },
  ];
  for (const [file, source] of project.files) {
    if (path.basename(file) !== 'state.ts' || !areaOf(file)) continue;
    const at = repoPath(file);
    for (const ref of moduleRefs(source)) {
      const target = project.resolve(file, ref.specifier);
      for (const rule of forbidden) {
        if (rule.test(target, ref)) problems.push(`${at}:${ref.line} imports ${rule.what} ('${ref.specifier}')`);
      }
    }
    for (const node of nodes(source)) {
      const timer =
        isSetTimerCall(node) ||
        (ts.isCallExpression(node) &&
          ts.isIdentifier(node.expression) &&
          /^set(Timeout|Interval|Immediate)$/.test(node.expression.text));
      if (timer) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        problems.push(`${at}:${line} arms a timer (${(node as ts.CallExpression).expression.getText(source)})`);
      }
    }
  }
  return problems;
}

const STATE_PART_FIX =
  'a state part is pure (the record types and the transitions over plain data, `now` as an argument): move the store, ' +
  'timer, event and log work to the facade or a part beside it (queries.ts, restore.ts, timeouts.ts, …), which arms through `tx.arm`';

const FIND: Record<RuleName, (project: Project) => Findings> = {
  cycles,
  areaImports,
  lines: longFiles,
  safely: privateSafely,
  timerMaps,
  setTimerCalls,
  errorClasses,
};

// ---------------------------------------------------------------------------------------------------------------
// The allow-list and what to do when it does not match.

type AllowList = Record<RuleName, Record<string, number>>;

function readAllowList(): AllowList {
  const raw = JSON.parse(fs.readFileSync(ALLOW_FILE, 'utf8')) as Partial<Record<string, unknown>>;
  const list = {} as AllowList;
  for (const rule of RULES) list[rule] = (raw[rule] ?? {}) as Record<string, number>;
  return list;
}

/** How each rule is fixed, said in a failure. */
const FIX: Record<RuleName, string> = {
  cycles:
    'break the cycle: move what both sides need into a module both import (a model.ts, or a small module of its own), ' +
    'or pass it in as an interface',
  areaImports:
    "import it from the other area's model.ts: move the type there, or declare there the interface of what this file " +
    'uses of the class (the composition root hands in the instance)',
  lines:
    `split it into parts named for what each decides (state.ts, queries.ts, restore.ts, access.ts, notices.ts, one file per operation family), ` +
    `each at most ${MAX_LINES} lines (aim < 450)`,
  safely:
    "use the kernel's Guard (src/core/kernel/guard.ts): `new Guard((context, err) => …report as before…)`, `guard.run(context, fn)`, " +
    '`guard.stop()` on dispose',
  timerMaps:
    "keep timers by key in the kernel's KeyedTimers (src/core/kernel/timers.ts), armed and disarmed through `tx.arm` / `tx.disarm` " +
    'inside a transition',
  setTimerCalls:
    "arm the timer through the kernel's KeyedTimers (src/core/kernel/timers.ts), `tx.arm` inside a transition",
  errorClasses: 'extend SwarmError (src/core/kernel/errors.ts) with its errorKind and errorCode, or throw a CoreError',
};

const UNIT: Record<RuleName, string> = {
  cycles: 'imports inside the cycle',
  areaImports: 'names imported',
  lines: 'lines',
  safely: 'definitions',
  timerMaps: 'maps',
  setTimerCalls: 'calls',
  errorClasses: 'classes',
};

/** What does not match the allow-list, one message each, saying what to do. */
function mismatches(rule: RuleName, found: Findings, allowed: Record<string, number>): string[] {
  const messages: string[] = [];
  const entry = (key: string, count: number) => `"${key}": ${count}`;
  for (const [key, count] of [...found].sort(([a], [b]) => a.localeCompare(b))) {
    const listed = allowed[key];
    if (listed === undefined) {
      messages.push(
        `[${rule}] new: ${key} (${count} ${UNIT[rule]}). Fix: ${FIX[rule]}. Do not add it to ${ALLOW_NAME}; ` +
          `only if it is a listed entry whose code moved to another file, move the entry there (${entry(key, count)}).`,
      );
    } else if (count > listed) {
      messages.push(
        `[${rule}] grew: ${key} has ${count} ${UNIT[rule]}, ${ALLOW_NAME} allows ${listed}. ` +
          `Fix: take the new ones out again (${FIX[rule]}); the allow-list never grows.`,
      );
    } else if (count < listed && rule !== 'lines') {
      messages.push(
        `[${rule}] improved: ${key} has ${count} ${UNIT[rule]}, ${ALLOW_NAME} lists ${listed}. ` +
          `Fix: lower its entry to ${entry(key, count)} (or run with BOUNDARIES_UPDATE=shrink).`,
      );
    }
  }
  for (const key of Object.keys(allowed).sort()) {
    if (!found.has(key)) {
      messages.push(
        `[${rule}] gone: ${key} no longer breaks the rule${rule === 'lines' ? ` (≤ ${MAX_LINES} lines or no file)` : ''}. ` +
          `Fix: remove "${key}" from "${rule}" in ${ALLOW_NAME} (or run with BOUNDARIES_UPDATE=shrink).`,
      );
    }
  }
  return messages;
}

function sorted(findings: Findings): Record<string, number> {
  return Object.fromEntries([...findings].sort(([a], [b]) => a.localeCompare(b)));
}

/** BOUNDARIES_UPDATE=shrink|all: rewrites the allow-list (shrink: only lowers and drops; all: today's findings). */
function update(mode: string, allowed: AllowList, found: Record<RuleName, Findings>): void {
  const raw = JSON.parse(fs.readFileSync(ALLOW_FILE, 'utf8')) as Record<string, unknown>;
  for (const rule of RULES) {
    const next: Findings = new Map();
    for (const [key, count] of found[rule]) {
      const listed = allowed[rule][key];
      if (mode === 'all') next.set(key, count);
      else if (listed !== undefined) next.set(key, Math.min(listed, count));
    }
    raw[rule] = sorted(next);
  }
  fs.writeFileSync(ALLOW_FILE, `${JSON.stringify(raw, null, 2)}\n`);
}

// ---------------------------------------------------------------------------------------------------------------

describe("boundaries (the rules that keep the core in shape, with the allow-list of today's exceptions)", () => {
  const project = realProject();
  const allowed = readAllowList();
  const found = Object.fromEntries(RULES.map((rule) => [rule, FIND[rule](project)])) as Record<RuleName, Findings>;

  before(() => {
    const mode = process.env.BOUNDARIES_UPDATE;
    if (mode === 'shrink' || mode === 'all') update(mode, allowed, found);
  });

  it('reads the sources', () => {
    assert.ok(project.files.size > 200, `found src/'s sources (${project.files.size})`);
    assert.ok(project.files.has(path.join(CORE, 'kernel', 'guard.ts')));
  });

  const what: Record<RuleName, string> = {
    cycles: 'no import cycle in src/ (type imports included)',
    areaImports: 'an area imports another area only from its model.ts (types included)',
    lines: `no source in src/ over ${MAX_LINES} lines, and a listed one does not grow`,
    safely: 'no private `safely` outside src/core/kernel (the Guard)',
    timerMaps: 'no Map<…, Disposable> of timers in src/core outside kernel/timers.ts (KeyedTimers)',
    setTimerCalls: 'no direct ….setTimer( in src/core outside kernel/timers.ts and clock.ts',
    errorClasses: 'no error class in src/core that extends plain Error (SwarmError)',
  };
  for (const rule of RULES) {
    it(what[rule], () => {
      if (process.env.BOUNDARIES_UPDATE) return;
      const messages = mismatches(rule, found[rule], allowed[rule]);
      if (messages.length > 0) assert.fail(`${messages.length} problem(s):\n${messages.join('\n')}\n`);
    });
  }

  it("a state part (an area's state.ts) imports no store, transitions, timers, events or log, and arms no timer", () => {
    const problems = statePartProblems(project).map((problem) => `[stateParts] ${problem}. Fix: ${STATE_PART_FIX}.`);
    if (problems.length > 0) assert.fail(`${problems.length} problem(s):\n${problems.join('\n')}\n`);
  });

  it('the allow-list names only the rules there are', () => {
    const raw = JSON.parse(fs.readFileSync(ALLOW_FILE, 'utf8')) as Record<string, unknown>;
    const unknown = Object.keys(raw).filter((key) => key !== 'about' && !(RULES as readonly string[]).includes(key));
    assert.deepEqual(unknown, [], `${ALLOW_NAME} has sections no rule reads: remove them`);
  });
});

describe('boundaries: each rule finds what breaks it (made-up sources)', () => {
  it('parses every kind of import: type, re-export, multi-line, dynamic, require, import types; not comments', () => {
    const source = parse(
      'x.ts',
      [
        "import type { A } from './a';",
        'import {',
        '  B,',
        '  type C,',
        "} from './b';",
        "export * from './c';",
        "export { D as E } from './d';",
        "import './e';",
        "const f = await import('./f');",
        "const g = require('./g');",
        "let h: import('./h').H;",
        "import { type I } from './i';",
        "// import { j } from './j';",
        "/* import { k } from './k'; */",
      ].join('\n'),
    );
    const refs = moduleRefs(source);
    assert.deepEqual(
      refs.map((r) => r.specifier),
      ['./a', './b', './c', './d', './e', './f', './g', './h', './i'],
    );
    assert.deepEqual(
      refs.map((r) => r.typeOnly),
      [true, false, false, false, false, false, false, true, true],
    );
    assert.deepEqual(refs[1].names, ['B', 'C']);
    assert.deepEqual(refs[3].names, ['D']);
  });

  it('cycles: finds a cycle made of type imports and re-exports, as its files', () => {
    const project = fakeProject({
      'src/core/a.ts': "import type { B } from './b';",
      'src/core/b.ts': "export { C } from './c';",
      'src/core/c.ts': "import {\n  type A,\n} from './a';",
      'src/core/d.ts': "import { A } from './a';",
    });
    assert.deepEqual(sorted(cycles(project)), { 'src/core/a.ts src/core/b.ts src/core/c.ts': 3 });
  });

  it('areaImports: an import of another area but its model.ts, value or type; not its own area, model.ts or store/kernel', () => {
    const project = fakeProject({
      'src/core/one/engine.ts': [
        "import type { Other } from '../two/other';",
        "import { Model } from '../two/model';",
        "import { Own } from './own';",
        "import { Store } from '../store/store';",
        "import { Guard } from '../kernel/guard';",
        "export { X, Y } from '../two/other';",
      ].join('\n'),
      'src/core/one/own.ts': '',
      'src/core/two/other.ts': '',
      'src/core/two/model.ts': '',
      'src/core/store/store.ts': '',
      'src/core/kernel/guard.ts': '',
    });
    assert.deepEqual(sorted(areaImports(project)), { 'src/core/one/engine.ts -> src/core/two/other.ts': 3 });
  });

  it('lines: a source over the limit, with its count', () => {
    const project = fakeProject({
      'src/big.ts': 'x;\n'.repeat(MAX_LINES + 1),
      'src/small.ts': 'x;\n'.repeat(MAX_LINES),
    });
    assert.deepEqual(sorted(longFiles(project)), { 'src/big.ts': MAX_LINES + 1 });
  });

  it('stateParts: a state.ts that imports the store, a repository, transitions, timers, events or the log, or arms a timer', () => {
    const project = fakeProject({
      'src/core/one/state.ts': [
        "import type { Store } from '../store/store';",
        "import type { OneRepository } from './model';",
        "import { Transitions } from '../kernel/transitions';",
        "import { KeyedTimers } from '../kernel/timers';",
        "import { Emitter } from '../events';",
        "import type { EventLog } from '../log/eventLog';",
        "import { sqliteThing } from './sqliteOneRepository';",
        "import { Guard } from '../kernel/guard';",
        'clock.setTimer(1, () => {});',
        'setTimeout(() => {}, 1);',
      ].join('\n'),
      'src/core/one/model.ts': '',
      'src/core/one/sqliteOneRepository.ts': '',
      'src/core/store/store.ts': '',
      'src/core/kernel/transitions.ts': '',
      'src/core/kernel/timers.ts': '',
      'src/core/kernel/guard.ts': '',
      'src/core/events.ts': '',
      'src/core/log/eventLog.ts': '',
      'src/core/one/pure.ts': "import type { Store } from '../store/store';",
    });
    assert.deepEqual(statePartProblems(project), [
      "src/core/one/state.ts:1 imports the store (store/) ('../store/store')",
      "src/core/one/state.ts:2 imports a repository (*Repository) ('./model')",
      "src/core/one/state.ts:3 imports kernel/transitions ('../kernel/transitions')",
      "src/core/one/state.ts:4 imports kernel/timers ('../kernel/timers')",
      "src/core/one/state.ts:5 imports events.ts (emitters) ('../events')",
      "src/core/one/state.ts:6 imports the event log (log/eventLog) ('../log/eventLog')",
      "src/core/one/state.ts:7 imports SQLite code (sqlite*) ('./sqliteOneRepository')",
      "src/core/one/state.ts:7 imports a repository (*Repository) ('./sqliteOneRepository')",
      'src/core/one/state.ts:9 arms a timer (clock.setTimer)',
      'src/core/one/state.ts:10 arms a timer (setTimeout)',
    ]);
  });

  it("safely, timerMaps, setTimerCalls: the kernel's helpers copied outside it", () => {
    const project = fakeProject({
      'src/core/one/engine.ts': [
        'class Engine {',
        '  private readonly timers = new Map<string, Disposable>();',
        '  private other: Map<string, Disposable> = new Map();',
        '  private safely(fn: () => void): void { fn(); }',
        '  arm() { this.deps.clock.setTimer(1, () => {}); }',
        '}',
        'function safely(fn: () => void) { fn(); }',
      ].join('\n'),
      'src/core/kernel/guard.ts': 'function safely() {}',
      'src/core/kernel/timers.ts': 'const timers = new Map<string, Disposable>(); clock.setTimer(1, f);',
      'src/core/clock.ts': 'clock.setTimer(1, f);',
      'src/server/x.ts': 'const safely = () => {}; clock.setTimer(1, f);',
    });
    assert.deepEqual(sorted(privateSafely(project)), { 'src/core/one/engine.ts': 2, 'src/server/x.ts': 1 });
    assert.deepEqual(sorted(timerMaps(project)), { 'src/core/one/engine.ts': 2 });
    assert.deepEqual(sorted(setTimerCalls(project)), { 'src/core/one/engine.ts': 1 });
  });

  it('errorClasses: a core class that extends plain Error; not SwarmError itself, nor one extending it, nor outside the core', () => {
    const project = fakeProject({
      'src/core/one/errors.ts':
        'export class OneError extends Error {}\nexport class Fine extends SwarmError {}\nconst A = class extends Error {};',
      'src/core/kernel/errors.ts': 'export abstract class SwarmError extends Error {}',
      'src/server/x.ts': 'class ServerError extends Error {}',
    });
    assert.deepEqual(sorted(errorClasses(project)), {
      'src/core/one/errors.ts#<class at line 3>': 1,
      'src/core/one/errors.ts#OneError': 1,
    });
  });

  it('the allow-list: new, grown, improved and gone entries each fail and say what to do; lines may shrink', () => {
    const found: Findings = new Map([
      ['new', 1],
      ['grown', 3],
      ['better', 1],
      ['same', 2],
    ]);
    const messages = mismatches('areaImports', found, { grown: 2, better: 2, same: 2, gone: 1 });
    assert.deepEqual(
      messages.map((m) => m.slice(0, m.indexOf('. Fix: '))),
      [
        '[areaImports] improved: better has 1 names imported, test/unit/boundaries.allow.json lists 2',
        '[areaImports] grew: grown has 3 names imported, test/unit/boundaries.allow.json allows 2',
        '[areaImports] new: new (1 names imported)',
        '[areaImports] gone: gone no longer breaks the rule',
      ],
    );
    assert.ok(messages[0].includes('"better": 1'));
    assert.ok(messages[2].includes('Do not add it'));
    assert.ok(messages[3].includes('remove "gone" from "areaImports"'));
    assert.deepEqual(mismatches('lines', new Map([['a.ts', 750]]), { 'a.ts': 800 }), []);
    assert.equal(mismatches('lines', new Map([['a.ts', 801]]), { 'a.ts': 800 }).length, 1);
  });
});
