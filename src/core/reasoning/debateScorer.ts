import { parseBoundedJson } from '../json';

/**
 * The built-in, deterministic debate scorer (ReasoningProxy.EvaluateDebate without an inference engine; README,
 * "Connect an inference engine"): how much two proposals agree, as a confidence in [0, 1] (1 = the same, 0 = nothing in
 * common). Both valid JSON → structural: each proposal's leaves as `path = value` (`.key`, `."odd key"`, `[index]`;
 * values as JSON text); the score is the share of paths, over the union of both proposals' paths, whose values are
 * equal. Either proposal of more than MAX_STRUCTURAL_LEAVES leaves → as text (a structural comparison of two 1 MiB
 * arrays, a million leaves, would hold the event loop about a second), the notes saying so. Otherwise (either is not
 * JSON) → as text: words (Unicode letters and digits, lower-cased) counted, the score Σ min(count in a, count in b) /
 * Σ max(…). Both empty: 1. Linear in the proposals' size; symmetric; the same inputs give the same answer. `intensity` is for an engine: this scorer names it in its notes and does not use it.
 */

/** Leaves listed in the notes, at most. */
const NOTE_PATHS = 5;

/** Leaves per proposal compared structurally, at most; beyond, both proposals are compared as text. */
export const MAX_STRUCTURAL_LEAVES = 20_000;

export interface DebateVerdict {
  readonly confidence: number;
  readonly notes: string;
}

export function scoreDebate(proposalA: string, proposalB: string, intensity = ''): DebateVerdict {
  const a = parseBoundedJson(proposalA, { what: 'proposal_a' });
  const b = parseBoundedJson(proposalB, { what: 'proposal_b' });
  const suffix = intensity ? `; intensity '${intensity.slice(0, 64)}' not used by the built-in scorer` : '';
  const left = a.ok && b.ok ? leaves(a.value) : undefined;
  const right = left && b.ok ? leaves(b.value) : undefined;
  if (left && right) {
    const paths = new Set([...left.keys(), ...right.keys()]);
    const differing: string[] = [];
    let same = 0;
    for (const path of [...paths].sort()) {
      if (left.get(path) === right.get(path)) same++;
      else differing.push(path === '' ? '(the whole value)' : path);
    }
    const confidence = paths.size === 0 ? 1 : round(same / paths.size);
    const shown = differing.slice(0, NOTE_PATHS).join(', ') + (differing.length > NOTE_PATHS ? ', …' : '');
    return {
      confidence,
      notes: `structural JSON comparison: ${same} of ${paths.size} paths equal${differing.length > 0 ? `; differing: ${shown}` : ''}${suffix}`,
    };
  }
  const why = a.ok && b.ok ? `JSON of more than ${MAX_STRUCTURAL_LEAVES} leaves` : 'not both JSON';
  const leftWords = words(proposalA);
  const rightWords = words(proposalB);
  let shared = 0;
  let total = 0;
  for (const word of new Set([...leftWords.keys(), ...rightWords.keys()])) {
    const x = leftWords.get(word) ?? 0;
    const y = rightWords.get(word) ?? 0;
    shared += Math.min(x, y);
    total += Math.max(x, y);
  }
  const confidence = total === 0 ? 1 : round(shared / total);
  return { confidence, notes: `text comparison (${why}): ${shared} of ${total} words in common${suffix}` };
}

/**
 * Every leaf of a JSON value as path → canonical JSON (an empty object or array is a leaf of its own); undefined as
 * soon as there are more than MAX_STRUCTURAL_LEAVES.
 */
function leaves(value: unknown): Map<string, string> | undefined {
  const out = new Map<string, string>();
  const stack: Array<[string, unknown]> = [['', value]];
  // Each value on the stack holds at least one leaf: more than the cap there and found is enough to stop.
  const over = (more: number) => out.size + stack.length + more > MAX_STRUCTURAL_LEAVES;
  while (stack.length > 0) {
    const [path, v] = stack.pop()!;
    if (Array.isArray(v)) {
      if (over(Math.max(1, v.length))) return undefined;
      if (v.length === 0) out.set(path, '[]');
      v.forEach((item, i) => stack.push([`${path}[${i}]`, item]));
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      if (over(Math.max(1, keys.length))) return undefined;
      if (keys.length === 0) out.set(path, '{}');
      for (const k of keys)
        stack.push([
          `${path}.${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}`,
          (v as Record<string, unknown>)[k],
        ]);
    } else {
      if (over(1)) return undefined;
      out.set(path, JSON.stringify(v));
    }
  }
  return out;
}

function words(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of text.toLowerCase().matchAll(/[\p{L}\p{N}]+/gu))
    counts.set(match[0], (counts.get(match[0]) ?? 0) + 1);
  return counts;
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
