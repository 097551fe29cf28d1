import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The layers of ARCHITECTURE.md, read from the sources: the editor reaches the core only through
 * src/core/api (the CoordinatorApi and what crosses it), and the core never imports the editor or gRPC.
 */

const root = path.resolve(__dirname, '../../..');
const CORE = path.join(root, 'src', 'core');
const CORE_API = path.join(CORE, 'api');

/** Every module specifier in a TypeScript source: imports, re-exports, `import type`, dynamic imports, require. */
function moduleSpecifiers(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
    /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const match of code.matchAll(pattern)) found.push(match[1]);
  return found;
}

function tsFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return tsFiles(full);
    return entry.isFile() && entry.name.endsWith('.ts') ? [full] : [];
  });
}

function imports(file: string): Array<{ specifier: string; resolved: string | undefined }> {
  return moduleSpecifiers(fs.readFileSync(file, 'utf8')).map((specifier) => ({
    specifier,
    resolved: specifier.startsWith('.')
      ? path.resolve(path.dirname(file), specifier).replace(/\.(ts|js)$/, '')
      : undefined,
  }));
}

function isInside(dir: string, target: string): boolean {
  const relative = path.relative(dir, target);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

const rel = (file: string) => path.relative(root, file).split(path.sep).join('/');

describe('layers (ARCHITECTURE.md: extension → server → core)', () => {
  it('finds every kind of import in a source', () => {
    const source = [
      "import * as vscode from 'vscode';",
      "import type { A } from '../core/a';",
      'import {',
      '  B,',
      '  type C,',
      "} from '../core/b';",
      "export * from '../core/c';",
      'export { D } from "../core/d";',
      "import '../core/e';",
      "const f = await import('../core/f');",
      "const g = require('../core/g');",
      "// import { h } from '../core/h';",
      "/* import { i } from '../core/i'; */",
    ].join('\n');
    assert.deepEqual(moduleSpecifiers(source).sort(), [
      '../core/a',
      '../core/b',
      '../core/c',
      '../core/d',
      '../core/e',
      '../core/f',
      '../core/g',
      'vscode',
    ]);
  });

  it('src/extension imports nothing of src/core but src/core/api', () => {
    const files = tsFiles(path.join(root, 'src', 'extension'));
    assert.ok(files.length > 10, `found the extension's sources (${files.length})`);
    const offending = files.flatMap((file) =>
      imports(file)
        .filter(
          ({ resolved }) =>
            resolved !== undefined &&
            isInside(CORE, resolved) &&
            resolved !== CORE_API &&
            resolved !== path.join(CORE_API, 'index'),
        )
        .map(({ specifier }) => `${rel(file)} imports '${specifier}'`),
    );
    assert.deepEqual(offending, [], 'the editor reaches the coordinator through src/core/api only');
  });

  it('src/core imports neither vscode nor @grpc/*', () => {
    const files = tsFiles(CORE);
    assert.ok(files.length > 10, `found the core's sources (${files.length})`);
    const offending = files.flatMap((file) =>
      imports(file)
        .filter(
          ({ specifier }) =>
            specifier === 'vscode' || specifier.startsWith('vscode/') || specifier.startsWith('@grpc/'),
        )
        .map(({ specifier }) => `${rel(file)} imports '${specifier}'`),
    );
    assert.deepEqual(offending, []);
  });
});
