// The Negotiations view's rows and the negotiation panel's wire shapes (src/extension/negotiationsModel.ts).
import { strict as assert } from 'node:assert';
import type {
  NegotiationDetailView,
  NegotiationSummary,
  RoomArtifactDetailView,
  RoomArtifactSummary,
} from '../../src/core/api';
import {
  debateJson,
  debateRow,
  decidedMessage,
  groupDescription,
  negotiationPanelTitle,
  roomJson,
  roomRow,
} from '../../src/extension/negotiationsModel';
import { isDebateJson, isRoomJson } from '../../webview/negotiation/protocol';

const MARKUP = '<img src=x onerror="window.__pwned=1">';

function summary(overrides: Partial<NegotiationSummary> = {}): NegotiationSummary {
  return {
    id: 'neg-1',
    topic: 'orders schema',
    participants: ['agent-a', 'agent-b'],
    intensity: 'MEDIUM',
    state: 'open',
    rounds: 2,
    bestScore: 0.65,
    stopReason: null,
    pendingInvocationId: null,
    openedAt: Date.UTC(2026, 0, 1),
    updatedAt: Date.UTC(2026, 0, 1, 0, 5),
    ...overrides,
  };
}

function artifact(overrides: Partial<RoomArtifactSummary> = {}): RoomArtifactSummary {
  return {
    roomId: 'room-1',
    artifactId: 'api-v2',
    revision: 2,
    artifactType: 'CODE',
    producerId: 'producer-a',
    state: 'voting',
    votes: 1,
    requested: 2,
    outcome: null,
    invocationId: null,
    updatedAt: Date.UTC(2026, 0, 1),
    ...overrides,
  };
}

describe('Negotiations view rows', () => {
  it('shows a debate: topic, participants · rounds · best score · state', () => {
    const row = debateRow(summary());
    assert.equal(row.label, 'orders schema');
    assert.equal(row.description, 'agent-a, agent-b · 2 rounds · best 0.65 · open');
    assert.equal(row.icon, 'comment-discussion');
    assert.ok(!row.needsYou);
    assert.equal(row.contextValue, 'negotiation+debate+open');
  });

  it('shows why a debate stopped, and marks one paused on a person as needing you', () => {
    assert.equal(
      debateRow(summary({ state: 'decided', stopReason: 'threshold_met', rounds: 1, bestScore: null })).description,
      'agent-a, agent-b · 1 round · no score · decided (threshold_met)',
    );
    const paused = debateRow(summary({ state: 'paused', stopReason: 'max_rounds', pendingInvocationId: 'inv-1' }));
    assert.ok(paused.needsYou);
    assert.match(paused.description, /needs you$/);
    assert.equal(paused.icon, 'person');
    assert.match(paused.tooltip, /approve, modify or deny/);
  });

  it('shows a room artifact: type · producer · revision · votes n/m · state or outcome; escalated ones need you', () => {
    assert.equal(roomRow(artifact()).description, 'CODE · producer-a · rev 2 · votes 1/2 · voting');
    assert.equal(
      roomRow(artifact({ state: 'decided', outcome: 'APPROVED', votes: 2 })).description,
      'CODE · producer-a · rev 2 · votes 2/2 · APPROVED',
    );
    const escalated = roomRow(
      artifact({ state: 'escalated', outcome: 'ESCALATED_TO_HITL', invocationId: 'inv-2', votes: 2 }),
    );
    assert.ok(escalated.needsYou);
    assert.equal(escalated.description, 'CODE · producer-a · rev 2 · votes 2/2 · needs you');
    assert.match(escalated.tooltip, /request a revision or reject/);
  });

  it('counts the rows and those waiting for a person in the group headers', () => {
    const debates = [summary(), summary({ id: 'neg-2', state: 'paused', pendingInvocationId: 'i' })];
    const rooms = [
      artifact(),
      artifact({ artifactId: 'b', state: 'escalated', invocationId: 'j' }),
      artifact({ artifactId: 'c', state: 'escalated', invocationId: 'k' }),
    ];
    assert.equal(groupDescription('debates', debates, rooms), '2 (1 needs you)');
    assert.equal(groupDescription('rooms', debates, rooms), '3 (2 need you)');
    assert.equal(groupDescription('rooms', debates, []), '0');
  });

  it('keeps agent text as it is in labels and plain-text tooltips (never Markdown or HTML)', () => {
    const row = debateRow(summary({ topic: MARKUP }));
    assert.equal(row.label, MARKUP);
    assert.ok(row.tooltip.includes(`topic: ${MARKUP}`));
    assert.equal(negotiationPanelTitle('debate', 'neg-1', 'x'.repeat(100)).length, 60);
    assert.equal(negotiationPanelTitle('room', 'api-v2'), 'Room: api-v2');
    assert.match(decidedMessage('room', 'approve'), /APPROVED/);
    assert.match(decidedMessage('room', 'deny'), /closed/);
  });
});

describe('negotiation panel wire shapes', () => {
  const payload = (text: string) => ({
    contentType: 'application/json',
    bytes: text.length,
    text,
    binary: false,
    truncated: false,
  });

  it('carries a debate with its policy flattened, rounds, pending invocation and decision', () => {
    const detail: NegotiationDetailView = {
      negotiation: {
        id: 'neg-1',
        correlationId: 'neg-1',
        topic: 't',
        participants: ['a', 'b'],
        intensity: 'HIGH',
        openedBy: 'a',
        openedAt: 1,
        deadlineAt: 2,
        effective: {
          policy: {
            maxRounds: 5,
            scoreThreshold: 0.8,
            diffTolerance: 0.1,
            roundTimeoutMs: 1000,
            tokenBudgetPerRound: 100,
            totalTokenBudget: 1000,
            oscillationLimit: 2,
            hitl: 'None',
            scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0.3 },
          },
          applied: {},
          profile: 'HIGH',
          policyVersion: '7',
          debateTimeoutMs: 60_000,
        } as unknown as NegotiationDetailView['negotiation']['effective'],
        schema: '',
        state: 'paused',
        rounds: 1,
        tokensUsed: 3,
        oscillations: 0,
        roundStartedAt: 1,
        pending: { invocationId: 'inv-1', why: 'deadlock', stopReason: 'max_rounds' },
        decision: null,
        abort: null,
        updatedAt: 2,
      },
      // Asserted, so that the record also fits the debate area's fuller RoundRecord (llm, llmNotes, DeltaSummary's pathCount and method).
      rounds: [
        {
          negotiationId: 'neg-1',
          n: 1,
          kind: 'propose',
          from: 'a',
          contentType: 'application/json',
          payload: payload('{"x":1}'),
          tokens: 2,
          at: 1,
          delta: { magnitude: 1, changedPaths: [], pathCount: 0, method: 'none' },
          evaluations: [{ from: 'b', score: 0.5, llmConfidence: null, notes: MARKUP, source: 'evaluate', at: 2 }],
          deterministicScore: 0.5,
          llmConfidence: null,
          score: 0.5,
          oscillation: false,
          llm: 'none',
          llmNotes: '',
        } as NegotiationDetailView['rounds'][number],
      ],
    };
    const wire = debateJson(detail);
    assert.ok(isDebateJson(JSON.parse(JSON.stringify(wire))));
    assert.equal(wire.policy['scoring.llmWeight'], 0.3);
    assert.equal(wire.policy.maxRounds, 5);
    assert.equal(wire.profile, 'HIGH');
    assert.equal(wire.policyVersion, '7');
    assert.deepEqual(wire.pending, { invocationId: 'inv-1', why: 'deadlock', stopReason: 'max_rounds' });
    assert.equal(wire.rounds[0]!.evaluations[0]!.notes, MARKUP);
  });

  it('carries a room artifact with the previous revision, votes (agent text literal), aggregate, thresholds and checks', () => {
    const proposal = {
      roomId: 'room-1',
      artifactId: 'api-v2',
      revision: 2,
      artifactType: 'CODE' as const,
      producerId: 'p',
      contentType: 'application/json',
      artifact: payload('{"v":2}'),
      requestedCritics: ['c1', 'c2'],
      createdAt: 1,
      submittedAt: 1,
      voteDeadlineAt: 2,
      policyVersion: '3',
      state: 'escalated' as const,
      closed: false,
      invocationId: 'inv-2',
      updatedAt: 2,
    };
    const vote = {
      roomId: 'room-1',
      artifactId: 'api-v2',
      revision: 2,
      criticId: 'c1',
      score: 8,
      confidence: 0.2,
      passed: true,
      strengths: [MARKUP],
      weaknesses: [],
      recommendations: [],
      votedAt: 1,
      replaced: 0,
    };
    const aggregate = { mean: 8, minScore: 8, maxScore: 8, stdDev: 0, weightedMean: 8, voteCount: 1 };
    const detail: RoomArtifactDetailView = {
      proposal,
      previous: { ...proposal, revision: 1, artifact: payload('{"v":1}'), state: 'decided', invocationId: null },
      votes: [vote],
      aggregate,
      thresholds: {
        minScoreThreshold: 7,
        minConfidenceThreshold: 0.7,
        minPassRatio: 0.8,
        maxStdDev: 2,
        escalateBelowConfidence: 0.5,
        escalateAboveStdDev: 3,
        voteTimeoutMs: 1,
        autoApprove: true,
      },
      // Asserted, so that the record also fits the room area's fuller RoomDecision (closed, hitl).
      decision: {
        roomId: 'room-1',
        artifactId: 'api-v2',
        revision: 2,
        outcome: 'ESCALATED_TO_HITL',
        votes: [vote],
        aggregate,
        checks: [{ name: 'min_confidence_threshold', value: 0.2, threshold: 0.7, pass: false }],
        escalation: ['low confidence'],
        policyVersion: '3',
        reason: 'r',
        decidedBy: 'policy',
        final: false,
        decidedAt: 2,
        closed: false,
        hitl: null,
      } as NonNullable<RoomArtifactDetailView['decision']>,
    };
    const wire = roomJson(detail);
    assert.ok(isRoomJson(JSON.parse(JSON.stringify(wire))));
    assert.equal(wire.previous?.text, '{"v":1}');
    assert.equal(wire.votes[0]!.strengths[0], MARKUP);
    assert.deepEqual(wire.thresholds, {
      minScoreThreshold: 7,
      minConfidenceThreshold: 0.7,
      minPassRatio: 0.8,
      maxStdDev: 2,
    });
    assert.deepEqual(wire.decision?.checks, [
      { name: 'min_confidence_threshold', value: 0.2, threshold: 0.7, pass: false },
    ]);
    assert.equal(wire.invocationId, 'inv-2');
  });
});
