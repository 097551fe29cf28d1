// The negotiation panel's pure parts (webview/negotiation/*.ts without the DOM, the page skeleton): diff choice,
// thresholds, texts, the message protocol.
import { strict as assert } from 'node:assert';
import {
  MAX_RATIONALE_LENGTH,
  parseHostMessage,
  parsePanelState,
  parseWebviewMessage,
  type DebateJson,
  type PayloadJson,
  type RoomJson,
} from '../../webview/negotiation/protocol';
import {
  aggregateRows,
  bestRound,
  debateActionLabels,
  debateDecidable,
  decisionText,
  isJsonContentType,
  policyRows,
  prettyText,
  proposalDiff,
  rationaleMissing,
  roomDecidable,
  roomHeadline,
  stopText,
  thresholdRows,
  voteHeadline,
  type JsonDiffer,
} from '../../webview/negotiation/viewModel';
import { negotiationPanelHtml } from '../../src/extension/panels/negotiationPanelHtml';

/** jsondiffpatch is an ES module; this CommonJS test loads it the way Node allows. */
async function differ(): Promise<JsonDiffer> {
  const { create } = await import('jsondiffpatch');
  const instance = create({ arrays: { detectMove: true, includeValueOnMove: false } });
  return (a, b) => instance.diff(a, b);
}

const MARKUP = '<img src=x onerror="window.__pwned=1">';

function payload(text: string, contentType = 'application/json', binary = false): PayloadJson {
  return { contentType, bytes: Buffer.byteLength(text), text, binary, truncated: false };
}

function room(overrides: Partial<RoomJson> = {}): RoomJson {
  return {
    artifactId: 'api-v2',
    roomId: 'room-1',
    revision: 1,
    artifactType: 'CODE',
    producerId: 'producer-a',
    state: 'escalated',
    closed: false,
    invocationId: 'inv-9',
    requestedCritics: ['critic-a', 'critic-b'],
    submittedAt: 0,
    voteDeadlineAt: 60_000,
    policyVersion: '3',
    artifact: payload('{"a":1}'),
    previous: null,
    votes: [
      {
        criticId: 'critic-a',
        score: 8,
        confidence: 0.9,
        passed: true,
        strengths: [MARKUP],
        weaknesses: [],
        recommendations: ['add tests'],
        votedAt: 1,
        replaced: 0,
      },
      {
        criticId: 'critic-b',
        score: 7.5,
        confidence: 0.2,
        passed: true,
        strengths: [],
        weaknesses: ['unsure'],
        recommendations: [],
        votedAt: 2,
        replaced: 1,
      },
    ],
    aggregate: { mean: 7.75, weightedMean: 7.909, minScore: 7.5, maxScore: 8, stdDev: 0.25, voteCount: 2 },
    thresholds: { minScoreThreshold: 7, minConfidenceThreshold: 0.7, minPassRatio: 0.8, maxStdDev: 2 },
    decision: {
      outcome: 'ESCALATED_TO_HITL',
      reason: 'confidence below threshold',
      decidedBy: 'policy',
      final: false,
      decidedAt: 3,
      policyVersion: '3',
      escalation: ['min confidence 0.20 < 0.70'],
      checks: [
        { name: 'min_score_threshold', value: 7.909, threshold: 7, pass: true },
        { name: 'min_confidence_threshold', value: 0.55, threshold: 0.7, pass: false },
        { name: 'min_pass_ratio', value: 1, threshold: 0.8, pass: true },
        { name: 'max_std_dev', value: 0.25, threshold: 2, pass: true },
      ],
    },
    ...overrides,
  };
}

function debate(overrides: Partial<DebateJson> = {}): DebateJson {
  const round = (n: number, text: string, score: number | null) => ({
    n,
    kind: n === 1 ? 'propose' : 'counter',
    from: n % 2 ? 'agent-a' : 'agent-b',
    at: n * 1000,
    tokens: 5,
    magnitude: 0.5,
    changedPaths: ['/a'],
    evaluations:
      score === null
        ? []
        : [{ from: 'agent-b', score, llmConfidence: null, notes: MARKUP, source: 'evaluate', at: n * 1000 + 1 }],
    deterministicScore: score,
    llmConfidence: null,
    score,
    oscillation: false,
    payload: payload(text),
  });
  return {
    id: 'neg-1',
    topic: 'schema for orders',
    participants: ['agent-a', 'agent-b'],
    intensity: 'MEDIUM',
    state: 'paused',
    openedBy: 'agent-a',
    openedAt: 0,
    deadlineAt: 600_000,
    profile: 'MEDIUM',
    policyVersion: '4',
    policy: { maxRounds: 5, scoreThreshold: 0.8, 'scoring.llmWeight': 0 },
    tokensUsed: 10,
    oscillations: 0,
    rounds: [round(1, '{"a":1}', 0.4), round(2, '{"a":2}', 0.7), round(3, '{"a":3}', null)],
    pending: { invocationId: 'inv-3', why: 'deadlock', stopReason: 'max_rounds' },
    decision: null,
    abort: null,
    ...overrides,
  };
}

describe('negotiation panel: proposals as diffs (JSON structural or line diff, by content type)', () => {
  it('recognises JSON content types, with parameters and +json suffixes', () => {
    assert.ok(isJsonContentType('application/json'));
    assert.ok(isJsonContentType('application/json; charset=utf-8'));
    assert.ok(isJsonContentType('application/vnd.sw4rm.plan+json'));
    assert.ok(!isJsonContentType('text/plain'));
    assert.ok(!isJsonContentType('text/x-diff'));
  });

  it('diffs two JSON proposals structurally (paths and values), not by lines', async () => {
    const diff = proposalDiff(payload('{"a":1,"b":[1,2]}'), payload('{"a":2,"b":[1,2],"c":"new"}'), await differ());
    assert.equal(diff.kind, 'json');
    assert.deepEqual(diff.kind === 'json' && diff.changes.map((c) => [c.kind, c.path]), [
      ['changed', '$.a'],
      ['added', '$.c'],
    ]);
  });

  it('diffs text proposals line by line, and JSON that does not parse too', async () => {
    const text = proposalDiff(
      payload('one\ntwo\n', 'text/plain'),
      payload('one\nthree\n', 'text/plain'),
      await differ(),
    );
    assert.equal(text.kind, 'text');
    assert.deepEqual(
      text.kind === 'text' && text.lines.filter((l) => l.kind === 'add' || l.kind === 'del').map((l) => l.text),
      ['-two', '+three'],
    );
    const broken = proposalDiff(payload('{"a":1}'), payload('{"a":'), await differ());
    assert.equal(broken.kind, 'text');
  });

  it('shows the first version whole (JSON pretty-printed), says identical versions and binary content as such', async () => {
    assert.deepEqual(proposalDiff(null, payload('{"a":1}'), await differ()), {
      kind: 'initial',
      text: '{\n  "a": 1\n}',
    });
    assert.deepEqual(proposalDiff(payload('{"a":1}'), payload('{ "a": 1 }'), await differ()), { kind: 'same' });
    const binary = proposalDiff(
      payload('x'),
      { ...payload('', 'application/octet-stream', true), bytes: 12 },
      await differ(),
    );
    assert.equal(binary.kind, 'binary');
    assert.match(binary.kind === 'binary' ? binary.note : '', /Binary content \(12 bytes/);
    assert.equal(prettyText(payload('not json')), 'not json');
  });

  it('keeps markup in a proposal as the text it is', async () => {
    const diff = proposalDiff(payload(`a\n`, 'text/html'), payload(`${MARKUP}\n`, 'text/html'), await differ());
    assert.ok(diff.kind === 'text' && diff.lines.some((l) => l.text === `+${MARKUP}`));
  });
});

describe('negotiation panel: a room', () => {
  it('marks each of the four thresholds pass or fail as the decision checked it, in words', () => {
    assert.deepEqual(
      thresholdRows(room()).map((r) => [r.label, r.text, r.pass, r.mark]),
      [
        ['Minimum score', '7.91 ≥ 7', true, 'pass'],
        ['Minimum confidence', '0.55 ≥ 0.7', false, 'fail'],
        ['Minimum pass ratio', '1 ≥ 0.8', true, 'pass'],
        ['Maximum standard deviation', '0.25 ≤ 2', true, 'pass'],
      ],
    );
  });

  it('lists the thresholds unchecked while the critics are still voting', () => {
    const rows = thresholdRows(room({ state: 'voting', decision: null, invocationId: null }));
    assert.deepEqual(
      rows.map((r) => [r.text, r.pass, r.mark]),
      [
        ['≥ 7', null, 'not checked yet'],
        ['≥ 0.7', null, 'not checked yet'],
        ['≥ 0.8', null, 'not checked yet'],
        ['≤ 2', null, 'not checked yet'],
      ],
    );
  });

  it('shows the aggregate (mean, weighted mean, min, max, std dev, count) and each vote', () => {
    assert.deepEqual(
      aggregateRows(room()).map((r) => `${r.key}: ${r.text}`),
      [
        'Mean: 7.75',
        'Confidence-weighted mean: 7.91',
        'Minimum: 7.5',
        'Maximum: 8',
        'Standard deviation: 0.25',
        'Votes: 2 of 2 requested',
      ],
    );
    assert.equal(
      voteHeadline(room().votes[1]!),
      'score 7.5 / 10 · confidence 0.20 · passed · re-voted (1 earlier vote replaced)',
    );
  });

  it('offers a decision only while escalated on an invocation', () => {
    assert.ok(roomDecidable(room()));
    assert.ok(!roomDecidable(room({ state: 'decided', invocationId: 'inv-9' })));
    assert.ok(!roomDecidable(room({ invocationId: null })));
    assert.equal(
      roomHeadline(room()),
      'CODE artifact api-v2, revision 1, by producer-a: escalated: waiting for a person to decide',
    );
    assert.match(
      roomHeadline(
        room({
          state: 'decided',
          closed: true,
          decision: { ...room().decision!, outcome: 'REVISION_REQUESTED', final: true },
        }),
      ),
      /REVISION_REQUESTED \(rejected/,
    );
  });
});

describe('negotiation panel: a debate', () => {
  it('says why it stopped or what it waits for, and the decision', () => {
    assert.equal(
      stopText(debate()),
      'Paused: deadlocked (the maximum number of rounds was reached). Waiting for a decision.',
    );
    assert.equal(stopText(debate({ state: 'open', pending: null })), 'Open: round 4 may be proposed.');
    assert.equal(
      stopText(
        debate({
          state: 'aborted',
          pending: null,
          abort: { reason: 'no agreement', errorCode: '', by: 'agent-b', at: 9 },
        }),
      ),
      'Aborted by agent-b: no agreement.',
    );
    const decided = debate({
      state: 'decided',
      pending: null,
      decision: {
        decidedBy: 'policy',
        round: 2,
        finalScore: 0.7,
        rationale: 'best',
        stopReason: 'oscillation',
        policyVersion: '4',
        fallback: null,
        at: 9,
        result: payload('{"a":2}'),
      },
    });
    assert.equal(stopText(decided), 'Stopped because the proposals oscillated (A → B → A) too often.');
    assert.equal(decisionText(decided), 'Decided by policy: round 2 (score 0.7), policy version 4.');
    assert.equal(decisionText(debate()), undefined);
  });

  it('finds the best-scored round, lists the effective policy with profile and version, offers a decision only while paused', () => {
    assert.equal(bestRound(debate()), 2);
    assert.deepEqual(policyRows(debate()).slice(0, 3), [
      { key: 'Profile', text: 'MEDIUM (intensity MEDIUM)' },
      { key: 'Policy version', text: '4' },
      { key: 'maxRounds', text: '5' },
    ]);
    assert.ok(debateDecidable(debate()));
    assert.ok(!debateDecidable(debate({ state: 'open', pending: null })));
  });

  it('names what Approve does by why the debate paused', () => {
    assert.equal(debateActionLabels(debate()).approve, 'Approve (accept the best round)');
    assert.equal(
      debateActionLabels(debate({ pending: { invocationId: 'i', why: 'pause_between_rounds', stopReason: 'hitl' } }))
        .approve,
      'Approve (next round)',
    );
    assert.equal(
      debateActionLabels(debate({ pending: { invocationId: 'i', why: 'final_accept', stopReason: 'threshold_met' } }))
        .approve,
      'Approve (accept this round)',
    );
    assert.deepEqual(
      [debateActionLabels(debate()).modify, debateActionLabels(debate()).deny],
      ['Modify…', 'Deny (abort)'],
    );
  });
});

describe('negotiation panel: the protocol and the page', () => {
  it('accepts exactly the known messages from the webview; a rationale over the limit is refused', () => {
    assert.deepEqual(parseWebviewMessage({ type: 'ready' }), { type: 'ready' });
    assert.deepEqual(parseWebviewMessage({ type: 'decide', requestId: 1, action: 'approve', rationale: 'ok' }), {
      type: 'decide',
      requestId: 1,
      action: 'approve',
      rationale: 'ok',
    });
    assert.deepEqual(
      parseWebviewMessage({ type: 'decide', requestId: 2, action: 'modify', rationale: 'r', payload: { a: 1 } }),
      { type: 'decide', requestId: 2, action: 'modify', rationale: 'r', payload: { a: 1 } },
    );
    assert.equal(parseWebviewMessage({ type: 'decide', requestId: 1, action: 'defer', rationale: 'r' }), undefined);
    assert.equal(parseWebviewMessage({ type: 'decide', requestId: -1, action: 'approve', rationale: 'r' }), undefined);
    assert.equal(
      parseWebviewMessage({
        type: 'decide',
        requestId: 1,
        action: 'approve',
        rationale: 'x'.repeat(MAX_RATIONALE_LENGTH + 1),
      }),
      undefined,
    );
    assert.equal(parseWebviewMessage({ type: 'eval', code: 'x' }), undefined);
  });

  it('checks what the extension sends; restores from the target alone', () => {
    const show = {
      type: 'show',
      target: { kind: 'room', id: 'api-v2' },
      debate: null,
      room: room(),
      operator: 'editor:alice',
    };
    assert.deepEqual(parseHostMessage(JSON.parse(JSON.stringify(show))), show);
    assert.ok(parseHostMessage({ ...show, debate: null, room: null, unavailable: 'stopped' }));
    assert.equal(parseHostMessage({ ...show, room: { ...room(), votes: [{ criticId: 1 }] } }), undefined);
    assert.ok(
      parseHostMessage({
        type: 'show',
        target: { kind: 'debate', id: 'neg-1' },
        debate: JSON.parse(JSON.stringify(debate())),
        room: null,
        operator: 'o',
      }),
    );
    assert.deepEqual(parsePanelState({ kind: 'debate', id: 'neg-1', extra: 1 }), { kind: 'debate', id: 'neg-1' });
    assert.equal(parsePanelState({ kind: 'other', id: 'x' }), undefined);
    assert.equal(parsePanelState({ kind: 'room', id: '' }), undefined);
  });

  it('requires a rationale that is not blank', () => {
    assert.ok(rationaleMissing(''));
    assert.ok(rationaleMissing(' \n\t'));
    assert.ok(!rationaleMissing('looks right'));
  });

  it('serves a fixed page: scripts by nonce only, no inline style or handler, the decision buttons disabled until a rationale is written', () => {
    const html = negotiationPanelHtml({
      cspSource: 'vscode-webview://x',
      scriptUri: 'vscode-webview://x/negotiation.js',
      styleUri: 'vscode-webview://x/negotiation.css',
      nonce: 'N0NCE',
    });
    const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1];
    assert.equal(
      csp,
      "default-src 'none'; script-src 'nonce-N0NCE'; style-src vscode-webview://x; img-src vscode-webview://x",
    );
    assert.doesNotMatch(html, /style=|\son[a-z]+=/i);
    assert.equal((html.match(/<script /g) ?? []).length, 1);
    assert.match(html, /<script nonce="N0NCE" src="vscode-webview:\/\/x\/negotiation.js"><\/script>/);
    for (const id of ['approve', 'modify', 'deny', 'send-modify'])
      assert.match(html, new RegExp(`id="${id}"[^>]* disabled`));
  });
});
