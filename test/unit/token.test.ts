import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TOKEN_FILE_NAME, loadOrCreateToken, tokenMatches } from '../../src/core/auth/token';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('coordinator token', () => {
  let dataDir: string;
  let file: string;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-token-');
    file = path.join(dataDir, TOKEN_FILE_NAME);
  });

  afterEach(() => removeTempDir(dataDir));

  describe('loadOrCreateToken', () => {
    it('creates a long random token in a file only its owner can read', () => {
      const token = loadOrCreateToken(dataDir);
      assert.match(token, /^[A-Za-z0-9_-]{43}$/, '32 random bytes, base64url');
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.equal(fs.readFileSync(file, 'utf8').trim(), token);
      assert.deepEqual(fs.readdirSync(dataDir), [TOKEN_FILE_NAME], 'no temporary file is left behind');
    });

    it('reuses the token on later calls', () => {
      const first = loadOrCreateToken(dataDir);
      assert.equal(loadOrCreateToken(dataDir), first);
      assert.equal(loadOrCreateToken(dataDir), first);
    });

    it('creates the data folder when needed', () => {
      const nested = path.join(dataDir, 'x', 'y');
      loadOrCreateToken(nested);
      assert.ok(fs.existsSync(path.join(nested, TOKEN_FILE_NAME)));
    });

    it('tightens the mode of an existing token file that others could read', () => {
      const first = loadOrCreateToken(dataDir);
      fs.chmodSync(file, 0o644);
      assert.equal(loadOrCreateToken(dataDir), first);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    });

    it('replaces a token file whose content is too weak to be a token', () => {
      fs.writeFileSync(file, 'secret\n', { mode: 0o600 });
      const token = loadOrCreateToken(dataDir);
      assert.notEqual(token, 'secret');
      assert.match(token, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(fs.readFileSync(file, 'utf8').trim(), token);
    });

    it('gives different data folders different tokens', () => {
      const other = makeTempDir('sw4rm-token-');
      try {
        assert.notEqual(loadOrCreateToken(dataDir), loadOrCreateToken(other));
      } finally {
        removeTempDir(other);
      }
    });
  });

  describe('tokenMatches', () => {
    const expected = 'A'.repeat(20) + 'b'.repeat(23);

    it('accepts the exact token', () => {
      assert.equal(tokenMatches(expected, expected.slice()), true);
    });

    it('refuses a missing token', () => {
      assert.equal(tokenMatches(expected, undefined), false);
      assert.equal(tokenMatches(expected, ''), false);
    });

    it('refuses a wrong token of the same length', () => {
      assert.equal(tokenMatches(expected, expected.slice(0, -1) + 'c'), false);
      assert.equal(tokenMatches(expected, expected.toLowerCase()), false);
    });

    it('refuses tokens of other lengths without throwing', () => {
      assert.equal(tokenMatches(expected, expected + 'x'), false);
      assert.equal(tokenMatches(expected, expected.slice(1)), false);
      assert.equal(tokenMatches(expected, 'A'), false);
    });

    it('compares bytes, so a multi-byte lookalike of the same character count is refused', () => {
      const lookalike = expected.slice(0, -1) + 'é';
      assert.equal(lookalike.length, expected.length);
      assert.equal(tokenMatches(expected, lookalike), false);
    });
  });
});
