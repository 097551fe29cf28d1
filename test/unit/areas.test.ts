import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../support/paths';
import { CORE, moduleRefs, parse, tsFiles as sourceFiles } from '../support/sources';

/**
 * The core's shape (ARCHITECTURE.md, "areas"): store/ is the engine and knows no area; an area reaches another
 * only through an interface that area offers (its model), never through its repository or its SQLite code; only
 * the composition root (coordinator.ts, coordinatorStore.ts) and the editor's API (api/) see every area.
 */
const NOT_AREAS = new Set(['store', 'api', 'kernel']);

/**
 * Each import of `file` (the TypeScript parser's: type imports, re-exports, multi-line ones): the module it names
 * (resolved against the file when relative) and the names it takes.
 */
function imports(file: string): Array<{ target: string; names: string }> {
  return moduleRefs(parse(file)).map((ref) => ({
    names: ref.names.join(', '),
    target: ref.specifier.startsWith('.')
      ? path.relative(CORE, path.resolve(path.dirname(file), ref.specifier))
      : ref.specifier,
  }));
}

function areaOf(relativeToCore: string): string | undefined {
  const [first, ...rest] = relativeToCore.split(path.sep);
  return rest.length > 0 && !NOT_AREAS.has(first) ? first : undefined;
}

const areas = fs
  .readdirSync(CORE, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !NOT_AREAS.has(e.name))
  .map((e) => e.name);

describe('the core as areas', () => {
  it('finds the areas by their folders', () => {
    for (const area of ['registry', 'router', 'hitl', 'log', 'worktree'])
      assert.ok(areas.includes(area), `${area}/ is an area folder`);
  });

  it('store/ is the engine only: it imports no area and nothing of the composition', () => {
    for (const file of sourceFiles(path.join(CORE, 'store'))) {
      for (const { target } of imports(file)) {
        assert.ok(
          !/^coordinator/.test(target),
          `${path.relative(REPO_ROOT, file)} imports the composition (${target})`,
        );
        assert.equal(areaOf(target), undefined, `${path.relative(REPO_ROOT, file)} imports the area module ${target}`);
      }
    }
  });

  it('kernel/ is how areas change state, not an area: it imports no area, nothing of the composition, and of the store only its interface', () => {
    const files = sourceFiles(path.join(CORE, 'kernel'));
    assert.ok(files.length >= 4, 'kernel/ has its files');
    for (const file of files) {
      for (const { target } of imports(file)) {
        assert.ok(
          !/^coordinator/.test(target),
          `${path.relative(REPO_ROOT, file)} imports the composition (${target})`,
        );
        assert.equal(areaOf(target), undefined, `${path.relative(REPO_ROOT, file)} imports the area module ${target}`);
        if (target.startsWith(`store${path.sep}`))
          assert.equal(target, path.join('store', 'store'), `${path.relative(REPO_ROOT, file)} imports ${target}`);
      }
    }
  });

  it("no area imports another area's repository, schema or SQLite code", () => {
    const problems: string[] = [];
    for (const area of areas) {
      for (const file of sourceFiles(path.join(CORE, area))) {
        for (const { target, names } of imports(file)) {
          const other = areaOf(target);
          if (!other || other === area) continue;
          const module = path.basename(target);
          if (/^sqlite|^schema$/.test(module) || /\b\w+Repository\b/.test(names)) {
            problems.push(`${path.relative(REPO_ROOT, file)} takes { ${names.trim()} } from ${target}`);
          }
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it("no area imports the editor's API (api/ is built on the areas, never the other way round)", () => {
    const problems: string[] = [];
    for (const area of areas) {
      for (const file of sourceFiles(path.join(CORE, area))) {
        for (const { target } of imports(file))
          if (target.split(path.sep)[0] === 'api') problems.push(`${path.relative(REPO_ROOT, file)} imports ${target}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('each area owns its schema steps and its SQLite repository', () => {
    for (const area of ['registry', 'router', 'hitl', 'log', 'worktree']) {
      const files = fs.readdirSync(path.join(CORE, area));
      assert.ok(files.includes('schema.ts'), `${area}/schema.ts`);
      assert.ok(
        files.some((f) => /^sqlite\w+Repository\.ts$/.test(f)),
        `${area}/sqlite…Repository.ts`,
      );
      assert.ok(files.includes('model.ts'), `${area}/model.ts`);
    }
  });
});
