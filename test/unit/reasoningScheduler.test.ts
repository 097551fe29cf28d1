import { strict as assert } from 'node:assert';
import { INFERENCE_ENGINE_CONNECTOR } from '../../src/core/reasoning/inferenceEngine';
import type { CollectingSink } from '../support/routerHarness';
import { json, settle } from '../support/routerHarness';
import { SchedulerHarness } from '../support/schedulerHarness';

/**
 * The scheduler's gate asking an inference engine agent (RFC §9.3) through the real coordinator: the router, the tools
 * engine (TOOL_CALL envelopes from `coordinator` of provider `reasoning`), the InferenceEngine as the gate's scorer.
 */
describe('the scheduler asks the inference engine agent about overlapping scopes', () => {
  let h: SchedulerHarness;
  let engine: CollectingSink;
  let answered: number;

  beforeEach(() => {
    h = new SchedulerHarness();
    answered = 0;
    h.register('engine', { reasoningConnectors: [INFERENCE_ENGINE_CONNECTOR], name: 'engine' });
    engine = h.stream('engine').sink;
  });

  afterEach(() => h.dispose());

  /** The engine's TOOL_CALLs not answered yet, as their JSON. */
  function toolCalls(): Array<Record<string, unknown>> {
    return engine
      .ofType('TOOL_CALL')
      .slice(answered)
      .map((i) => json(i.envelope));
  }

  async function answer(call: Record<string, unknown>, result: unknown): Promise<void> {
    answered++;
    const sent = h.send(
      h.envelope('engine', {
        messageType: 'TOOL_RESULT',
        correlationId: call.call_id as string,
        payload: { call_id: call.call_id, frame_no: 0, final: true, content_type: 'application/json', result },
      }),
      'coordinator',
    );
    assert.ok(sent.accepted, sent.accepted ? '' : sent.reason);
    await settle();
    await settle();
  }

  it('the second task waits for the check, then runs in parallel on a high confidence', async () => {
    h.agent('a1');
    h.agent('a2');
    h.submitted('a1', 0, { taskId: 'first', scope: 'repo:r/src/**' });
    assert.equal(h.task('first').state, 'DISPATCHED', 'nothing to compare with: no check');
    h.submitted('a2', 0, { taskId: 'second', scope: 'repo:r/src/lib/**' });
    await settle();
    assert.deepEqual(h.task('second').waiting, { kind: 'conflict_check', withTaskId: 'first' });
    const [call] = toolCalls();
    assert.equal(call.provider_id, 'reasoning');
    assert.equal(call.tool_name, 'check_parallelism');
    await answer(call, { confidence_score: 0.95, notes: 'engine: different modules' });
    assert.equal(h.task('second').state, 'DISPATCHED', 'dispatched again when the verdict arrived');
    assert.equal(h.coordinator.hitl.pendingCount(), 0);
  });

  it("a low confidence opens the CONFLICT approval with the engine's score; a confidence of 7 serialises", async () => {
    h.agent('a1');
    h.agent('a2');
    h.agent('a3');
    h.submitted('a1', 0, { taskId: 'first', scope: 'repo:r/src/**' });
    h.submitted('a2', 0, { taskId: 'low', scope: 'repo:r/src/**' });
    h.submitted('a3', 0, { taskId: 'bad', scope: 'repo:r/src/**' });
    await settle();
    const calls = toolCalls();
    assert.equal(calls.length, 2);
    await answer(calls[0], { confidence_score: 0.1, notes: 'engine: same files' });
    await answer(calls[1], { confidence_score: 7, notes: '' });
    const waits = [h.task('low').waiting, h.task('bad').waiting].map((w) => w?.kind).sort();
    assert.deepEqual(waits, ['conflict_decision', 'serialised_after']);
    const pending = h.coordinator.hitl.list({ pendingOnly: true }).filter((i) => i.reasonType === 'CONFLICT');
    assert.equal(pending.length, 1);
    assert.equal(pending[0].context.score, 0.1);
    assert.ok(h.events('scheduler.engine_unavailable').length === 1);
  });
});
