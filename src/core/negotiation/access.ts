import { FIELD_LIMITS } from '../fieldLimits';
import type { AgentPreferences, Speaker } from '../policy/model';
import { checkId, fail } from './checks';
import type { NegotiationRecord } from './model';

/**
 * Who may call what on a debate: a participant speaks only as itself (or an agent it may act as), the operator and the
 * coordinator as anyone; an agent opens only a debate it takes part in and states only its own preferences; Decide and
 * Abort are a participant's or the operator's; a HITL action is a person's.
 */

/** The name a speaker is recorded by: the coordinator, or the speaker's label. */
export function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

function actsAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || speaker.mayActAs(agentId);
}

/** `agentId` is a participant and the speaker may act as it. */
export function mustSpeakAs(rec: NegotiationRecord, agentId: string, speaker: Speaker): void {
  checkId('from_agent', agentId, FIELD_LIMITS.registry.agent_id);
  if (!rec.participants.includes(agentId)) {
    throw fail(
      'permission',
      'PERMISSION_DENIED',
      `${agentId} is not a participant of negotiation '${rec.id}' (${rec.participants.join(', ')})`,
    );
  }
  if (!actsAs(speaker, agentId))
    throw fail('permission', 'PERMISSION_DENIED', `${speakerName(speaker)} may not act as ${agentId}`);
}

/** Decide / Abort: the operator (undefined) or the participant the agent speaks as. */
export function participantOrOperator(rec: NegotiationRecord, speaker: Speaker, what: string): string | undefined {
  if (speaker.kind !== 'agent') return undefined;
  const participant = rec.participants.find((p) => speaker.mayActAs(p));
  if (participant === undefined)
    throw fail(
      'permission',
      'PERMISSION_DENIED',
      `only a participant of '${rec.id}' or the operator may ${what} it; ${speaker.label} is neither`,
    );
  return participant;
}

/**
 * Open: an agent opens only a debate it takes part in, and states preferences only of agents it may act as (the operator
 * any participant's). Answers the participant an agent opener acts as (the operator: undefined).
 */
export function openerOf(
  participants: readonly string[],
  preferences: Readonly<Record<string, Partial<AgentPreferences>>>,
  speaker: Speaker,
): string | undefined {
  if (speaker.kind === 'agent' && !participants.some((p) => speaker.mayActAs(p))) {
    throw fail(
      'permission',
      'PERMISSION_DENIED',
      `${speaker.label} may not open a negotiation it takes no part in: the opener is the operator or one of the participants`,
    );
  }
  for (const agent of Object.keys(preferences)) {
    const at = `preferences.${agent.slice(0, 64)}`;
    if (!participants.includes(agent))
      throw fail(
        'invalid',
        'VALIDATION_ERROR',
        `${at}: '${agent.slice(0, 64)}' is not a participant of this negotiation`,
      );
    if (speaker.kind === 'agent' && !speaker.mayActAs(agent))
      throw fail(
        'permission',
        'PERMISSION_DENIED',
        `${at}: ${speaker.label} may not state preferences for ${agent.slice(0, 64)}`,
      );
  }
  return speaker.kind === 'agent' ? participants.find((p) => speaker.mayActAs(p)) : undefined;
}

/** A participant decides by consensus only: the other ways are the coordinator's or the operator's (a person decides through HITL). */
export function checkDecider(participant: string | undefined, decidedBy: string): void {
  if (participant !== undefined && decidedBy !== 'consensus') {
    throw fail(
      'permission',
      'PERMISSION_DENIED',
      `decided_by '${decidedBy}' is the coordinator's or the operator's (a person decides through HITL); a participant decides by consensus only`,
    );
  }
}

/** A HITL action is a person's: the refusal for an agent, else undefined. */
export function hitlActionRefusal(speaker: Speaker): string | undefined {
  return speaker.kind === 'agent'
    ? "PERMISSION_DENIED: a HITL action is a person's: use the operator token (or the editor)"
    : undefined;
}
