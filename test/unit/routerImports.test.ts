import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The router's parts take the narrow pieces they use (router/parts.ts), never the whole RouterCore: read from the
 * sources, no file of src/core/router imports another in a cycle (type imports included), and only the Router builds
 * on routerCore.ts.
 */

const ROUTER = path.resolve(__dirname, '../../../src/core/router');

/** The router files a source imports or re-exports (`import type` included), as file names. */
function localImports(source: string, files: ReadonlySet<string>): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found = new Set<string>();
  for (const match of code.matchAll(
    /\b(?:import|export)\s+(?:type\s+)?[^'";]*?\bfrom\s*['"]\.\/([^'"]+)['"]|\bimport\s*\(?\s*['"]\.\/([^'"]+)['"]/g,
  )) {
    const file = `${(match[1] ?? match[2]).replace(/\.(ts|js)$/, '')}.ts`;
    if (files.has(file)) found.add(file);
  }
  return [...found];
}

/** Every cycle of the graph as its strongly connected component (Tarjan), each sorted. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

function routerGraph(): Map<string, string[]> {
  const files = new Set(fs.readdirSync(ROUTER).filter((name) => name.endsWith('.ts')));
  return new Map(
    [...files].map((file) => [file, localImports(fs.readFileSync(path.join(ROUTER, file), 'utf8'), files)]),
  );
}

describe('router imports (the parts take narrow interfaces)', () => {
  it('finds a cycle, type imports included', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    assert.deepEqual(cycles(graph), [['a.ts', 'b.ts', 'c.ts']]);
    const files = new Set(['a.ts', 'b.ts', 'c.ts']);
    assert.deepEqual(
      localImports(
        "import type {\n  A,\n} from './a';\nexport { B } from './b';\nimport { x } from '../c';",
        files,
      ).sort(),
      ['a.ts', 'b.ts'],
    );
  });

  it('no file of src/core/router imports another in a cycle', () => {
    const graph = routerGraph();
    assert.ok(graph.size > 20, `found the router's sources (${graph.size})`);
    assert.deepEqual(cycles(graph), []);
  });

  it('only router.ts builds on routerCore.ts; parts.ts imports no part', () => {
    const graph = routerGraph();
    const onCore = [...graph].filter(([, deps]) => deps.includes('routerCore.ts')).map(([file]) => file);
    assert.deepEqual(onCore, ['router.ts']);
    const leaves = new Set([
      'envelope.ts',
      'inbox.ts',
      'lifecycle.ts',
      'memoryBudget.ts',
      'model.ts',
      'options.ts',
      'payloadFiles.ts',
      'storeUsage.ts',
    ]);
    assert.deepEqual(
      graph.get('parts.ts')!.filter((dep) => !leaves.has(dep)),
      [],
      'parts.ts imports only records and helpers, no part',
    );
  });
});
