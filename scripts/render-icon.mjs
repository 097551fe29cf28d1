// Renders media/icon.svg to media/icon.png (128×128, the package's icon) in Debian's Chromium through
// playwright-core, so that the PNG is made from its committed source the same way every time: `npm run icon`.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'media', 'icon.svg');
const target = path.join(root, 'media', 'icon.png');
const SIZE = 128;

const svg = fs.readFileSync(source, 'utf8');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: SIZE, height: SIZE }, deviceScaleFactor: 1 });
  await page.setContent(`<!DOCTYPE html><html><body style="margin:0;background:transparent">${svg}</body></html>`);
  await page.locator('svg').screenshot({ path: target, omitBackground: true });
} finally {
  await browser.close();
}
console.log(
  `render-icon: ${path.relative(root, target)} (${fs.statSync(target).size} bytes) from ${path.relative(root, source)}`,
);
