/** What the negotiation, room and handoff sections show of agents' payloads. */

/** The most bytes of one payload (a round's proposal, an artifact, a decision's result) shown as text. */
export const MAX_NEGOTIATION_PAYLOAD_SHOWN = 64 * 1024;

/**
 * A payload agents sent, for the editor: UTF-8 text (the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes), or nothing
 * but its size when the bytes are not UTF-8 (`binary`). Agent data: the views show it as text only.
 */
export interface PayloadText {
  readonly contentType: string;
  readonly bytes: number;
  readonly text: string;
  readonly binary: boolean;
  /** Only the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes are in `text`. */
  readonly truncated: boolean;
}
