import { strict as assert } from 'node:assert';
import { DEFAULT_ROOM_THRESHOLDS } from '../../src/core/policy/defaults';
import { aggregate, escalationReasons, thresholdChecks, verdict, type ScoredVote } from '../../src/core/room/aggregate';

const T = DEFAULT_ROOM_THRESHOLDS;

function vote(
  criticId: string,
  score: number,
  confidence: number,
  passed = true,
  recommendations: string[] = [],
): ScoredVote {
  return { criticId, score, confidence, passed, recommendations };
}

function close(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} ≠ ${expected}`);
}

describe('room aggregation (RFC §17.5 AggregatedScore)', () => {
  it('scores 8/6/9 with confidences 0.9/0.5/0.8: worked by hand', () => {
    // mean = (8 + 6 + 9) / 3 = 23 / 3 = 7.6667
    // weighted mean = (8·0.9 + 6·0.5 + 9·0.8) / (0.9 + 0.5 + 0.8) = (7.2 + 3 + 7.2) / 2.2 = 17.4 / 2.2 = 7.9091
    // population std dev = √(((8 − 7.6667)² + (6 − 7.6667)² + (9 − 7.6667)²) / 3) = √((0.1111 + 2.7778 + 1.7778) / 3)
    //                    = √(4.6667 / 3) = √1.5556 = 1.2472
    const a = aggregate([vote('a', 8, 0.9), vote('b', 6, 0.5), vote('c', 9, 0.8)]);
    close(a.mean, 23 / 3, 'mean');
    close(a.weightedMean, 17.4 / 2.2, 'weighted mean');
    assert.equal(a.weightedMean.toFixed(4), '7.9091');
    close(a.stdDev, Math.sqrt(14 / 9), 'std dev');
    assert.equal(a.stdDev.toFixed(4), '1.2472');
    assert.equal(a.minScore, 6);
    assert.equal(a.maxScore, 9);
    assert.equal(a.voteCount, 3);
  });

  it('scores 10 and 2 with confidences 1.0 and 0.25: the confident vote weighs four times as much', () => {
    // weighted mean = (10·1 + 2·0.25) / 1.25 = 10.5 / 1.25 = 8.4; mean = 6; std dev = √((16 + 16) / 2) = 4
    const a = aggregate([vote('a', 10, 1), vote('b', 2, 0.25)]);
    close(a.weightedMean, 8.4, 'weighted mean');
    close(a.mean, 6, 'mean');
    close(a.stdDev, 4, 'std dev');
  });

  it('every confidence 0: the weighted mean is the plain mean', () => {
    const a = aggregate([vote('a', 4, 0), vote('b', 8, 0)]);
    assert.equal(a.weightedMean, 6);
    assert.equal(a.mean, 6);
  });

  it('no votes: all zero, every check fails', () => {
    const a = aggregate([]);
    assert.deepEqual(a, { mean: 0, minScore: 0, maxScore: 0, stdDev: 0, weightedMean: 0, voteCount: 0 });
    assert.ok(thresholdChecks([], a, T).every((c) => !c.pass));
  });

  it('a threshold met up to rounding still passes (7, 7, 7 weighted by 0.1, 0.2, 0.3)', () => {
    const votes = [vote('a', 7, 0.1), vote('b', 7, 0.2), vote('c', 7, 0.3)];
    const checks = thresholdChecks(votes, aggregate(votes), { ...T, minConfidenceThreshold: 0 });
    assert.equal(checks.find((c) => c.name === 'min_score_threshold')?.pass, true);
  });

  it('the four auto-approval checks report value, threshold and pass', () => {
    // weighted mean 7.9091 ≥ 7; mean confidence 2.2/3 = 0.7333 ≥ 0.7; pass ratio 2/3 = 0.6667 < 0.8; std dev 1.2472 ≤ 2
    const votes = [vote('a', 8, 0.9), vote('b', 6, 0.5, false), vote('c', 9, 0.8)];
    const checks = thresholdChecks(votes, aggregate(votes), T);
    assert.deepEqual(
      checks.map((c) => [c.name, c.pass]),
      [
        ['min_score_threshold', true],
        ['min_confidence_threshold', true],
        ['min_pass_ratio', false],
        ['max_std_dev', true],
      ],
    );
    close(checks[1].value, 2.2 / 3, 'mean confidence');
    close(checks[2].value, 2 / 3, 'pass ratio');
  });

  it('escalation: each condition names itself', () => {
    const agg = (v: ScoredVote[]) => aggregate(v);
    const low = [vote('a', 8, 0.29), vote('b', 8, 0.9)];
    assert.match(escalationReasons(low, agg(low), T, [])[0], /^low_confidence: a voted with confidence 0\.29/);
    const split = [vote('a', 10, 0.9), vote('b', 2, 0.9)]; // std dev 4 > 3
    assert.match(escalationReasons(split, agg(split), T, [])[0], /^disagreement: .* 4 is above 3/);
    const asks = [
      vote('a', 8, 0.9, true, ['Add tests', 'ESCALATE: needs a security review']),
      vote('b', 8, 0.9, true, ['escalated already? no']),
    ];
    assert.deepEqual(escalationReasons(asks, agg(asks), T, []), ['critic_requested: a recommended escalation']);
    const fine = [vote('a', 8, 0.9), vote('b', 8, 0.9)];
    assert.deepEqual(escalationReasons(fine, agg(fine), T, []), []);
    assert.match(escalationReasons(fine, agg(fine), T, ['c'])[0], /^vote_timeout: .* from c/);
  });

  it('critic_requested: a recommendation containing the word "escalate" anywhere, any case; not "escalated" nor "de-escalate"', () => {
    const asking = (text: string) => {
      const votes = [vote('a', 8, 0.9, true, [text])];
      return escalationReasons(votes, aggregate(votes), T, []).length === 1;
    };
    for (const text of [
      'Please escalate to a human',
      'ESCALATE',
      'escalate.',
      'We should (escalate) this',
      'Escalate: budget',
    ])
      assert.ok(asking(text), text);
    for (const text of [
      'escalated already',
      'de-escalate the tone',
      'escalates quickly',
      'no escalation needed',
      'deescalate',
    ])
      assert.ok(!asking(text), text);
  });

  it('verdict: escalation first, then approval when all four hold, else revision', () => {
    const good = [vote('a', 8, 0.9), vote('b', 8, 0.8)];
    assert.equal(verdict(good, T, []).outcome, 'APPROVED');
    // A good aggregate with a low-confidence vote: escalated, not approved.
    assert.equal(verdict([...good, vote('c', 8, 0.2)], T, []).outcome, 'ESCALATED_TO_HITL');
    assert.equal(verdict([vote('a', 5, 0.9), vote('b', 6, 0.9)], T, []).outcome, 'REVISION_REQUESTED');
    // auto-approval off: only a person can approve.
    const off = verdict(good, { ...T, autoApprove: false }, []);
    assert.equal(off.outcome, 'ESCALATED_TO_HITL');
    assert.match(off.escalation[0], /^approval_required/);
  });
});
