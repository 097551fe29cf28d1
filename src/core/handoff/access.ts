import type { Speaker } from '../policy/model';
import type { HandoffRecord } from './model';

/** Who may call what on a handoff, and who a caller is among its parties. */

export function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

/** Whether `speaker` may act as `agentId` (the operator and the coordinator may act as anyone). */
export function mayActAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || (agentId !== '' && speaker.mayActAs(agentId));
}

/**
 * Whether a refusal may tell `speaker` about `record` (its state, parties, target): the operator and the coordinator,
 * its origin, an agent it was offered to, the agent that accepted it. Others learn only that the call was refused.
 */
export function knows(record: HandoffRecord, speaker: Speaker): boolean {
  if (speaker.kind !== 'agent') return true;
  return [record.fromAgent, record.acceptedBy, ...record.attempts.map((a) => a.agentId)].some(
    (id) => id !== '' && !id.startsWith('operator:') && speaker.mayActAs(id),
  );
}

/** Which party of `record` the agent `speaker` is for CancelDelegation: its origin or the agent that accepted it (not an agent only offered it). */
export function cancellerOf(record: HandoffRecord, speaker: Speaker): string | undefined {
  if (speaker.kind !== 'agent') return undefined;
  return [record.fromAgent, record.acceptedBy].find(
    (id) => id !== '' && !id.startsWith('operator:') && speaker.mayActAs(id),
  );
}

/** Who `speaker` is among the parties for CompleteHandoff (the accepting agent first), `operator:<label>` for the operator, or undefined. */
export function partyOf(record: HandoffRecord, speaker: Speaker): string | undefined {
  if (speaker.kind === 'operator') return `operator:${speaker.label}`;
  if (speaker.kind === 'coordinator') return 'coordinator';
  if (record.acceptedBy !== '' && !record.acceptedBy.startsWith('operator:') && speaker.mayActAs(record.acceptedBy))
    return record.acceptedBy;
  if (speaker.mayActAs(record.fromAgent)) return record.fromAgent;
  return undefined;
}
