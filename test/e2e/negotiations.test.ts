import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { Frame } from 'playwright-core';
import { canonicalDefinition, CoordinatorClients } from '../support/clients';
import { disposeAfter, poll, startWithCoordinator, type CodeServerHarness } from './harness';

/** A producer and two critics (the room), two debaters (the debate): real gRPC clients. */
const PRODUCER = 'e2e-producer';
const CRITIC_A = 'e2e-critic-a';
const CRITIC_B = 'e2e-critic-b';
const DEBATER_A = 'e2e-debater-a';
const DEBATER_B = 'e2e-debater-b';
const ARTIFACT = 'e2e-orders-api';
const NEGOTIATION = 'e2e-neg-orders';
const TOPIC = 'Order schema v2';
const IMG = '<img src=x onerror="window.__pwned=1">';
const RATIONALE = 'Reviewed the low-confidence vote myself: the API is fine.';

type Client = grpc.Client & Record<string, unknown>;

interface WireDecision {
  artifact_id: string;
  outcome: string;
  reason: string;
  policy_version: string;
  votes: Array<{ critic_id: string }>;
  aggregated_score: { mean: number; vote_count: number } | null;
}

describe('the Negotiations view and the negotiation panel in a real editor (code-server + Chromium, agents over gRPC)', function () {
  let harness: CodeServerHarness | undefined;
  let registry: CoordinatorClients | undefined;
  let room: Client;
  let negotiation: Client;
  let token: string;

  const page = () => harness!.page;

  function metadata(agentId: string): grpc.Metadata {
    const m = new grpc.Metadata();
    m.set('authorization', `Bearer ${token}`);
    m.set('sw4rm-agent-id', agentId);
    return m;
  }

  function unary<T>(
    client: Client,
    method: string,
    request: unknown,
    agentId: string,
    deadlineMs = 30_000,
  ): Promise<T> {
    const fn = client[method] as (
      request: unknown,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: (err: grpc.ServiceError | null, response: T) => void,
    ) => void;
    return new Promise((resolve, reject) => {
      fn.call(client, request, metadata(agentId), { deadline: Date.now() + deadlineMs }, (err, response) =>
        err ? reject(err) : resolve(response),
      );
    });
  }

  /** Opens the panel by clicking the row showing `rowText` in the Negotiations view; the frame showing `panelText`. */
  async function open(rowText: string, panelText: string): Promise<Frame> {
    await harness!.clickViewRow('Negotiations', rowText);
    return await harness!.webviewFrameShowing(panelText);
  }

  /** The page with the panel scrolled to the section titled `sectionId`, into media/screenshots/<name>.png. */
  async function screenshot(name: string, frame: Frame, sectionId: string): Promise<void> {
    await harness!.clearNotifications();
    await frame.evaluate(`document.getElementById(${JSON.stringify(sectionId)}).scrollIntoView()`);
    await page().mouse.move(1, 1);
    await harness!.screenshotForDocs(name);
  }

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-negotiations-e2e',
      viewport: { width: 1400, height: 860 },
      userSettings: {
        'sw4rm.heartbeatDebounceSeconds': 3600,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
      },
    }));
    const env = await harness.terminalEnvironment();
    token = env.SW4RM_TOKEN;
    const address = env.SW4RM_REGISTRY_ADDR;
    registry = new CoordinatorClients(address, token);
    for (const agentId of [PRODUCER, CRITIC_A, CRITIC_B, DEBATER_A, DEBATER_B]) {
      const registered = await registry.registerAgent({
        agent_id: agentId,
        name: agentId,
        communication_class: 'STANDARD',
        modalities_supported: ['application/json'],
      });
      assert.equal(registered.accepted, true, registered.reason);
    }
    const root = grpc.loadPackageDefinition(canonicalDefinition()) as unknown as {
      sw4rm: {
        negotiation_room: { NegotiationRoomService: grpc.ServiceClientConstructor };
        negotiation: { NegotiationService: grpc.ServiceClientConstructor };
      };
    };
    room = new root.sw4rm.negotiation_room.NegotiationRoomService(address, grpc.credentials.createInsecure()) as Client;
    negotiation = new root.sw4rm.negotiation.NegotiationService(address, grpc.credentials.createInsecure()) as Client;
    await harness.openViewContainer('SW4RM');
    await harness.showOnly('Negotiations');
  });

  after(async function () {
    registry?.close();
    room?.close();
    negotiation?.close();
    await disposeAfter(harness, this.currentTest, 'negotiations');
  });

  it('shows an escalated room; the panel shows the votes with agent markup as text, and Approve with a rationale reaches the producer blocked in WaitForDecision', async function () {
    const artifact = { endpoint: '/orders', methods: ['GET', 'POST'], auth: 'bearer' };
    const submitted = await unary<{ artifact_id: string; negotiation_room_id: string }>(
      room,
      'SubmitProposal',
      {
        proposal: {
          artifact_type: 'CODE',
          artifact_id: ARTIFACT,
          producer_id: PRODUCER,
          artifact: Buffer.from(JSON.stringify(artifact)),
          artifact_content_type: 'application/json',
          requested_critics: [CRITIC_A, CRITIC_B],
        },
      },
      PRODUCER,
    );
    assert.equal(submitted.artifact_id, ARTIFACT);
    await unary(
      room,
      'SubmitVote',
      {
        vote: {
          artifact_id: ARTIFACT,
          critic_id: CRITIC_A,
          score: 8.5,
          confidence: 0.9,
          passed: true,
          strengths: [`Clear routes ${IMG}`],
          weaknesses: ['No pagination'],
          recommendations: ['Add a limit parameter'],
        },
      },
      CRITIC_A,
    );
    // A confident-enough score from an unsure critic: the room escalates to a person (confidence 0.2).
    await unary(
      room,
      'SubmitVote',
      {
        vote: {
          artifact_id: ARTIFACT,
          critic_id: CRITIC_B,
          score: 8,
          confidence: 0.2,
          passed: true,
          strengths: ['Consistent naming'],
          weaknesses: [],
          recommendations: [],
        },
      },
      CRITIC_B,
    );
    const waiting = unary<{ decision: WireDecision }>(
      room,
      'WaitForDecision',
      { artifact_id: ARTIFACT, negotiation_room_id: submitted.negotiation_room_id, timeout_seconds: 170 },
      PRODUCER,
      175_000,
    );
    waiting.catch(() => undefined);

    const text = await harness!.waitForText(
      (t) => t.includes(ARTIFACT) && t.includes('needs you'),
      20_000,
      () => harness!.viewText('Negotiations'),
    );
    assert.match(text, new RegExp(`${ARTIFACT}\\s*CODE · ${PRODUCER} · rev 1 · votes 2/2 · needs you`), text);
    assert.match(text, /Rooms\s*1 \(1 needs you\)/, text);

    const frame = await open(ARTIFACT, `CODE artifact ${ARTIFACT}`);
    const content = await frame.locator('#content').innerText();
    for (const expected of [
      `CODE artifact ${ARTIFACT}, revision 1, by ${PRODUCER}: escalated`,
      CRITIC_A,
      CRITIC_B,
      'confidence 0.20',
      `Clear routes ${IMG}`,
      'No pagination',
      'Add a limit parameter',
      'Confidence-weighted mean',
      'Standard deviation',
      'Minimum confidence',
      'fail',
      '"endpoint": "/orders"',
      'ESCALATED_TO_HITL',
    ]) {
      assert.ok(content.includes(expected), `the panel shows "${expected}":\n${content}`);
    }
    // Give an injected handler every chance to run before looking for its traces.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const f of page().frames()) {
      const traces = (await f
        .evaluate(
          `({ pwned: typeof window.__pwned, images: document.querySelectorAll('img[src="x"], img[onerror]').length })`,
        )
        .catch(() => undefined)) as { pwned: string; images: number } | undefined;
      if (traces) assert.deepEqual(traces, { pwned: 'undefined', images: 0 }, `frame ${f.url().slice(0, 120)}`);
    }
    assert.equal(await frame.locator('#content img, #content script').count(), 0);

    // The buttons wait for a rationale.
    for (const id of ['approve', 'modify', 'deny'])
      assert.equal(await frame.locator(`#${id}`).isDisabled(), true, `#${id} is disabled without a rationale`);
    assert.equal(await frame.locator('#modify').innerText(), 'Request Revision');
    assert.equal(await frame.locator('#deny').innerText(), 'Reject');
    await frame.locator('#rationale').fill(RATIONALE);
    assert.equal(await frame.locator('#approve').isEnabled(), true);
    await harness!.sideBarWidth(560);
    await screenshot('negotiation-room', frame, 'votes-title');
    await frame.locator('#approve').click();

    const { decision } = await waiting;
    assert.equal(decision.outcome, 'APPROVED');
    assert.ok(decision.reason.includes(RATIONALE), decision.reason);
    assert.deepEqual(decision.votes.map((v) => v.critic_id).sort(), [CRITIC_A, CRITIC_B]);

    await poll(
      async () =>
        (
          await frame
            .locator('#status')
            .innerText()
            .catch(() => '')
        ).includes('Approved'),
      { timeoutMs: 10_000, description: 'the panel to say it was approved' },
    );
    await harness!.waitForText(
      (t) => new RegExp(`${ARTIFACT}\\s*CODE · ${PRODUCER} · rev 1 · votes 2/2 · APPROVED`).test(t),
      15_000,
      () => harness!.viewText('Negotiations'),
    );
    await poll(
      async () =>
        (
          await frame
            .locator('#content')
            .innerText()
            .catch(() => '')
        ).includes(RATIONALE),
      { timeoutMs: 10_000, description: 'the panel to show the decision with the rationale' },
    );
    assert.equal(await frame.locator('#decide').isHidden(), true, 'nothing is left to decide');
  });

  it('lists a debate after Open and Propose, and shows its rounds as diffs with the effective policy', async function () {
    await unary(
      negotiation,
      'Open',
      {
        negotiation_id: NEGOTIATION,
        correlation_id: NEGOTIATION,
        topic: TOPIC,
        participants: [DEBATER_A, DEBATER_B],
        intensity: 'MEDIUM',
      },
      DEBATER_A,
    );
    await unary(
      negotiation,
      'Propose',
      {
        negotiation_id: NEGOTIATION,
        from_agent: DEBATER_A,
        content_type: 'application/json',
        payload: Buffer.from(JSON.stringify({ fields: ['id', 'total'], currency: 'EUR' })),
      },
      DEBATER_A,
    );
    await unary(
      negotiation,
      'Counter',
      {
        negotiation_id: NEGOTIATION,
        from_agent: DEBATER_B,
        content_type: 'application/json',
        payload: Buffer.from(JSON.stringify({ fields: ['id', 'total', 'status'], currency: 'EUR' })),
      },
      DEBATER_B,
    );
    await unary(
      negotiation,
      'Evaluate',
      { negotiation_id: NEGOTIATION, from_agent: DEBATER_A, confidence_score: 0.6, notes: `Status helps ${IMG}` },
      DEBATER_A,
    );
    const text = await harness!.waitForText(
      (t) => t.includes(TOPIC) && t.includes('best 0.60'),
      20_000,
      () => harness!.viewText('Negotiations'),
    );
    assert.match(text, new RegExp(`${TOPIC}\\s*${DEBATER_A}, ${DEBATER_B} · 2 rounds · best 0.60 · open`), text);

    const frame = await open(TOPIC, `Debate: ${TOPIC}`);
    const content = await frame.locator('#content').innerText();
    for (const expected of [
      'Effective policy',
      'Profile',
      'Policy version',
      'Round 1 · proposal by ' + DEBATER_A,
      'Round 2 · counter-proposal by ' + DEBATER_B,
      '$.fields[2]',
      `Status helps ${IMG}`,
      'best score',
      'Open: round 3 may be proposed.',
    ]) {
      assert.ok(content.includes(expected), `the panel shows "${expected}":\n${content}`);
    }
    assert.equal(await frame.locator('#decide').isHidden(), true, 'an open debate offers no decision');
    assert.equal(await frame.locator('#content img, #content script').count(), 0);
    await screenshot('negotiation-debate', frame, 'rounds-title');
  });
});
