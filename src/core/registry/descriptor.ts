import { FIELD_LIMITS } from '../fieldLimits';

/** Communication classes of RFC §3 / §7.3, by their canonical enum names. */
export const COMMUNICATION_CLASSES = ['PRIVILEGED', 'STANDARD', 'BULK'] as const;
export type CommunicationClass = (typeof COMMUNICATION_CLASSES)[number];

export const REGISTRATION_TYPES = ['STANDARD_AGENT', 'SWARM_GATEWAY'] as const;
export type RegistrationType = (typeof REGISTRATION_TYPES)[number];

/**
 * registry.proto RegistrationType as it may arrive: by name or by number (the reference protos' numbering,
 * UNSPECIFIED = 0, STANDARD_AGENT = 1, SWARM_GATEWAY = 2); absent or UNSPECIFIED is a standard agent.
 */
const REGISTRATION_TYPE_BY_WIRE = new Map<string, RegistrationType>([
  ['', 'STANDARD_AGENT'],
  ['REGISTRATION_TYPE_UNSPECIFIED', 'STANDARD_AGENT'],
  ['0', 'STANDARD_AGENT'],
  ['STANDARD_AGENT', 'STANDARD_AGENT'],
  ['1', 'STANDARD_AGENT'],
  ['SWARM_GATEWAY', 'SWARM_GATEWAY'],
  ['2', 'SWARM_GATEWAY'],
]);

/**
 * online: heartbeating within the debounce window of this coordinator run;
 * unavailable: missed heartbeats for longer than the debounce (still registered);
 * disconnected: known from a previous run and not heard from since this one started.
 */
export type AgentPresence = 'online' | 'unavailable' | 'disconnected';

/** The registry's view of RFC §14's descriptor, independent of any wire format. */
export interface AgentDescriptor {
  readonly agentId: string;
  readonly name: string;
  readonly description: string;
  readonly capabilities: readonly string[];
  readonly communicationClass: CommunicationClass;
  readonly modalitiesSupported: readonly string[];
  readonly reasoningConnectors: readonly string[];
  /** Base64 of the public key bytes, empty when message signing is off. */
  readonly publicKey: string;
  readonly registrationType: RegistrationType;
  readonly maxConcurrentDelegations: number;
}

/** The descriptor as an agent sent it, before validation (every field may be missing or odd). */
export interface DescriptorInput {
  readonly agentId?: string;
  readonly name?: string;
  readonly description?: string;
  readonly capabilities?: readonly string[];
  /** Canonical enum name; '' or 'COMM_CLASS_UNSPECIFIED' when absent. */
  readonly communicationClass?: string;
  readonly modalitiesSupported?: readonly string[];
  readonly reasoningConnectors?: readonly string[];
  readonly publicKey?: Uint8Array;
  readonly registrationType?: string;
  readonly maxConcurrentDelegations?: number;
}

export const MAX_AGENT_ID_LENGTH = FIELD_LIMITS.registry.agent_id;
export const MAX_DESCRIPTION_WORDS = FIELD_LIMITS.registry.description_words;
export const MAX_DESCRIPTION_BYTES = FIELD_LIMITS.registry.description_bytes;
export const MAX_NAME_LENGTH = FIELD_LIMITS.registry.name;
export const MAX_LIST_ENTRIES = FIELD_LIMITS.registry.list_entries;
export const MAX_ENTRY_LENGTH = FIELD_LIMITS.registry.list_entry;

/**
 * Agent ids become git branch names (`sw4rm/<agent_id>`) and folder names, so they are restricted to
 * letters, digits, '.', '_' and '-', start with a letter or digit, and contain no '..'.
 */
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** RFC 6838 type/subtype with optional parameters, e.g. `application/json` or `text/plain; charset=utf-8`. */
const MIME_TYPE =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/(\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=("[^"]*"|[A-Za-z0-9!#$&^_.+-]+))*$/;
/** A URI with a scheme (RFC 3986), e.g. `http://127.0.0.1:8080/infer` or `sw4rm://reasoning/local`. */
const URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$/;

export type DescriptorVerdict =
  | { readonly ok: true; readonly descriptor: AgentDescriptor; readonly warnings: readonly string[] }
  | { readonly ok: false; readonly reason: string };

/**
 * Validates a registration (RFC §14). Strict on form, lenient on omission: anything malformed is refused
 * with a reason; a missing name, class, modality list or reasoning connector is accepted with a default
 * and a warning, so that unmodified reference agents can join.
 */
export function validateDescriptor(input: DescriptorInput): DescriptorVerdict {
  const fail = (reason: string): DescriptorVerdict => ({ ok: false, reason: `VALIDATION_ERROR: ${reason}` });
  const warnings: string[] = [];

  const agentId = input.agentId ?? '';
  if (agentId.trim() === '') return fail('agent_id must not be empty');
  if (agentId.length > MAX_AGENT_ID_LENGTH) return fail(`agent_id is longer than ${MAX_AGENT_ID_LENGTH} characters`);
  if (agentId.toLowerCase() === 'coordinator')
    return fail("agent_id 'coordinator' is reserved: it is the coordinator's own address");
  if (!AGENT_ID.test(agentId) || agentId.includes('..') || agentId.endsWith('.lock') || agentId.endsWith('.')) {
    return fail(
      `agent_id '${printable(agentId)}' may contain only letters, digits, '.', '_' and '-', must start with a letter or digit, and must not contain '..' or end in '.' or '.lock'`,
    );
  }

  const rawName = (input.name ?? '').trim();
  if (rawName.length > MAX_NAME_LENGTH) return fail(`name is longer than ${MAX_NAME_LENGTH} characters`);
  if (/[\u0000-\u001f\u007f]/.test(rawName)) return fail('name contains control characters');
  if (rawName.includes('\uFFFD')) return fail('name is not valid UTF-8 (U+FFFD)');
  if (rawName === '') warnings.push('no name given; the agent_id is used as its name');
  const name = rawName || agentId;

  const description = (input.description ?? '').trim();
  const words = description === '' ? 0 : description.split(/\s+/).length;
  if (words > MAX_DESCRIPTION_WORDS)
    return fail(`description has ${words} words; RFC §14 allows at most ${MAX_DESCRIPTION_WORDS}`);
  const descriptionBytes = Buffer.byteLength(description);
  if (descriptionBytes > MAX_DESCRIPTION_BYTES)
    return fail(`description is larger than ${MAX_DESCRIPTION_BYTES} bytes (${descriptionBytes})`);
  if (description.includes('\u0000')) return fail('description contains NUL');

  const listCheck = (
    field: string,
    values: readonly string[] | undefined,
    pattern?: RegExp,
    what?: string,
  ): string[] | string => {
    const list = [...(values ?? [])];
    if (list.length > MAX_LIST_ENTRIES)
      return `${field} has ${list.length} entries; at most ${MAX_LIST_ENTRIES} are allowed`;
    const seen = new Set<string>();
    for (const value of list) {
      if (value.trim() === '') return `${field} contains an empty entry`;
      if (value.length > MAX_ENTRY_LENGTH) return `${field} has an entry longer than ${MAX_ENTRY_LENGTH} characters`;
      if (value.includes('\uFFFD') || value.includes('\u0000'))
        return `${field} has an entry with NUL or invalid UTF-8 (U+FFFD)`;
      if (pattern && !pattern.test(value)) return `${field} entry '${printable(value)}' is not ${what}`;
      if (seen.has(value)) return `${field} lists '${printable(value)}' twice`;
      seen.add(value);
    }
    return list;
  };

  const capabilities = listCheck(
    'capabilities',
    input.capabilities,
    /^[^\s\u0000-\u001f]+$/,
    'a capability name without spaces or control characters',
  );
  if (typeof capabilities === 'string') return fail(capabilities);

  const modalities = listCheck(
    'modalities_supported',
    input.modalitiesSupported,
    MIME_TYPE,
    'a MIME type (type/subtype)',
  );
  if (typeof modalities === 'string') return fail(modalities);
  if (modalities.length === 0)
    warnings.push('no modalities_supported declared; messages of any content type will be delivered');

  const connectors = listCheck('reasoning_connectors', input.reasoningConnectors, URI, 'a URI with a scheme');
  if (typeof connectors === 'string') return fail(connectors);
  if (connectors.length === 0)
    warnings.push('no reasoning_connectors declared; RFC §14 expects at least one Inference Engine connector');

  const rawClass = input.communicationClass ?? '';
  let communicationClass: CommunicationClass;
  if (rawClass === '' || rawClass === 'COMM_CLASS_UNSPECIFIED' || rawClass === '0') {
    communicationClass = 'STANDARD';
    warnings.push('no communication_class given; STANDARD is used');
  } else if ((COMMUNICATION_CLASSES as readonly string[]).includes(rawClass)) {
    communicationClass = rawClass as CommunicationClass;
  } else {
    return fail(`communication_class '${printable(rawClass)}' is not one of ${COMMUNICATION_CLASSES.join(', ')}`);
  }

  const rawType = input.registrationType ?? '';
  const registrationType = REGISTRATION_TYPE_BY_WIRE.get(rawType);
  if (registrationType === undefined) return fail(`registration_type '${printable(rawType)}' is not known`);

  const publicKey = input.publicKey ?? new Uint8Array();
  if (publicKey.length > FIELD_LIMITS.registry.public_key_bytes)
    return fail(`public_key is larger than ${FIELD_LIMITS.registry.public_key_bytes} bytes`);

  const maxConcurrentDelegations = input.maxConcurrentDelegations ?? 0;
  if (!Number.isInteger(maxConcurrentDelegations) || maxConcurrentDelegations < 0) {
    return fail('max_concurrent_delegations must be a non-negative integer');
  }

  return {
    ok: true,
    warnings,
    descriptor: {
      agentId,
      name,
      description,
      capabilities,
      communicationClass,
      modalitiesSupported: modalities,
      reasoningConnectors: connectors,
      publicKey: Buffer.from(publicKey).toString('base64'),
      registrationType,
      maxConcurrentDelegations,
    },
  };
}

/** Agent-supplied text quoted in an error: shortened and with control characters made visible. */
function printable(value: string): string {
  const cleaned = value.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return cleaned.length > 80 ? cleaned.slice(0, 77) + '...' : cleaned;
}
