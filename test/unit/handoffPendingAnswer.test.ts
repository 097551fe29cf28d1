import { strict as assert } from 'node:assert';
import type { HandoffRecord } from '../../src/core/handoff/model';
import {
  PENDING_MORE_TRAILER,
  PENDING_TRAILER,
  PENDING_TRAILER_BYTES,
  pendingAnswer,
} from '../../src/server/services/handoffService';

const NOW = Date.UTC(2026, 0, 1);

function record(i: number): HandoffRecord {
  return {
    requestId: `req-${i}-ü`,
    fromAgent: 'a',
    requestedTo: 'b',
    toAgent: 'b',
    reason: 'r',
    context: Buffer.from('{}'),
    contextBytes: 2,
    contextContentType: 'application/json',
    capabilitiesRequired: [],
    priority: 0,
    timeoutMs: 60_000,
    budget: null,
    delegationPolicy: null,
    taskId: '',
    correlationId: `c${i}-${'x'.repeat(250)}`,
    parentRequestId: '',
    carryWorktree: false,
    worktree: null,
    requestDigest: '',
    state: 'PENDING',
    awaitingOperator: false,
    attempts: [],
    acceptedBy: '',
    rejectionReason: '',
    rejectionCode: '',
    endReason: '',
    completedBy: '',
    expiresAt: NOW + 60_000,
    requestedAt: NOW,
    updatedAt: NOW,
    endedAt: null,
  };
}

describe("GetPendingHandoffs' answer and trailers (handoffService.pendingAnswer)", () => {
  it('the JSON trailer stays within its bytes: records whose entry would not fit are left out and counted in `more`; printable ASCII', () => {
    const records = Array.from({ length: 40 }, (_, i) => record(i));
    const { response, trailer } = pendingAnswer({ records, more: 3 }, NOW, (r) => r.expiresAt);
    const [json] = trailer.get(PENDING_TRAILER) as string[];
    assert.ok(json.length <= PENDING_TRAILER_BYTES, `${json.length} bytes`);
    assert.match(json, /^[\x20-\x7e]+$/);
    const parsed = JSON.parse(json) as { more: number; handoffs: Record<string, { correlation_id: string }> };
    const answered = (response.pending_requests as Array<{ request_id: string }>).map((p) => p.request_id);
    assert.ok(answered.length > 0 && answered.length < 40);
    assert.deepEqual(Object.keys(parsed.handoffs), answered, 'one entry per answered request, by request_id');
    assert.equal(parsed.handoffs['req-0-ü'].correlation_id, records[0].correlationId);
    assert.equal(parsed.more, 3 + 40 - answered.length);
    assert.deepEqual(trailer.get(PENDING_MORE_TRAILER), [String(parsed.more)]);
  });

  it('nothing pending: an empty answer, more 0', () => {
    const { response, trailer } = pendingAnswer({ records: [], more: 0 }, NOW, () => null);
    assert.deepEqual(response, { pending_requests: [] });
    assert.deepEqual(JSON.parse(String(trailer.get(PENDING_TRAILER)[0])), { more: 0, handoffs: {} });
  });
});
