import { strict as assert } from 'node:assert';
import {
  MAX_AGENT_ID_LENGTH,
  MAX_DESCRIPTION_WORDS,
  validateDescriptor,
  type DescriptorInput,
} from '../../src/core/registry/descriptor';
import { validDescriptor } from '../support/fixtures';

function words(n: number): string {
  return Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
}

interface RefusalCase {
  readonly what: string;
  readonly input: DescriptorInput;
  /** A fragment of the reason that says what is wrong. */
  readonly mentions: RegExp;
}

const REFUSED: readonly RefusalCase[] = [
  {
    what: 'a missing agent_id',
    input: validDescriptor('x', { agentId: undefined }),
    mentions: /agent_id must not be empty/,
  },
  { what: 'an empty agent_id', input: validDescriptor(''), mentions: /agent_id must not be empty/ },
  { what: 'a whitespace agent_id', input: validDescriptor('   \t'), mentions: /agent_id must not be empty/ },
  { what: 'an agent_id with a slash', input: validDescriptor('team/alpha'), mentions: /agent_id 'team\/alpha'/ },
  { what: 'an agent_id with a space', input: validDescriptor('alpha beta'), mentions: /agent_id/ },
  { what: 'an agent_id with ..', input: validDescriptor('alpha..beta'), mentions: /'\.\.'/ },
  { what: 'an agent_id ending in .lock', input: validDescriptor('alpha.lock'), mentions: /'\.lock'/ },
  { what: 'an agent_id ending in .', input: validDescriptor('alpha.'), mentions: /end in '\.'/ },
  { what: 'an agent_id starting with -', input: validDescriptor('-alpha'), mentions: /start with a letter or digit/ },
  { what: 'an agent_id with a control character', input: validDescriptor('alpha\u0007'), mentions: /\\u0007/ },
  {
    what: 'a too long agent_id',
    input: validDescriptor('a'.repeat(MAX_AGENT_ID_LENGTH + 1)),
    mentions: /longer than 128 characters/,
  },
  {
    what: 'a description of 201 words',
    input: validDescriptor('alpha', { description: words(MAX_DESCRIPTION_WORDS + 1) }),
    mentions: /201 words.*at most 200/,
  },
  {
    what: 'a name with a control character',
    input: validDescriptor('alpha', { name: 'Al\u0000pha' }),
    mentions: /name contains control characters/,
  },
  { what: 'a too long name', input: validDescriptor('alpha', { name: 'n'.repeat(201) }), mentions: /name is longer/ },
  {
    what: 'a modality that is not a MIME type',
    input: validDescriptor('alpha', { modalitiesSupported: ['json'] }),
    mentions: /modalities_supported entry 'json' is not a MIME type/,
  },
  {
    what: 'a MIME type without subtype',
    input: validDescriptor('alpha', { modalitiesSupported: ['text/'] }),
    mentions: /not a MIME type/,
  },
  {
    what: 'a MIME type with a broken parameter',
    input: validDescriptor('alpha', { modalitiesSupported: ['text/plain; charset'] }),
    mentions: /not a MIME type/,
  },
  {
    what: 'an empty modality',
    input: validDescriptor('alpha', { modalitiesSupported: [''] }),
    mentions: /modalities_supported contains an empty entry/,
  },
  {
    what: 'a duplicate capability',
    input: validDescriptor('alpha', { capabilities: ['code.write', 'code.write'] }),
    mentions: /capabilities lists 'code.write' twice/,
  },
  {
    what: 'a capability with spaces',
    input: validDescriptor('alpha', { capabilities: ['write code'] }),
    mentions: /capabilities entry/,
  },
  {
    what: 'too many capabilities',
    input: validDescriptor('alpha', { capabilities: Array.from({ length: 257 }, (_, i) => `c${i}`) }),
    mentions: /257 entries/,
  },
  {
    what: 'a reasoning connector that is not a URI',
    input: validDescriptor('alpha', { reasoningConnectors: ['not a uri'] }),
    mentions: /reasoning_connectors entry 'not a uri' is not a URI/,
  },
  {
    what: 'a reasoning connector without scheme',
    input: validDescriptor('alpha', { reasoningConnectors: ['/infer'] }),
    mentions: /is not a URI with a scheme/,
  },
  {
    what: 'an unknown communication class',
    input: validDescriptor('alpha', { communicationClass: 'URGENT' }),
    mentions: /communication_class 'URGENT' is not one of PRIVILEGED, STANDARD, BULK/,
  },
  {
    what: 'an unknown registration type',
    input: validDescriptor('alpha', { registrationType: 'ROGUE' }),
    mentions: /registration_type 'ROGUE'/,
  },
  {
    what: 'a public key over 4096 bytes',
    input: validDescriptor('alpha', { publicKey: new Uint8Array(4097) }),
    mentions: /public_key is larger than 4096 bytes/,
  },
  {
    what: 'a negative max_concurrent_delegations',
    input: validDescriptor('alpha', { maxConcurrentDelegations: -1 }),
    mentions: /max_concurrent_delegations/,
  },
  {
    what: 'a fractional max_concurrent_delegations',
    input: validDescriptor('alpha', { maxConcurrentDelegations: 1.5 }),
    mentions: /max_concurrent_delegations/,
  },
];

describe('validateDescriptor (RFC §14)', () => {
  describe('refuses', () => {
    for (const { what, input, mentions } of REFUSED) {
      it(`${what}, with a VALIDATION_ERROR reason that says why`, () => {
        const verdict = validateDescriptor(input);
        assert.equal(verdict.ok, false);
        if (verdict.ok) return;
        assert.ok(verdict.reason.startsWith('VALIDATION_ERROR: '), verdict.reason);
        assert.match(verdict.reason, mentions);
      });
    }

    it('quotes long agent-supplied text shortened', () => {
      const verdict = validateDescriptor(validDescriptor('alpha', { communicationClass: 'X'.repeat(5000) }));
      assert.equal(verdict.ok, false);
      if (!verdict.ok) assert.ok(verdict.reason.length < 300, `reason is ${verdict.reason.length} characters`);
    });
  });

  describe('accepts', () => {
    it('a complete descriptor without warnings, normalised', () => {
      const verdict = validateDescriptor(
        validDescriptor('alpha', { publicKey: new Uint8Array([0xde, 0xad]), name: '  Alpha  ' }),
      );
      assert.ok(verdict.ok);
      assert.deepEqual(verdict.warnings, []);
      assert.deepEqual(verdict.descriptor, {
        agentId: 'alpha',
        name: 'Alpha',
        description: 'Writes and reviews code in one worktree.',
        capabilities: ['code.write', 'code.review'],
        communicationClass: 'STANDARD',
        modalitiesSupported: ['application/json', 'text/plain; charset=utf-8'],
        reasoningConnectors: ['http://127.0.0.1:8080/infer'],
        publicKey: '3q0=',
        registrationType: 'STANDARD_AGENT',
        maxConcurrentDelegations: 0,
      });
    });

    it('an agent_id of exactly 128 characters and one with dots, dashes and underscores', () => {
      assert.ok(validateDescriptor(validDescriptor('a'.repeat(MAX_AGENT_ID_LENGTH))).ok);
      assert.ok(validateDescriptor(validDescriptor('Agent_1.coder-2')).ok);
    });

    it('a description of exactly 200 words, however they are spaced', () => {
      assert.ok(validateDescriptor(validDescriptor('alpha', { description: words(MAX_DESCRIPTION_WORDS) })).ok);
      assert.ok(
        validateDescriptor(
          validDescriptor('alpha', { description: `  ${words(MAX_DESCRIPTION_WORDS).replace(/ /g, ' \n\t ')}  ` }),
        ).ok,
      );
    });

    it('MIME types with parameters, wildcards and vendor subtypes', () => {
      const verdict = validateDescriptor(
        validDescriptor('alpha', {
          modalitiesSupported: [
            'text/plain; charset=utf-8',
            'text/*',
            'application/vnd.sw4rm+json',
            'multipart/form-data; boundary="a b"',
          ],
        }),
      );
      assert.ok(verdict.ok);
    });

    it('URIs of any scheme as reasoning connectors', () => {
      assert.ok(
        validateDescriptor(
          validDescriptor('alpha', {
            reasoningConnectors: ['sw4rm://reasoning/local', 'grpc://127.0.0.1:9000', 'https://example.com/v1'],
          }),
        ).ok,
      );
    });

    for (const unspecified of ['', 'COMM_CLASS_UNSPECIFIED', '0', undefined]) {
      it(`communication_class ${JSON.stringify(unspecified)} as STANDARD with a warning`, () => {
        const verdict = validateDescriptor(validDescriptor('alpha', { communicationClass: unspecified }));
        assert.ok(verdict.ok);
        assert.equal(verdict.descriptor.communicationClass, 'STANDARD');
        assert.ok(
          verdict.warnings.some((w) => /communication_class/.test(w)),
          verdict.warnings.join('; '),
        );
      });
    }

    for (const communicationClass of ['PRIVILEGED', 'STANDARD', 'BULK']) {
      it(`communication_class ${communicationClass} as given`, () => {
        const verdict = validateDescriptor(validDescriptor('alpha', { communicationClass }));
        assert.ok(verdict.ok);
        assert.equal(verdict.descriptor.communicationClass, communicationClass);
      });
    }

    it('a bare agent_id, with a default and a warning for every omission a reference agent may make', () => {
      const verdict = validateDescriptor({ agentId: 'bare' });
      assert.ok(verdict.ok);
      assert.equal(verdict.descriptor.name, 'bare');
      assert.equal(verdict.descriptor.description, '');
      assert.deepEqual(verdict.descriptor.capabilities, []);
      assert.equal(verdict.descriptor.publicKey, '');
      assert.equal(verdict.warnings.length, 4, verdict.warnings.join('; '));
      assert.ok(verdict.warnings.some((w) => /name/.test(w)));
      assert.ok(verdict.warnings.some((w) => /modalities_supported/.test(w)));
      assert.ok(verdict.warnings.some((w) => /reasoning_connectors/.test(w)));
    });

    it('a SWARM_GATEWAY with delegations', () => {
      const verdict = validateDescriptor(
        validDescriptor('gw', { registrationType: 'SWARM_GATEWAY', maxConcurrentDelegations: 8 }),
      );
      assert.ok(verdict.ok);
      assert.equal(verdict.descriptor.registrationType, 'SWARM_GATEWAY');
      assert.equal(verdict.descriptor.maxConcurrentDelegations, 8);
    });

    // registry.proto numbering of the reference protos: UNSPECIFIED = 0, STANDARD_AGENT = 1, SWARM_GATEWAY = 2.
    for (const [wire, expected] of [
      ['', 'STANDARD_AGENT'],
      ['REGISTRATION_TYPE_UNSPECIFIED', 'STANDARD_AGENT'],
      ['0', 'STANDARD_AGENT'],
      ['STANDARD_AGENT', 'STANDARD_AGENT'],
      ['1', 'STANDARD_AGENT'],
      ['SWARM_GATEWAY', 'SWARM_GATEWAY'],
      ['2', 'SWARM_GATEWAY'],
    ] as const) {
      it(`registration_type ${JSON.stringify(wire)} as ${expected}`, () => {
        const verdict = validateDescriptor(validDescriptor('rt', { registrationType: wire }));
        assert.ok(verdict.ok, verdict.ok ? '' : verdict.reason);
        assert.equal(verdict.descriptor.registrationType, expected);
      });
    }

    for (const wire of ['3', '-1', 'standard_agent']) {
      it(`refuses registration_type ${JSON.stringify(wire)}`, () => {
        const verdict = validateDescriptor(validDescriptor('rt', { registrationType: wire }));
        assert.equal(verdict.ok, false);
        if (!verdict.ok) assert.match(verdict.reason, /^VALIDATION_ERROR: registration_type/);
      });
    }
  });
});
