import { strict as assert } from 'node:assert';
import { useCliProcesses } from '../support/cli';
import { assertPrinted, runExample } from '../support/exampleAgentProcess';
import { exampleBundle, requireBundles } from '../support/paths';

/** The example provider bundle built by `npm run build` from examples/toolProvider.ts. */
const EXAMPLE_PROVIDER_BUNDLE = exampleBundle('provider');

/**
 * README "Write a tool provider", "Try it": the example provider against the headless coordinator, as a newcomer runs it
 * (`npm start`, the printed environment, `npm run example:provider -- --call`).
 */
describe('the example tool provider (dist/example-provider.js --call) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-provider-');

  requireBundles(EXAMPLE_PROVIDER_BUNDLE);

  it('registers its tools, calls them through the coordinator (Call, a refused call, CallStream, Cancel, an envelope) and leaves', async () => {
    const { env } = await cli.serve(0);
    const { output, code } = await runExample(
      EXAMPLE_PROVIDER_BUNDLE,
      { ...env, SW4RM_AGENT_ID: 'example-provider' },
      { args: ['--call'], name: 'the example provider' },
    );
    assert.equal(code, 0, output);
    const expected = [
      /registered as example-provider; provider example-provider with tools word_count, count_slowly/,
      /TOOL_CALL word_count \{"text":"the quick brown fox"\} \(call example-[0-9a-f]+, attempt 1\)/,
      /^Call word_count → frame 0 \(final\): \{"words":4,"characters":19\}$/m,
      /^Call word_count with a number → INVALID_ARGUMENT: VALIDATION_ERROR: .*\/text/m,
      /^CallStream count_slowly n=3 → frame 0: \{"i":1\}$/m,
      /^CallStream count_slowly n=3 → frame 2: \{"i":3\}$/m,
      /^CallStream count_slowly n=3 → frame 3 \(final\): \{"counted":3\}$/m,
      /^CallStream count_slowly n=20, cancelled after 3 frames → Cancel: CANCELLED/m,
      /^CallStream count_slowly n=20, cancelled after 3 frames → frame \d+ \(final\): .*summary \{"cancelled":true,"partial_result":true,"frames":3\}$/m,
      /cancel_tool_call example-[0-9a-f]+/,
      /^TOOL_CALL envelope count_slowly n=2 → TOOL_RESULT \{"call_id":"[^"]+","frame_no":2,"final":true,"content_type":"application\/json","status":"OK","result":\{"counted":2\}\}$/m,
      /deregistered/,
    ];
    assertPrinted(output, expected, /refused|failed/i);
  });
});
