import { strict as assert } from 'node:assert';
import { useCliProcesses } from '../support/cli';
import { assertPrinted, runExample } from '../support/exampleAgentProcess';
import { exampleBundle, requireBundles } from '../support/paths';

/** The example bundle built by `npm run build` from examples/handoff.ts. */
const EXAMPLE_HANDOFF_BUNDLE = exampleBundle('handoff');

/**
 * README "Handoffs (for agent authors)", "Run the example": a planner hands a security review to a reviewer chosen by
 * capability, against the headless coordinator, as a newcomer runs it (`npm start`, the printed environment,
 * `npm run example:handoff`).
 */
describe('the handoff example (dist/example-handoff.js) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-handoff-');

  requireBundles(EXAMPLE_HANDOFF_BUNDLE);

  it('requests by capability, the reviewer is notified, reads it pending, accepts; COMPLETED; the planner is refused afterwards', async () => {
    const { env } = await cli.serve(0);
    const { output, code } = await runExample(EXAMPLE_HANDOFF_BUNDLE, env, { name: 'the handoff example' });
    assert.equal(code, 0, output);
    const expected = [
      /^handoff-planner {2}registered handoff-planner-\w+, handoff-reviewer-\w+$/m,
      /^handoff-planner {2}RequestHandoff review \(capabilities security_review\): PENDING$/m,
      /^handoff-reviewer handoff_request review from handoff-planner: "needs a security review" \(\d+ bytes of application\/vnd\.sw4rm\.handoff-context\+json\)$/m,
      /^handoff-reviewer GetPendingHandoffs: 1 pending, (59|60) s left to answer; the context has 3 messages$/m,
      /^handoff-reviewer AcceptHandoff$/m,
      /^handoff-planner {2}handoff_status accepted: ACCEPTED by handoff-reviewer$/m,
      /^handoff-planner {2}CompleteHandoff: success true$/m,
      /^handoff-planner {2}handoff_status completed: COMPLETED by handoff-reviewer$/m,
      /^handoff-reviewer handoff_status completed: the work is mine; resuming after "\+ if \(token == expected\) \{ … \}"$/m,
      /^handoff-planner {2}SendMessage about the work: PERMISSION_DENIED: handoff review completed: handoff-reviewer owns this work$/m,
      /^handoff-planner {2}deregistered the two agents$/m,
    ];
    assertPrinted(output, expected, /refused:|failed:/i);
  });
});
