import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { findFreePort } from '../../src/server/server';
import { useCliProcesses, type CliProcess } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { RoomClient, type WireDecision } from '../support/roomClient';
import { registerRouterAgent, retryAfterRestart } from '../support/routerClient';

const PLAN = Buffer.from(JSON.stringify({ steps: ['design', 'build', 'test'] }));
const CRITICS = ['critic-1', 'critic-2', 'critic-3'];

/**
 * Votes and decisions survive a crash (kill -9) of the headless coordinator, and WaitForDecision survives a restart: the
 * producer's blocked call ends UNAVAILABLE when the process dies, and called again after the restart it waits on the
 * persisted state (or gets the persisted decision at once).
 */
describe('negotiation rooms across a coordinator crash and restart (dist/cli.js)', function () {
  this.timeout(90_000);
  const coordinators = useCliProcesses('sw4rm-int-room-crash-');

  /** Starts dist/cli.js on `port`; a port still held by the killed process is retried until it is free. */
  async function start(port: number): Promise<{ cli: CliProcess; room: RoomClient; clients: CoordinatorClients }> {
    const { cli, env } = await coordinators.serve(port);
    const room = new RoomClient(env.SW4RM_NEGOTIATION_ROOM_ADDR, env.SW4RM_TOKEN);
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    coordinators.closeAfter(room, clients);
    return { cli, room, clients };
  }

  const vote = (critic: string, score: number) => ({
    artifact_id: 'plan-1',
    critic_id: critic,
    score,
    confidence: 0.9,
    passed: true,
    strengths: [`${critic} likes it`],
    weaknesses: [],
    recommendations: [],
  });

  async function submit(room: RoomClient, clients: CoordinatorClients): Promise<void> {
    for (const id of ['producer', ...CRITICS]) await registerRouterAgent(clients, id);
    await room.submitProposal({
      artifact_type: 'PLAN',
      artifact_id: 'plan-1',
      producer_id: 'producer',
      artifact: PLAN,
      artifact_content_type: 'application/json',
      requested_critics: CRITICS,
      negotiation_room_id: 'room-1',
    });
  }

  it('kill -9 between votes loses none; the producer waits again after the restart and gets the decision from the last vote', async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    await submit(first.room, first.clients);
    await first.room.submitVote(vote('critic-1', 8));
    await first.room.submitVote(vote('critic-2', 9));
    // The producer blocks; the coordinator dies under it.
    const blocked = first.room.waitForDecision('plan-1', 60).then(
      () => grpc.status.OK,
      (err: grpc.ServiceError) => err.code,
    );
    first.cli.signal('SIGKILL');
    await first.cli.exit();
    assert.equal(first.cli.exitSignal, 'SIGKILL');
    assert.equal(await blocked, grpc.status.UNAVAILABLE, 'the blocked WaitForDecision ends UNAVAILABLE: call again');

    const second = await start(port);
    const { votes } = await retryAfterRestart('GetVotes', () => second.room.getVotes('plan-1', 'room-1'));
    assert.deepEqual(
      votes.map((v) => [v.critic_id, v.score, v.strengths[0]]),
      [
        ['critic-1', 8, 'critic-1 likes it'],
        ['critic-2', 9, 'critic-2 likes it'],
      ],
      'both votes answered before the crash survived',
    );
    assert.equal((await second.room.getDecision('plan-1')).decision, null);
    let answered: WireDecision | undefined;
    const waiting = retryAfterRestart('WaitForDecision', () => second.room.waitForDecision('plan-1', 60)).then((r) => {
      answered = r.decision;
      return r.decision;
    });
    await retryAfterRestart('SubmitVote', () => second.room.submitVote(vote('critic-3', 8)));
    const decision = await waiting;
    assert.ok(answered);
    assert.equal(decision.outcome, 'APPROVED');
    assert.deepEqual(
      decision.votes.map((v) => v.critic_id),
      CRITICS,
    );

    // The decision survives a second kill -9: answered at once after the restart.
    second.cli.signal('SIGKILL');
    await second.cli.exit();
    const third = await start(port);
    const again = await retryAfterRestart('WaitForDecision', () => third.room.waitForDecision('plan-1', 5));
    assert.deepEqual(again.decision, decision);
  });

  it('WaitForDecision across a graceful restart: the call after the restart waits on the persisted state', async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    await submit(first.room, first.clients);
    await first.room.submitVote(vote('critic-1', 8));
    const blocked = first.room.waitForDecision('plan-1', 60).then(
      () => grpc.status.OK,
      (err: grpc.ServiceError) => err.code,
    );
    first.cli.signal('SIGTERM');
    assert.equal(await first.cli.exit(), 0);
    // A drain ends the calls still open when its grace runs out (CANCELLED), or the stopping coordinator answers UNAVAILABLE.
    const code = await blocked;
    assert.ok(
      code === grpc.status.CANCELLED || code === grpc.status.UNAVAILABLE,
      `ended ${grpc.status[code]}: call again`,
    );

    const second = await start(port);
    const waiting = retryAfterRestart('WaitForDecision', () => second.room.waitForDecision('plan-1', 60));
    await retryAfterRestart('SubmitVote', () => second.room.submitVote(vote('critic-2', 8)));
    await retryAfterRestart('SubmitVote', () => second.room.submitVote(vote('critic-3', 8)));
    const { decision } = await waiting;
    assert.equal(decision.outcome, 'APPROVED');
    assert.equal(decision.aggregated_score.vote_count, 3);
  });
});
