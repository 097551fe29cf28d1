import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { expectStatus } from '../support/clients';
import { useHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { RoomClient } from '../support/roomClient';
import { jsonPayload, registerRouterAgent, RouterClient, type Inbox } from '../support/routerClient';

const PLAN = Buffer.from(JSON.stringify({ steps: ['design', 'build', 'test'] }));

describe('NegotiationRoomService over gRPC (RFC §17.5)', function () {
  this.timeout(30_000);
  const fixture = useHost('sw4rm-int-room-');
  let room: RoomClient;
  const routers: RouterClient[] = [];
  const inboxes = new Map<string, Inbox>();

  beforeEach(async () => {
    room = new RoomClient(`127.0.0.1:${fixture.host.port}`, fixture.host.token);
    for (const id of ['producer', 'critic-1', 'critic-2', 'outsider']) {
      await registerRouterAgent(fixture.clients, id);
      const router = new RouterClient(`127.0.0.1:${fixture.host.port}`, fixture.host.token, id);
      routers.push(router);
      inboxes.set(id, router.openInbox(id));
    }
  });

  afterEach(() => {
    for (const inbox of inboxes.values()) inbox.close();
    inboxes.clear();
    for (const router of routers.splice(0)) router.close();
    room.close();
  });

  const proposal = (extra: Record<string, unknown> = {}) => ({
    artifact_type: 'PLAN',
    artifact_id: 'plan-1',
    producer_id: 'producer',
    artifact: PLAN,
    artifact_content_type: 'application/json',
    requested_critics: ['critic-1', 'critic-2'],
    negotiation_room_id: 'room-1',
    ...extra,
  });
  const vote = (critic: string, score: number, confidence: number, extra: Record<string, unknown> = {}) => ({
    artifact_id: 'plan-1',
    critic_id: critic,
    score,
    confidence,
    passed: true,
    strengths: ['clear'],
    weaknesses: [],
    recommendations: [],
    ...extra,
  });

  it('critics receive their review_request; the producer blocked in WaitForDecision gets the decision when the last critic votes', async () => {
    assert.deepEqual(await room.submitProposal(proposal()), { artifact_id: 'plan-1', negotiation_room_id: 'room-1' });
    for (const critic of ['critic-1', 'critic-2']) {
      const item = await inboxes
        .get(critic)!
        .waitFor((i) => i.msg.message_type === 'NEGOTIATION', 10_000, 'the review request');
      assert.equal(item.msg.producer_id, 'coordinator');
      assert.equal(item.msg.correlation_id, 'room-1');
      const body = jsonPayload<Record<string, unknown>>(item.msg)!;
      assert.equal(body.kind, 'review_request');
      assert.equal(body.artifact_id, 'plan-1');
      assert.equal(body.critic_id, critic);
      assert.deepEqual(Buffer.from(String(body.payload_b64), 'base64'), PLAN);
    }
    assert.equal((await room.getDecision('plan-1')).decision, null, 'no decision while the critics vote');

    let answered = false;
    const waiting = room.waitForDecision('plan-1', 30).then((r) => {
      answered = true;
      return r;
    });
    await room.submitVote(vote('critic-1', 8, 0.9));
    const votes = await room.getVotes('plan-1', 'room-1');
    assert.equal(votes.vote_count, 1);
    assert.equal(votes.votes[0].critic_id, 'critic-1');
    assert.equal(answered, false, 'still waiting for critic-2');
    await room.submitVote(vote('critic-2', 9, 0.8));
    const { decision } = await waiting;
    assert.equal(decision.outcome, 'APPROVED');
    assert.equal(decision.artifact_id, 'plan-1');
    assert.equal(decision.negotiation_room_id, 'room-1');
    assert.equal(decision.votes.length, 2);
    // weighted mean (8·0.9 + 9·0.8) / 1.7 = 8.4706; mean 8.5; std dev 0.5
    assert.equal(decision.aggregated_score.weighted_mean.toFixed(4), '8.4706');
    assert.equal(decision.aggregated_score.std_dev, 0.5);
    assert.equal(decision.aggregated_score.vote_count, 2);
    assert.match(decision.policy_version, /^v\d+$/);
    assert.match(decision.reason, /Approved by policy/);
    assert.ok(decision.decided_at && Number(decision.decided_at.seconds) > 0);
    assert.deepEqual((await room.getDecision('plan-1', 'room-1')).decision, decision);
  });

  it('refusals carry the gRPC status and the SW4RM code first in the details', async () => {
    let err = await expectStatus(
      room.submitProposal(proposal({ artifact_type: 'ARTIFACT_TYPE_UNSPECIFIED' })),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(err.details, /^VALIDATION_ERROR: artifact_type/);
    err = await expectStatus(
      room.submitProposal(proposal({ requested_critics: ['critic-1', 'ghost'] })),
      grpc.status.NOT_FOUND,
    );
    assert.match(err.details, /^NOT_FOUND: requested critic 'ghost'/);
    await room.submitProposal(proposal());
    err = await expectStatus(room.submitVote(vote('outsider', 8, 0.9)), grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /^PERMISSION_DENIED: 'outsider' is not a requested critic/);
    err = await expectStatus(room.submitVote(vote('critic-1', 11, 0.9)), grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /^VALIDATION_ERROR: score/);
    err = await expectStatus(room.submitVote(vote('critic-1', 8, 1.5)), grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /^VALIDATION_ERROR: confidence/);
    err = await expectStatus(room.getVotes('nope'), grpc.status.NOT_FOUND);
    err = await expectStatus(room.waitForDecision('nope', 1), grpc.status.NOT_FOUND);
    await room.submitVote(vote('critic-1', 8, 0.9));
    await room.submitVote(vote('critic-2', 8, 0.9));
    err = await expectStatus(room.submitVote(vote('critic-1', 2, 0.9)), grpc.status.FAILED_PRECONDITION);
    assert.match(err.details, /^FAILED_PRECONDITION: .*votes are closed/);
  });

  it('an agent credential may vote only as itself: lying about critic_id is refused before the handler', async () => {
    await room.submitProposal(proposal());
    const minted = fixture.host.coordinator.credentials.mintAgent('critic-2', 'test', 'critic 2', {
      correlationId: 'test',
    }).token;
    const err = await expectStatus(room.submitVote(vote('critic-1', 1, 0.9), minted), grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /acts as agent 'critic-2'; the call acts as 'critic-1'/);
    assert.equal((await room.getVotes('plan-1')).vote_count, 0);
    await room.submitVote(vote('critic-2', 7, 0.9), minted);
    assert.equal((await room.getVotes('plan-1')).vote_count, 1);
    // A critic may not read the others' votes before the decision (the operator token above may).
    const denied = await expectStatus(
      room.call('GetVotes', { artifact_id: 'plan-1' }, { token: minted }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.match(denied.details, /^PERMISSION_DENIED: .*critic 'critic-2'.*before the revision is decided/);
  });

  it('a cancelled WaitForDecision ends (CANCELLED), the server drops its waiter, and the room keeps answering', async () => {
    await room.submitProposal(proposal());
    let call: grpc.ClientUnaryCall | undefined;
    const waiting = room.waitForDecision('plan-1', 60, {
      onCall: (c) => {
        call = c;
      },
    });
    const server = fixture.host.coordinator.room;
    await pollUntil('the server holds the wait', async () => server.waiterCount('plan-1') === 1 || undefined, 5_000);
    call!.cancel();
    await expectStatus(waiting, grpc.status.CANCELLED);
    // CANCELLED comes from the client's own cancel; what matters is that the server let go of the wait.
    await pollUntil('the server dropped the wait', async () => server.waiterCount('plan-1') === 0 || undefined, 5_000);
    // The room keeps working for the next caller.
    await room.submitVote(vote('critic-1', 8, 0.9));
    await room.submitVote(vote('critic-2', 8, 0.9));
    await pollUntil('the decision', async () => (await room.getDecision('plan-1')).decision ?? undefined, 5_000);
    assert.equal((await room.waitForDecision('plan-1', 1)).decision.outcome, 'APPROVED');
  });
});
