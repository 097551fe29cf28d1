import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { PACKAGED_VSIX as VSIX, ROOT } from './harness';

/** The package before it had a users' README and left its screenshots out (2026-11-23): 399.75 KB. */
const SIZE_BEFORE = 409_348;

/** The entries of a zip file (a .vsix is one), read from its central directory: name → uncompressed bytes. */
function unzip(file: string): Map<string, Buffer> {
  const zip = fs.readFileSync(file);
  let end = zip.length - 22;
  while (end >= 0 && zip.readUInt32LE(end) !== 0x06054b50) end--;
  assert.ok(end >= 0, `${file} has no end of central directory: not a zip`);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const entries = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    assert.equal(zip.readUInt32LE(at), 0x02014b50, 'a central directory entry');
    const method = zip.readUInt16LE(at + 10);
    const compressedSize = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const localHeader = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    const dataStart = localHeader + 30 + zip.readUInt16LE(localHeader + 26) + zip.readUInt16LE(localHeader + 28);
    const data = zip.subarray(dataStart, dataStart + compressedSize);
    entries.set(name, method === 0 ? Buffer.from(data) : inflateRawSync(data));
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** Width and height of a PNG, from its IHDR chunk. */
function pngSize(png: Buffer): { width: number; height: number } {
  assert.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'a PNG signature');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe('the packaged .vsix (dist/sw4rm-coordinator.vsix, unpacked)', () => {
  let entries: Map<string, Buffer>;
  before(() => {
    assert.ok(fs.existsSync(VSIX), `${VSIX} is missing: npm run package builds it`);
    entries = unzip(VSIX);
  });

  it('has the 128×128 icon that package.json names', () => {
    const manifest = JSON.parse(entries.get('extension/package.json')!.toString('utf8')) as { icon?: string };
    assert.equal(manifest.icon, 'media/icon.png');
    const icon = entries.get('extension/media/icon.png');
    assert.ok(icon, `no extension/media/icon.png among ${[...entries.keys()].join(', ')}`);
    assert.deepEqual(pngSize(icon), { width: 128, height: 128 });
    assert.ok(icon.equals(fs.readFileSync(path.join(ROOT, 'media', 'icon.png'))), 'the committed icon');
    assert.match(entries.get('extension.vsixmanifest')!.toString('utf8'), /<Icon>extension\/media\/icon\.png<\/Icon>/);
  });

  it("ships the users' README, not the developer guide", () => {
    const readmes = [...entries.keys()].filter((name) => /readme\.md$/i.test(name));
    assert.deepEqual(readmes, ['extension/readme.md']);
    const readme = entries.get('extension/readme.md')!.toString('utf8');
    assert.equal(readme, fs.readFileSync(path.join(ROOT, 'docs', 'user', 'README.md'), 'utf8'));
    for (const section of ['## Install', '## First steps', '## Settings', '## Where the store lives'])
      assert.ok(readme.includes(section), section);
    assert.doesNotMatch(readme, /npm test|npm start|## Tests/, 'no developer instructions');
  });

  it('leaves the screenshots out: besides its bundled code it is well below its size before, and under 1.25 MiB in all', () => {
    const screenshots = [...entries.keys()].filter(
      (name) => name.includes('screenshots/') || (/\.png$/.test(name) && !name.endsWith('media/icon.png')),
    );
    assert.deepEqual(screenshots, []);
    const size = fs.statSync(VSIX).size;
    // The bundled code grows with the product (a JSON Schema validator came with the workspace tools), so what is
    // measured against the package before is the rest: manifest, READMEs, protos, media.
    const content = [...entries]
      .filter(([name]) => !/^extension\/dist\/.*\.js$/.test(name))
      .reduce((sum, [, data]) => sum + data.length, 0);
    console.log(
      `    .vsix: ${(size / 1024).toFixed(1)} KiB (before: ${(SIZE_BEFORE / 1024).toFixed(1)} KiB), ${entries.size} files, ${(content / 1024).toFixed(1)} KiB besides the bundled code`,
    );
    assert.ok(
      content < SIZE_BEFORE * 0.5,
      `${content} bytes besides the bundled code is not well below the ${SIZE_BEFORE} of the package before`,
    );
    // 1 MiB until the agent sessions' ACP client (its schemas; zod was already bundled for MCP) took it to 1,047 KiB.
    assert.ok(size < 1.25 * 1024 * 1024, `${size} bytes: the package stays under 1.25 MiB`);
  });

  it('has every file that the manifest, the walkthroughs and both READMEs reference', () => {
    // `bin` is npm's field (the headless CLI, run from a clone or the npm package), not the editor's: left out.
    const { bin: _bin, ...manifest } = JSON.parse(entries.get('extension/package.json')!.toString('utf8')) as Record<
      string,
      unknown
    >;
    const inPackage = (name: string): boolean =>
      entries.has(`extension/${path.posix.normalize(name.replace(/^\.\//, ''))}`);
    // Every string of the manifest that names a file of the package: icons, the main bundle, the walkthroughs' media.
    const named = new Set<string>();
    (function collect(value: unknown): void {
      if (typeof value === 'string') {
        if (/^(\.\/)?(media|dist|protos|docs|schemas|images)\/[^\s*]+\.[A-Za-z0-9]+$/.test(value))
          named.add(value.replace(/^\.\//, ''));
      } else if (Array.isArray(value)) value.forEach(collect);
      else if (value !== null && typeof value === 'object') Object.values(value).forEach(collect);
    })(manifest);
    assert.ok(
      [...named].some((name) => name.startsWith('media/walkthrough/')),
      `the walkthroughs' markdown among ${[...named].join(', ')}`,
    );
    const missing = [...named].filter((name) => !inPackage(name)).map((name) => `package.json: ${name}`);

    // What a markdown file of the package (a walkthrough step, the users' README) links to or shows, relative to it.
    const localReferences = (markdown: string): string[] =>
      [...markdown.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)|src="([^"]+)"/g)]
        .map((match) => (match[1] ?? match[2])!)
        .filter((target) => !/^([a-z][a-z0-9+.-]*:|#)/i.test(target))
        .map((target) => decodeURIComponent(target.split('#')[0]!));
    for (const name of [...named].filter((n) => n.endsWith('.md'))) {
      const markdown = entries.get(`extension/${name}`)?.toString('utf8') ?? '';
      for (const target of localReferences(markdown)) {
        const resolved = path.posix.join(path.posix.dirname(name), target);
        if (!inPackage(resolved)) missing.push(`${name}: ${target}`);
      }
    }
    const usersReadme = entries.get('extension/readme.md')!.toString('utf8');
    for (const target of localReferences(usersReadme))
      if (!inPackage(target)) missing.push(`docs/user/README.md (extension/readme.md): ${target}`);
    assert.deepEqual(missing, [], 'files referenced but not in the .vsix');

    // The developer guide (README.md) is not shipped; what it references must be in the repository (its screenshots
    // stay there on purpose, see the test above).
    const developerReadme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const absent = localReferences(developerReadme).filter((target) => !fs.existsSync(path.join(ROOT, target)));
    assert.deepEqual(absent, [], 'files README.md references that the repository does not have');
    console.log(
      `    ${named.size} files named by the manifest, ${localReferences(developerReadme).length} references of README.md: all present`,
    );
  });

  it('still has what the extension needs at run time', () => {
    for (const name of [
      'extension/dist/extension.js',
      'extension/dist/webview/hitl.js',
      'extension/dist/webview/hitl.css',
      'extension/protos/router.proto',
      'extension/media/sw4rm.svg',
      'extension/LICENSE.txt',
    ]) {
      assert.ok(entries.has(name), `${name} among ${[...entries.keys()].join(', ')}`);
    }
  });
});
