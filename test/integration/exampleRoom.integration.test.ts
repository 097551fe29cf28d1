import { strict as assert } from 'node:assert';
import { useCliProcesses } from '../support/cli';
import { assertPrinted, runExample } from '../support/exampleAgentProcess';
import { exampleBundle, requireBundles } from '../support/paths';

/** The example bundle built by `npm run build` from examples/negotiationRoom.ts. */
const EXAMPLE_ROOM_BUNDLE = exampleBundle('room');

/**
 * README "Negotiation rooms (for agent authors)", "Run the example": a producer and two critics against the headless
 * coordinator, as a newcomer runs it (`npm start`, the printed environment, `npm run example:room`).
 */
describe('the negotiation room example (dist/example-room.js) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-room-');

  requireBundles(EXAMPLE_ROOM_BUNDLE);

  it('submits a PLAN, the critics vote on what they receive, revision 1 gets REVISION_REQUESTED, revision 2 APPROVED', async () => {
    const { env } = await cli.serve(0);
    const { output, code } = await runExample(EXAMPLE_ROOM_BUNDLE, env, { name: 'the room example' });
    assert.equal(code, 0, output);
    const expected = [
      /^room-producer registered room-producer-\w+, room-critic-a-\w+, room-critic-b-\w+$/m,
      /^room-producer SubmitProposal PLAN plan-\w+ in room room-\w+: 2 steps; WaitForDecision…$/m,
      /^room-critic-a review_request PLAN revision 1 from room-producer: score 7, confidence 0\.85, passed true$/m,
      /^room-critic-b review_request PLAN revision 1 from room-producer: score 4, confidence 0\.9, passed false$/m,
      // weighted mean (7·0.85 + 4·0.9) / 1.75 = 9.55 / 1.75 = 5.457; std dev 1.5
      /^room-producer decision REVISION_REQUESTED \(policy v\d+\)$/m,
      /^room-producer {3}aggregate: mean 5\.5, weighted mean 5\.457, std dev 1\.5, min 4, max 7, 2 votes$/m,
      /^room-producer {3}reason: Revision requested by policy: min_score_threshold 5\.457 < 7 \(failed\); min_pass_ratio 0\.5 < 0\.8 \(failed\)/m,
      /^room-critic-b review_request PLAN revision 2 from room-producer: score 9, confidence 0\.8, passed true$/m,
      // weighted mean (8·0.85 + 9·0.8) / 1.65 = 14 / 1.65 = 8.485; std dev 0.5
      /^room-producer decision APPROVED \(policy v\d+\)$/m,
      /^room-producer {3}aggregate: mean 8\.5, weighted mean 8\.485, std dev 0\.5, min 8, max 9, 2 votes$/m,
      /^room-producer deregistered the three agents$/m,
    ];
    assertPrinted(output, expected, /refused|failed:/i);
  });
});
