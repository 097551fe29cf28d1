import type { Speaker } from '../policy/model';
import { mayActAs, speakerName } from './access';
import type { HandoffRecord, HandoffRepository } from './model';
import { PENDING_ANSWER_BYTES } from './options';
import { denied, identifier, LIMITS } from './refusals';
import { transferRefusal, type HandoffMemory } from './state';

/** What a listed handoff costs besides its context, reason and capabilities (ids, budget, policy, framing), estimated. */
const PENDING_RECORD_OVERHEAD = 2048;

export interface QueryDeps {
  readonly handoffs: Pick<HandoffRepository, 'get' | 'listRecent' | 'transferred'>;
  readonly memory: HandoffMemory;
  /** timeouts.ts: a time that ran out is decided first. */
  readonly catchUp: (requestId: string) => void;
}

/** The reads: the editor's lists, GetPendingHandoffs, and the router's transferred-work refusal. */
export class HandoffReads {
  constructor(private readonly deps: QueryDeps) {}

  recent(limit: number): HandoffRecord[] {
    return this.deps.handoffs.listRecent(limit);
  }

  get(requestId: string): HandoffRecord | undefined {
    return this.deps.handoffs.get(requestId);
  }

  /**
   * TransferredWork: the router asks this of every message an agent sends. A map lookup (nothing at all while none
   * completed); only once more transfers were completed than memory keeps does a miss ask the store (an indexed lookup).
   */
  refusalFor(producerId: string, correlationId: string): string | undefined {
    const { memory } = this.deps;
    if (memory.transfersHeld === 0 && !memory.beyondMemory) return undefined;
    const entry = memory.transfer(producerId, correlationId);
    if (entry) return transferRefusal(entry);
    if (!memory.beyondMemory) return undefined;
    const stored = this.deps.handoffs.transferred(producerId, correlationId);
    return stored && transferRefusal(stored);
  }

  /**
   * GetPendingHandoffs: the PENDING handoffs whose current target is `agentId` (context included), by priority (-19
   * first) then age, as many as fit `maxBytes` (at least one); `more`: how many were left out (the agent answers these
   * and asks again). Only the agent itself (or the operator) may ask. A time that ran out is decided first.
   */
  pending(
    agentId: string,
    speaker: Speaker,
    maxBytes = PENDING_ANSWER_BYTES,
  ): { readonly records: HandoffRecord[]; readonly more: number } {
    identifier('agent_id', agentId, LIMITS.agent_id, true);
    if (!mayActAs(speaker, agentId))
      throw denied(`${speakerName(speaker)} may not read the pending handoffs of '${agentId}'`);
    const { memory } = this.deps;
    for (const r of memory.waitingList(agentId)) this.deps.catchUp(r.requestId);
    const mine = memory.pendingFor(agentId);
    const records: HandoffRecord[] = [];
    let bytes = 0;
    for (const r of mine) {
      const cost =
        r.contextBytes +
        Buffer.byteLength(r.reason) +
        r.capabilitiesRequired.reduce((n, c) => n + c.length, 0) +
        PENDING_RECORD_OVERHEAD;
      if (records.length > 0 && bytes + cost > maxBytes) break;
      const full = this.deps.handoffs.get(r.requestId);
      if (!full) continue;
      records.push(full);
      bytes += cost;
    }
    return { records, more: mine.length - records.length };
  }
}
