import { createHash } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { FIELD_LIMITS } from '../fieldLimits';
import { parseBoundedJson } from '../json';
import { MIN_DEBATE_TIMEOUT_MS, type PolicyReader } from '../policy/model';
import { compileSchemaText, compileSchemaTextAsync } from '../tools/model';
import { fail, LIMITS } from './checks';
import { isJsonContentType, jsonDeltaSummary, jsonSame, textDeltaSummary, unifiedDiff } from './delta';
import type { OpenInput, ProposalInput } from './inputs';
import type { DeltaSummary, NegotiationRecord, NegotiationRepository, RoundRecord } from './model';

/** Compiled proposal schemas kept (an LRU shared by all negotiations; a 64 KiB schema takes up to a second to compile). */
export const VALIDATOR_CACHE_SIZE = 32;

/** A debate_timeout below the minimum is raised to it (a debate that times out at once would only make HITL work); 0 = the profile's. */
export function debateTimeoutOf(asked: number): number {
  return asked > 0 ? Math.max(asked, MIN_DEBATE_TIMEOUT_MS) : asked;
}

/**
 * Drafts (Propose / Counter payloads): early validation against the debate's proposal schemas (RFC §17.3; ajv, the
 * compiled validators in an LRU), what a draft changed against the round before (DeltaSummary and the diff artifact),
 * and whether it repeats the one two rounds back (oscillation).
 */
export class Drafts {
  /** Compiled proposal schemas by sha256 of the schema text, most recently used last (VALIDATOR_CACHE_SIZE). */
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(
    private readonly deps: {
      readonly store: { readonly negotiation: NegotiationRepository };
      readonly policies: Pick<PolicyReader, 'effectiveFor'>;
    },
  ) {}

  /** The validators kept, by sha256 of the schema text. */
  get cached(): ReadonlyMap<string, ValidateFunction> {
    return this.validators;
  }

  /**
   * The proposal schemas an Open (`open` given) or a Propose / Counter of `negotiationId` will compile, compiled
   * beforehand on the schema worker, off the event loop: the server awaits this, then makes the call, which finds them
   * cached (ajv held the event loop 0.6–0.7 s for a 64 KiB schema). Never throws: the call itself refuses.
   */
  async compileSchemas(negotiationId: string, open?: OpenInput): Promise<void> {
    const texts: string[] = [];
    if (open) {
      if (open.schema.trim() !== '' && Buffer.byteLength(open.schema) <= LIMITS.schema_bytes) texts.push(open.schema);
      try {
        const { schema } = this.deps.policies.effectiveFor({
          intensity: open.intensity,
          profileHint: open.profileHint,
          preferences: open.preferences,
          debateTimeoutMs: debateTimeoutOf(open.debateTimeoutMs),
          topic: open.topic,
        });
        if (schema.trim() !== '') texts.push(schema);
      } catch {
        // Refused by the call itself.
      }
    } else {
      const rec = this.deps.store.negotiation.get(negotiationId);
      if (rec) texts.push(...[rec.schema, rec.policySchema ?? ''].filter((t) => t.trim() !== ''));
    }
    for (const text of texts) {
      if (!this.validators.has(createHash('sha256').update(text).digest('hex')))
        await compileSchemaTextAsync(text, 'output');
    }
  }

  /** The validator of a schema, from the cache or compiled, without caching it. Throws VALIDATION_ERROR. */
  compiled(schema: string, what: string): { key: string; validate: ValidateFunction } {
    const key = createHash('sha256').update(schema).digest('hex');
    const cached = this.validators.get(key);
    if (cached) return { key, validate: cached };
    const verdict = compileSchemaText(schema, 'output');
    if (!verdict.ok) throw fail('invalid', 'VALIDATION_ERROR', `${what} is not a usable JSON Schema: ${verdict.why}`);
    return { key, validate: verdict.validate };
  }

  /** Keeps a compiled validator (most recently used last). */
  remember(key: string, validate: ValidateFunction): void {
    this.validators.delete(key);
    this.validators.set(key, validate);
    while (this.validators.size > VALIDATOR_CACHE_SIZE)
      this.validators.delete(this.validators.keys().next().value as string);
  }

  /** JSON drafts parsed; validated against the negotiation's schema (early validation, RFC §17.3). Throws VALIDATION_ERROR. */
  check(rec: NegotiationRecord, input: ProposalInput): { value: unknown } | undefined {
    const isJson = isJsonContentType(input.contentType);
    if (!isJson) {
      if (rec.schema !== '' && rec.effective.policy.scoring.requireSchemaValid) {
        throw fail(
          'invalid',
          'VALIDATION_ERROR',
          `negotiation '${rec.id}' has a proposal schema (require_schema_valid): proposals are application/json, not ${input.contentType}; no round was used`,
        );
      }
      return undefined;
    }
    const parsed = parseBoundedJson(input.payload.toString('utf8'), {
      what: 'the payload',
      maxBytes: LIMITS.payload_bytes,
      maxValues: LIMITS.payload_json_values,
    });
    if (!parsed.ok) throw fail('invalid', 'VALIDATION_ERROR', `${parsed.reason}; no round was used`);
    for (const [schema, which] of [
      [rec.schema, 'the proposal schema'],
      [rec.policySchema ?? '', "the policy's proposal schema for the topic"],
    ] as const) {
      if (schema === '') continue;
      const validate = this.validatorFor(schema, which);
      if (!validate(parsed.value)) {
        const first = validate.errors?.[0];
        const where = first?.instancePath || '/';
        throw fail(
          'invalid',
          'VALIDATION_ERROR',
          `the draft does not match ${which} at ${where}: ${first?.message ?? 'is invalid'}; no round was used`,
        );
      }
    }
    return { value: parsed.value };
  }

  /** The validator of a schema: from the cache, or compiled and cached. */
  private validatorFor(schema: string, what: string): ValidateFunction {
    const { key, validate } = this.compiled(schema, what);
    this.remember(key, validate);
    return validate;
  }
}

/** What a draft changed against the round before: its DeltaSummary and the diff artifact (round 1: nothing to compare). */
export function deltaOf(
  previous: RoundRecord | undefined,
  payload: Buffer,
  json: { value: unknown } | undefined,
): { summary: DeltaSummary; artifact: Record<string, unknown> } {
  if (!previous) return { summary: { magnitude: 1, changedPaths: [], pathCount: 0, method: 'none' }, artifact: {} };
  const header = { from: `v${previous.n}`, to: `v${previous.n + 1}` };
  if (json && isJsonContentType(previous.contentType)) {
    // A round of more values (stored before the limit) is compared as text.
    const before = parseBoundedJson(previous.payload.toString('utf8'), {
      what: 'the previous round',
      maxValues: LIMITS.payload_json_values,
    });
    if (before.ok) {
      const { summary, delta } = jsonDeltaSummary(before.value, json.value);
      const artifact: Record<string, unknown> = {
        ...header,
        method: summary.method,
        magnitude: summary.magnitude,
        changed_paths: summary.changedPaths,
        path_count: summary.pathCount,
        delta: delta ?? null,
      };
      if (summary.method === 'json-coarse')
        return {
          summary,
          artifact: { ...artifact, delta: null, delta_omitted: 'too large to diff structurally (README, "Debates")' },
        };
      if (Buffer.byteLength(JSON.stringify(artifact)) > FIELD_LIMITS.activity.artifact_content_bytes) {
        return { summary, artifact: { ...artifact, delta: null, delta_omitted: 'larger than an artifact may be' } };
      }
      return { summary, artifact };
    }
  }
  const a = previous.payload.toString('utf8');
  const b = payload.toString('utf8');
  const summary = textDeltaSummary(a, b);
  let unified =
    summary.method === 'text-coarse'
      ? ''
      : (unifiedDiff(a, b, `contract_v${previous.n}`, `contract_v${previous.n + 1}`) ?? '');
  if (Buffer.byteLength(unified) > FIELD_LIMITS.activity.artifact_content_bytes / 2) unified = '';
  return {
    summary,
    artifact: {
      ...header,
      method: summary.method,
      magnitude: summary.magnitude,
      changed_paths: summary.changedPaths,
      path_count: summary.pathCount,
      unified,
    },
  };
}

/** Whether a round's contract is the draft's (the same bytes, or the same JSON value). */
export function sameContract(
  round: RoundRecord,
  contentType: string,
  payload: Buffer,
  json: { value: unknown } | undefined,
): boolean {
  if (round.payload.equals(payload)) return true;
  if (!json || !isJsonContentType(round.contentType) || !isJsonContentType(contentType)) return false;
  const other = parseBoundedJson(round.payload.toString('utf8'), {
    what: 'round',
    maxValues: LIMITS.payload_json_values,
  });
  return other.ok && jsonSame(other.value, json.value);
}
