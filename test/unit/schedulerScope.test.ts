import { strict as assert } from 'node:assert';
import { FIELD_LIMITS } from '../../src/core/fieldLimits';
import type { TaskScope } from '../../src/core/scheduler/model';
import { formatScope, isScopeRefusal, parseScope, toWire } from '../../src/core/scheduler/scope';

function ok(text: string): TaskScope {
  const scope = parseScope(text);
  assert.ok(!isScopeRefusal(scope), isScopeRefusal(scope) ? scope : '');
  return scope;
}

function refused(text: string, pattern: RegExp): void {
  const scope = parseScope(text);
  assert.ok(isScopeRefusal(scope), `expected a refusal for ${text.slice(0, 60)}`);
  assert.match(scope, pattern);
}

describe('Task scope (RFC §9.2): parseScope, formatScope, toWire', () => {
  it('reads the reference SDK example "repo:myrepo/path" as a repository and a path glob', () => {
    assert.deepEqual(ok('repo:myrepo/path'), { repoId: 'myrepo', worktreeId: '', paths: ['path'], resources: [] });
  });

  it('a brace glob with a comma in the token form is refused with the JSON form to use; the JSON form takes it', () => {
    refused('repo:web path:src/{a,b}/**', /use the JSON form/);
    assert.deepEqual(ok('{"repo_id": "web", "paths": ["src/{a,b}/**"]}').paths, ['src/{a,b}/**']);
  });

  it('reads compact tokens separated by whitespace or commas', () => {
    assert.deepEqual(ok('repo:web/src/**/*.ts, worktree:wt-1 path:docs/** resource:db,resource:port-8080'), {
      repoId: 'web',
      worktreeId: 'wt-1',
      paths: ['src/**/*.ts', 'docs/**'],
      resources: ['db', 'port-8080'],
    });
    assert.deepEqual(ok('repo:web'), { repoId: 'web', worktreeId: '', paths: [], resources: [] });
    assert.deepEqual(ok('resource:gpu'), { repoId: '', worktreeId: '', paths: [], resources: ['gpu'] });
  });

  it('reads the JSON object form and normalises paths to forward slashes', () => {
    assert.deepEqual(ok('{"repo_id":"r","worktree_id":"w","paths":["src\\\\a.ts","./lib/**"],"resources":["db"]}'), {
      repoId: 'r',
      worktreeId: 'w',
      paths: ['src/a.ts', 'lib/**'],
      resources: ['db'],
    });
  });

  it('refuses an empty, unparseable or empty-valued scope with a clear reason', () => {
    refused('', /scope is required/);
    refused('   ', /scope is required/);
    refused('{}', /scope is empty/);
    refused('{"repo_id":', /not valid JSON/);
    refused('[1]', /^scope token/);
    refused('{"repo":"x"}', /unknown field/);
    refused('{"paths":"src"}', /paths must be a list of strings/);
    refused('folder:src', /is not repo:<repo_id>/);
    refused('repo:', /has no value/);
    refused('repo:/src', /no repo_id/);
    refused('repo:a repo:b', /two repositories/);
    refused('path:../outside', /relative to the repository/);
    refused('path:/etc/passwd', /relative to the repository/);
  });

  it('bounds ids, entries and lists', () => {
    const max = FIELD_LIMITS.scheduler;
    ok(`repo:${'r'.repeat(max.scope_repo_id)}`);
    refused(`repo:${'r'.repeat(max.scope_repo_id + 1)}`, /repo_id is longer than 256/);
    ok(Array.from({ length: max.scope_entries }, (_, i) => `resource:r${i}`).join(' '));
    refused(Array.from({ length: max.scope_entries + 1 }, (_, i) => `resource:r${i}`).join(' '), /at most 64/);
    refused(`path:${'p'.repeat(max.scope_entry + 1)}`, /longer than 512/);
    refused(JSON.stringify({ repo_id: 'a\u0000b' }), /control characters/);
  });

  it('formats back to tokens that parse to the same scope, and to the wire form', () => {
    const scope = ok('repo:web/src/** worktree:w1 resource:db');
    assert.equal(formatScope(scope), 'repo:web worktree:w1 path:src/** resource:db');
    assert.deepEqual(ok(formatScope(scope)), scope);
    assert.deepEqual(toWire(scope), { repo_id: 'web', worktree_id: 'w1', paths: ['src/**'], resources: ['db'] });
  });
});
