import { MAX_NEGOTIATION_PAYLOAD_SHOWN, type PayloadText } from '../sections/payloadText';

/** Debates, room artifacts and handoffs the views ask for when no limit is given, and the most they may ask for. */
export const DEFAULT_LIST = 100;
export const MAX_LIST = 1_000;

/** A list's limit as the negotiation, room and handoff sections take it: DEFAULT_LIST when none, at most MAX_LIST. */
export function boundedLimit(limit: number): number {
  return Math.max(1, Math.min(Math.floor(limit) || DEFAULT_LIST, MAX_LIST));
}

export function withoutKey<T extends object, K extends keyof T>(value: T, key: K): Omit<T, K> {
  const copy = { ...value };
  delete copy[key];
  return copy;
}

/**
 * Payload bytes as text for the editor: the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes decoded as UTF-8 (a cut may
 * split the last character: decoded leniently then), or no text at all for bytes that are not UTF-8.
 */
export function payloadText(bytes: Uint8Array, contentType: string): PayloadText {
  const truncated = bytes.byteLength > MAX_NEGOTIATION_PAYLOAD_SHOWN;
  const shown = truncated ? bytes.subarray(0, MAX_NEGOTIATION_PAYLOAD_SHOWN) : bytes;
  try {
    return {
      contentType,
      bytes: bytes.byteLength,
      text: new TextDecoder('utf-8', { fatal: true }).decode(shown),
      binary: false,
      truncated,
    };
  } catch {
    if (truncated) {
      // Valid UTF-8 cut inside a character: only the last 1–3 bytes fail.
      try {
        const text = new TextDecoder('utf-8', { fatal: true }).decode(shown.subarray(0, lastCharBoundary(shown)));
        return { contentType, bytes: bytes.byteLength, text, binary: false, truncated };
      } catch {
        // binary below
      }
    }
    return { contentType, bytes: bytes.byteLength, text: '', binary: true, truncated: false };
  }
}

/** The length of `bytes` without a trailing incomplete UTF-8 sequence. */
function lastCharBoundary(bytes: Uint8Array): number {
  const end = bytes.byteLength;
  for (let back = 1; back <= 3 && end - back >= 0; back++) {
    const byte = bytes[end - back]!;
    if ((byte & 0xc0) !== 0x80) {
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
      return need > back ? end - back : end;
    }
  }
  return end;
}
