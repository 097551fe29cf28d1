import { strict as assert } from 'node:assert';
import { stretches } from '../../src/extension/ownWork';

describe("the extension's own work in the thread's CPU profile (extension/ownWork.ts)", () => {
  const OURS = '/ext/dist/extension.js';
  // root(1) → editor(2) → ours(3) → lib(4), called by ours, so ours too; root → other extension(5).
  const profile = {
    nodes: [
      { id: 1, callFrame: { url: '' }, children: [2, 5] },
      { id: 2, callFrame: { url: 'file:///editor/extensionHostProcess.js' }, children: [3] },
      { id: 3, callFrame: { url: `file://${OURS}` }, children: [4] },
      { id: 4, callFrame: { url: 'node:zlib' } },
      { id: 5, callFrame: { url: 'file:///other/extension.js' } },
    ],
    samples: [1, 3, 3, 4, 2, 5, 3, 4, 4, 4, 4, 1, 3],
  };

  it('counts the stretches of consecutive samples with a frame of the bundle on the stack, longest first', () => {
    // 0.5 ms per sample: [3,3,4] = 1.5 ms, [3,4,4,4,4] = 2.5 ms, [3] at the end = 0.5 ms.
    assert.deepEqual(stretches(profile, OURS), [2.5, 1.5, 0.5]);
  });

  it("leaves the editor's and other extensions' work out", () => {
    assert.deepEqual(stretches({ ...profile, samples: [1, 2, 5, 5, 2, 1] }, OURS), []);
  });
});
