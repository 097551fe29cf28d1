/**
 * Rule 5 of the envelope (message-types.txt): a JSON payload is valid JSON, a text payload is UTF-8. One function
 * for both places it runs: on the event loop for small payloads (`checkEnvelope`), and on a worker thread for
 * large ones (payloadWorker.ts), so that no request holds the event loop while megabytes are validated.
 */
import { isUtf8 } from 'node:buffer';
import { printParseErrorCode, visit } from 'jsonc-parser';
import { KIB } from '../limits';
import { jsonBoundsRefusal } from '../json';

/** Payloads from this size (JSON or text) are validated off the event loop when a worker is available. */
export const OFFLOAD_MIN_BYTES = 256 * KIB;

/** Which content rule applies to a payload of this base content type. */
export type ContentKind = 'json' | 'text';

export function contentKind(base: string | undefined): ContentKind | undefined {
  if (!base) return undefined;
  if (base === 'application/json' || base.endsWith('+json')) return 'json';
  if (base.startsWith('text/')) return 'text';
  return undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Rule 5 for a JSON payload, answering the parsed value when it is valid (so that admission parses it once): the
 * same checks and refusals as `contentRefusal('json', payload, base)`.
 */
export function parseJsonContent(payload: Uint8Array, base: string): { refusal: string } | { value: unknown } {
  const tooDeep = jsonBoundsRefusal(payload, { what: 'the payload' });
  if (tooDeep !== undefined) return { refusal: tooDeep };
  let text: string;
  try {
    text = utf8.decode(payload);
  } catch {
    return { refusal: `the payload is not valid JSON for content_type ${base}: it is not UTF-8` };
  }
  return parseText(text, base);
}

function parseText(text: string, base: string): { refusal: string } | { value: unknown } {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (err) {
    return {
      refusal: `the payload is not valid JSON for content_type ${base}: ${(err as Error).message.slice(0, 120)}`,
    };
  }
}

/**
 * Why a payload breaks rule 5 for its kind, or undefined when it is valid. `strategy: 'parse'` uses JSON.parse
 * (fastest for small payloads); `'scan'` validates with jsonc-parser's visitor in strict mode (no comments, no
 * trailing commas), which builds no value, so a 16 MB payload costs no heap beyond its text.
 */
export function contentRefusal(
  kind: ContentKind,
  payload: Uint8Array,
  base: string,
  strategy: 'parse' | 'scan' = 'parse',
): string | undefined {
  // Checked on the bytes: decoding a 16 MB text only to drop it made a 16–32 MB string (bench/memory.ts).
  if (kind === 'text') return isUtf8(payload) ? undefined : 'text payloads must be UTF-8';
  // Depth before parsing (a linear scan that stops at the limit): no payload nests deeper than MAX_JSON_DEPTH.
  const tooDeep = jsonBoundsRefusal(payload, { what: 'the payload' });
  if (tooDeep !== undefined) return tooDeep;
  let text: string;
  try {
    text = utf8.decode(payload);
  } catch {
    return `the payload is not valid JSON for content_type ${base}: it is not UTF-8`;
  }
  if (strategy === 'parse') {
    const parsed = parseText(text, base);
    return 'refusal' in parsed ? parsed.refusal : undefined;
  }
  let error: string | undefined;
  visit(
    text,
    {
      onError: (code, offset) => {
        error ??= `${printParseErrorCode(code)} at character ${offset}`;
      },
    },
    { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false },
  );
  return error === undefined ? undefined : `the payload is not valid JSON for content_type ${base}: ${error}`;
}
