/**
 * The desktop path for the editor rung: runs test/desktop/suite inside a real desktop VS Code through
 * @vscode/test-electron. It needs a VS Code build: either VSCODE_EXECUTABLE pointing at a local `code`
 * binary, or a machine that can download one (this project's CI machines cannot, so `npm test` runs the
 * editor rung in code-server instead; see test/e2e).
 *
 *   npm run build && npm run compile-tests && VSCODE_EXECUTABLE=/usr/bin/code node out/test/desktop/runTests.js
 */
import { runTests } from '@vscode/test-electron';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

async function main(): Promise<void> {
  const root = path.resolve(__dirname, '../../..');
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-desktop-'));
  execFileSync('git', ['init', '-q', workspace]);
  fs.writeFileSync(path.join(workspace, 'README.md'), '# desktop test workspace\n');
  await runTests({
    extensionDevelopmentPath: root,
    extensionTestsPath: path.join(__dirname, 'suite', 'index.js'),
    vscodeExecutablePath: process.env.VSCODE_EXECUTABLE || undefined,
    launchArgs: [workspace, '--disable-extensions', '--disable-workspace-trust'],
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
