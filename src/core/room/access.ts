import type { Speaker } from '../policy/model';
import type { ProposalRecord } from './model';

/** Who may do what in a room: act as a producer or a critic, read a revision's votes, decide an escalation. */

/** Whether the speaker may act as `agentId` (the operator and the coordinator may act as anyone). */
export function mayActAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || speaker.mayActAs(agentId);
}

/** The speaker as events and refusals name it. */
export function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

/**
 * Why `reader` may not read the revision's votes, undefined when it may: the producer and the operator may; a
 * requested critic once the revision is decided (not the others' votes before); nobody else.
 */
export function voteReadRefusal(proposal: ProposalRecord, reader: Speaker): string | undefined {
  if (reader.kind !== 'agent' || reader.mayActAs(proposal.producerId)) return undefined;
  const critic = proposal.requestedCritics.find((c) => reader.mayActAs(c));
  if (critic !== undefined) {
    return proposal.state === 'decided'
      ? undefined
      : `${speakerName(reader)} (critic '${critic}') may not read the other critics' votes on revision ${proposal.revision} of artifact '${proposal.artifactId}' before the revision is decided`;
  }
  return `only the producer, the operator and (once the revision is decided) the requested critics may read the votes of artifact '${proposal.artifactId}'; ${speakerName(reader)} is none of them`;
}

/** Why the speaker may not decide a room's escalation (only the operator may: a person, RFC §15), undefined when it may. */
export function hitlActionRefusal(speaker: Speaker): string | undefined {
  return speaker.kind === 'agent'
    ? `only the operator may decide a room's escalation (${speaker.label} is an agent)`
    : undefined;
}
