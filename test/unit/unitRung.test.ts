import { strict as assert } from 'node:assert';
import * as childProcess from 'node:child_process';
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as net from 'node:net';

// test/unit/.mocharc.json requires test/support/unitRung.ts: this rung runs without git or network.
const REFUSED = /^Error: the unit rung runs without git or network: move this test to test\/integration/;

describe('the unit rung runs without git or network', () => {
  it('spawning git throws at once, however it is started', () => {
    assert.throws(
      () => childProcess.spawnSync('git', ['--version']),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => childProcess.spawn('/usr/bin/git', ['status']),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => childProcess.execFileSync('git', ['init']),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => childProcess.execSync('cd / && git status'),
      (e) => REFUSED.test(String(e)),
    );
  });

  it('a child process that runs git finds a git that refuses', () => {
    const child = childProcess.spawnSync('sh', ['-c', 'git --version'], { encoding: 'utf8' });
    assert.notEqual(child.status, 0);
    assert.match(child.stderr, /the unit rung runs without git or network/);
  });

  it('other programs still run', () => {
    assert.equal(
      childProcess.execFileSync(process.execPath, ['-e', 'process.stdout.write("ok")'], { encoding: 'utf8' }),
      'ok',
    );
  });

  it('listening or connecting, loopback included, throws at once (net, http, http2)', () => {
    assert.throws(
      () => net.createServer().listen(0, '127.0.0.1'),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => http.createServer().listen(0),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => http2.createServer().listen(0),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => net.connect(9, '127.0.0.1'),
      (e) => REFUSED.test(String(e)),
    );
    assert.throws(
      () => http2.connect('http://127.0.0.1:9'),
      (e) => REFUSED.test(String(e)),
    );
  });
});
