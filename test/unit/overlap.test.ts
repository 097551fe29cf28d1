import { strict as assert } from 'node:assert';
import type { TaskScope } from '../../src/core/scheduler/model';
import { globsOverlap, scopesOverlap } from '../../src/core/scheduler/overlap';
import { BuiltInScopeScorer, pathScore } from '../../src/core/scheduler/scorer';

function scope(s: Partial<TaskScope>): TaskScope {
  return { repoId: '', worktreeId: '', paths: [], resources: [], ...s };
}

describe('scope overlap (RFC §9.2)', () => {
  describe('globsOverlap: some path could match both (sound: never "no" wrongly)', () => {
    const cases: Array<[string, string, 'identical' | 'certain' | 'possible' | 'none']> = [
      ['src/a.ts', 'src/a.ts', 'identical'],
      ['src/**', 'src/**', 'identical'],
      ['./src/a.ts', 'src/a.ts', 'identical'],
      ['src/a.ts', 'src/b.ts', 'none'],
      ['src', 'src/a.ts', 'certain'], // a literal directory holds the file
      ['src/a.ts', 'src/*.ts', 'certain'], // the literal matches the glob
      ['src/lib/a.ts', '**/*.ts', 'certain'],
      ['src/lib', 'src/*.ts', 'none'], // `*` does not cross '/': nothing under src/lib matches
      ['src/lib', 'src/*/x.ts', 'possible'], // src/lib/x.ts
      ['src/lib', 'src/**/*.ts', 'possible'],
      ['docs/a.md', 'src/*.md', 'none'], // different static bases
      ['src/**', 'docs/**', 'none'],
      ['src/**', 'src/lib/**', 'possible'],
      ['**', 'anything/at/all.txt', 'certain'],
      ['src/**/*.ts', 'src/**/*.md', 'none'], // file names cannot end in both
      ['src/*.ts', 'src/*.d.ts', 'possible'], // x.d.ts ends in both
      ['src/{a,b}.ts', 'src/b.ts', 'certain'],
      ['src/{a,b}/x.ts', 'src/c', 'possible'], // braces: compared conservatively
      ['src/[ab].ts', 'src/c.ts', 'none'],
      ['!src/a.ts', 'docs/b.md', 'certain'], // a negation covers everything else
      ['!src/a.ts', 'src/**/*.md', 'possible'], // compared conservatively
      ['src', 'srcx/a.ts', 'none'], // prefixes compare whole segments
    ];
    for (const [a, b, expected] of cases) {
      it(`${a}  ×  ${b}  →  ${expected}`, () => {
        const ab = globsOverlap(a, b);
        const ba = globsOverlap(b, a);
        assert.equal(ab?.kind ?? 'none', expected);
        assert.equal(ba?.kind ?? 'none', expected, 'symmetric');
      });
    }
  });

  describe('scopesOverlap', () => {
    it('different repositories never overlap, unless they share a resource', () => {
      const a = scope({ repoId: 'r1', paths: ['src/**'] });
      const b = scope({ repoId: 'r2', paths: ['src/**'] });
      assert.equal(scopesOverlap(a, b).overlap, false);
      const shared = scopesOverlap({ ...a, resources: ['db'] }, { ...b, resources: ['db', 'port:8080'] });
      assert.equal(shared.overlap, true);
      assert.deepEqual(shared.sharedResources, ['db']);
      assert.deepEqual(shared.reasons, ["both declare the resource 'db'"]);
    });

    it('different named worktrees of one repository are separate checkouts; an empty worktree is any worktree', () => {
      const w1 = scope({ repoId: 'r', worktreeId: 'w1', paths: ['a.ts'] });
      const w2 = scope({ repoId: 'r', worktreeId: 'w2', paths: ['a.ts'] });
      const any = scope({ repoId: 'r', paths: ['a.ts'] });
      assert.equal(scopesOverlap(w1, w2).overlap, false);
      assert.equal(scopesOverlap(w1, any).overlap, true);
      assert.equal(scopesOverlap(w1, { ...w2, worktreeId: 'w1' }).overlap, true);
    });

    it('a scope without paths covers its whole tree', () => {
      const whole = scopesOverlap(
        scope({ repoId: 'r', worktreeId: 'w' }),
        scope({ repoId: 'r', worktreeId: 'w', paths: ['docs/x.md'] }),
      );
      assert.equal(whole.overlap, true);
      assert.equal(whole.wholeTree, true);
      assert.match(whole.reasons[0], /whole tree/);
    });

    it('resources only: no files shared; disjoint paths in the same place: no overlap', () => {
      assert.equal(scopesOverlap(scope({ resources: ['db'] }), scope({ repoId: 'r' })).overlap, false);
      assert.equal(
        scopesOverlap(scope({ repoId: 'r', paths: ['src/**'] }), scope({ repoId: 'r', paths: ['docs/**'] })).overlap,
        false,
      );
    });

    it('names every overlapping pair of paths', () => {
      const o = scopesOverlap(
        scope({ repoId: 'r', paths: ['src/a.ts', 'docs/**'] }),
        scope({ repoId: 'r', paths: ['src/*.ts', 'docs/x.md', 'test/**'] }),
      );
      assert.deepEqual(
        o.paths.map((p) => [p.a, p.b, p.kind]),
        [
          ['src/a.ts', 'src/*.ts', 'certain'],
          ['docs/**', 'docs/x.md', 'certain'],
        ],
      );
    });
  });

  describe('BuiltInScopeScorer (RFC §9.3, the README table)', () => {
    const scorer = new BuiltInScopeScorer();
    const cases: Array<[string, Partial<TaskScope>, Partial<TaskScope>, number]> = [
      ['no overlap', { repoId: 'r', paths: ['src/**'] }, { repoId: 'r', paths: ['docs/**'] }, 1],
      ['different repositories', { repoId: 'r1' }, { repoId: 'r2' }, 1],
      ['a shared resource', { repoId: 'r1', resources: ['db'] }, { repoId: 'r2', resources: ['db'] }, 0.1],
      ['the same files', { repoId: 'r', paths: ['src/a.ts'] }, { repoId: 'r', paths: ['src/a.ts'] }, 0.2],
      ['the same worktree without paths', { repoId: 'r', worktreeId: 'w' }, { repoId: 'r', worktreeId: 'w' }, 0.3],
      [
        'a literal inside a glob (certain)',
        { repoId: 'r', paths: ['src/a.ts'] },
        { repoId: 'r', paths: ['src/**'] },
        0.4,
      ],
      ['possible overlap from the root', { repoId: 'r', paths: ['**/*.ts'] }, { repoId: 'r', paths: ['src/**'] }, 0.4],
      [
        'possible overlap one directory deep',
        { repoId: 'r', paths: ['src/**'] },
        { repoId: 'r', paths: ['src/lib/**'] },
        0.45,
      ],
      [
        'possible overlap deep in the tree',
        { repoId: 'r', paths: ['a/b/c/d/e/**/*.ts'] },
        { repoId: 'r', paths: ['a/b/c/d/e/f/**'] },
        0.6,
      ],
      [
        'the lowest applies',
        { repoId: 'r', paths: ['x.ts'], resources: ['db'] },
        { repoId: 'r', paths: ['x.ts'], resources: ['db'] },
        0.1,
      ],
    ];
    for (const [name, a, b, expected] of cases) {
      it(`${name} → ${expected}`, () => {
        const verdict = scorer.check(scope(a), scope(b));
        assert.equal(verdict.confidence, expected);
        assert.equal(scorer.check(scope(b), scope(a)).confidence, expected, 'symmetric');
        assert.deepEqual(scorer.check(scope(a), scope(b)), verdict, 'deterministic');
        assert.ok(verdict.notes.length > 0);
      });
    }

    it('possible overlaps stay within 0.4–0.6', () => {
      for (let depth = 0; depth < 10; depth++) {
        const score = pathScore({ a: 'x', b: 'y', kind: 'possible', depth });
        assert.ok(score >= 0.4 && score <= 0.6, `${depth}: ${score}`);
      }
    });
  });
});
