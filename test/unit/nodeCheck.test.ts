import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { USAGE } from '../../src/cli/args';
import { nodeRefusal, REQUIRED_NODE } from '../../src/cli/nodeCheck';
import { parsePolicy, POLICY_INPUT_KEYS } from '../../src/core/hitl/policy';

const README = fs.readFileSync(path.resolve(__dirname, '../../../README.md'), 'utf8');

describe('the Node the CLI needs (src/cli/nodeCheck.ts)', () => {
  it('refuses a Node without node:sqlite, naming the version needed, this Node and how to run it', () => {
    const refusal = nodeRefusal({ version: 'v20.20.2', execPath: '/usr/bin/node', hasSqlite: false });
    assert.ok(refusal);
    assert.match(refusal, /needs Node\.js 22\.13 or newer/);
    assert.match(refusal, /\(v20\.20\.2, \/usr\/bin\/node\)/);
    assert.match(refusal, /npm start/);
  });

  it('lets a Node with node:sqlite run', () => {
    assert.equal(nodeRefusal({ version: 'v24.21.0', execPath: '/x/node', hasSqlite: true }), undefined);
  });

  it('is what the README says', () => {
    assert.ok(README.includes(`Node.js ${REQUIRED_NODE}`), `README names Node.js ${REQUIRED_NODE}`);
  });
});

describe('HITL policy keys: --help, README and parsePolicy agree', () => {
  it('parsePolicy reads every listed key (a wrong value of each is reported by name)', () => {
    const wrong = Object.fromEntries(
      POLICY_INPUT_KEYS.map((key) => [
        key,
        key === 'paused' ? 'maybe' : key === 'fallbacks' || key === 'rules' ? 7 : -1,
      ]),
    );
    const { problems } = parsePolicy(wrong);
    for (const key of POLICY_INPUT_KEYS)
      assert.ok(
        problems.some((p) => p.includes(key)),
        `${key}: ${problems.join('; ')}`,
      );
  });

  it('--help and the README name every key', () => {
    const readmePolicy = /--hitl-policy policy\.json` with the keys ([^)]*\))/.exec(README)?.[1] ?? '';
    for (const key of POLICY_INPUT_KEYS) {
      assert.ok(USAGE.includes(key), `--help names ${key}`);
      assert.ok(readmePolicy.includes(`\`${key}\``), `README names ${key}`);
    }
  });
});
