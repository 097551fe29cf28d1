import { strict as assert } from 'node:assert';
import { isGitName, parseRequestedPath } from '../../src/core/worktree/confinement';
import { ATTACK_COUNT } from '../support/confinementCorpus';

// The pure part of the confinement tests: the corpus attacks a real worktree in
// test/integration/confinement.integration.test.ts.

describe('Confinement (RFC §6.4, §16, §23)', () => {
  it(`the corpus has at least 60 attacks (${ATTACK_COUNT})`, () => {
    assert.ok(ATTACK_COUNT >= 60, `${ATTACK_COUNT} attacks`);
  });

  describe('the text of a path (pure)', () => {
    it('isGitName: the variants git itself refuses, and not the dotfiles next to them', () => {
      for (const name of [
        '.git',
        '.GIT',
        '.git.',
        '.git ',
        '.gIt. .',
        'git~1',
        '.git::$DATA',
        '.g\u200dit',
        '.git.::$DATA',
        '.git :x',
        'GIT~1.',
        'git~3',
      ])
        assert.ok(isGitName(name), name);
      for (const name of ['.gitignore', '.github', '.gitmodules', 'git', '.git-x', 'x.git', 'git~', 'git~x', '.git.x'])
        assert.equal(isGitName(name), false, name);
    });

    it('Windows device names are refused where they are devices (on Windows, or when asked)', () => {
      for (const name of ['CON', 'src/nul.txt', 'com1', 'LPT9.log', 'aux.', 'CONOUT$']) {
        assert.deepEqual(parseRequestedPath(name, { windowsNames: true }), { refused: 'device_name' }, name);
      }
      assert.deepEqual(parseRequestedPath('src/aux.ts', { windowsNames: false }), { components: ['src', 'aux.ts'] });
    });

    it('where Windows names apply, a component Windows would trim or split is refused: trailing dots or spaces, ":"', () => {
      // Win32 drops a component's trailing dots and spaces ("..." and ".. " become ".."), and ":" names a stream.
      for (const name of [
        '... /outside',
        '.. /outside',
        'src/.../x',
        'a./b',
        'src/file.txt ',
        'src/file.txt:stream',
        'x:..',
      ]) {
        const parsed = parseRequestedPath(name, { windowsNames: true });
        assert.ok('refused' in parsed, `${JSON.stringify(name)} refused, got ${JSON.stringify(parsed)}`);
      }
      assert.deepEqual(parseRequestedPath('src/.env.local', { windowsNames: true }), {
        components: ['src', '.env.local'],
      });
      assert.deepEqual(
        parseRequestedPath('...', { windowsNames: false }),
        { components: ['...'] },
        'an ordinary name on Linux',
      );
    });

    it('parseRequestedPath keeps names literally and drops empty and "." components', () => {
      assert.deepEqual(parseRequestedPath('./a//b/./c/'), { components: ['a', 'b', 'c'] });
      assert.deepEqual(parseRequestedPath('a%20b'), { components: ['a%20b'] });
      assert.deepEqual(parseRequestedPath(42), { refused: 'not_a_string' });
    });
  });
});
