import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CredentialInfo } from '../../src/core/api';
import { SERVICE_ADDRESS_VARIABLES, agentEnvironment } from '../../src/server/agentEnvironment';
import {
  agentEnvironmentFor,
  agentIdProblem,
  copiedLabel,
  credentialedAgentIds,
  credentialRow,
  credentialSubject,
  orderCredentials,
  proposeAgentId,
} from '../../src/extension/credentialsModel';

const time = (ms: number): string => `t${ms}`;

function credential(overrides: Partial<CredentialInfo> = {}): CredentialInfo {
  return {
    id: 'c1',
    kind: 'agent',
    agentId: 'agent-1',
    label: 'copied for agent agent-1',
    createdAt: 10,
    createdBy: 'editor:alice',
    revokedAt: null,
    lastUsedAt: null,
    ...overrides,
  };
}

describe('credentials in the editor (credentialsModel)', () => {
  describe('the proposed agent id', () => {
    it('is agent-1 when no agent is known', () => {
      assert.equal(proposeAgentId([]), 'agent-1');
    });

    it('is one more than the highest agent-N among registered and credentialed agents, ignoring other ids', () => {
      assert.equal(
        proposeAgentId(['agent-1', 'agent-3', 'reviewer', 'agent-x', 'agent-2.lock', 'my-agent-9']),
        'agent-4',
      );
      assert.equal(proposeAgentId(['agent-07']), 'agent-8');
    });

    it('is an id the registry accepts', () => {
      assert.equal(agentIdProblem(proposeAgentId(['agent-41'])), undefined);
    });
  });

  describe("agent id validation (the registry's own rule, through the API)", () => {
    it('accepts letters, digits, ".", "_" and "-"', () => {
      for (const id of ['a', 'agent-1', 'docs.writer_2', 'A'.repeat(128)])
        assert.equal(agentIdProblem(id), undefined, id);
    });

    it('refuses what the registry refuses, and says why', () => {
      for (const id of [
        '',
        ' ',
        'a b',
        'a..b',
        'agent.',
        'agent.lock',
        '-agent',
        'a/b',
        'A'.repeat(129),
        'coordinator',
        'ä',
      ]) {
        assert.ok(agentIdProblem(id), `'${id}' should be refused`);
      }
      assert.match(agentIdProblem('a..b')!, /must not contain '\.\.'/);
      assert.match(agentIdProblem('A'.repeat(129))!, /longer than 128/);
      assert.doesNotMatch(agentIdProblem('a b')!, /VALIDATION_ERROR/);
    });
  });

  describe('the copied environment', () => {
    const coordinator = agentEnvironment('127.0.0.1', 50051, 'operator-token');

    it("carries every service address, the agent id and the agent's own token, never the operator token", () => {
      const env = agentEnvironmentFor(coordinator, 'agent-2', 'agent-token');
      for (const name of SERVICE_ADDRESS_VARIABLES) assert.equal(env[name], '127.0.0.1:50051', name);
      assert.equal(env.SW4RM_AGENT_ID, 'agent-2');
      assert.equal(env.SW4RM_TOKEN, 'agent-token');
      assert.equal(Object.keys(env).length, SERVICE_ADDRESS_VARIABLES.length + 2);
      assert.ok(!Object.values(env).includes('operator-token'));
    });

    it('has no token with auth none, and still the agent id', () => {
      const env = agentEnvironmentFor(agentEnvironment('127.0.0.1', 50051, undefined), 'agent-2', undefined);
      assert.equal(env.SW4RM_AGENT_ID, 'agent-2');
      assert.ok(!('SW4RM_TOKEN' in env));
    });

    it('labels the credential it mints with the agent', () => {
      assert.equal(copiedLabel('agent-2'), 'copied for agent agent-2');
    });
  });

  describe('rows of the Credentials view', () => {
    it('shows an agent credential by its agent, with last used, created, and a label other than the copied one', () => {
      const row = credentialRow(credential({ lastUsedAt: 20 }), time);
      assert.equal(row.label, 'agent-1');
      assert.equal(row.description, 'agent · used t20 · created t10');
      assert.equal(
        credentialRow(credential({ label: 'CI runner' }), time).description,
        'agent · never used · created t10 · CI runner',
      );
      assert.equal(row.contextValue, 'credential+agent');
      assert.equal(row.icon, 'key');
      assert.match(row.tooltip, /^Agent credential of agent-1: it acts only as this agent\./);
      assert.match(row.tooltip, /created: t10 by editor:alice\nlast used: t20\nrevoked: no\nid: c1$/);
    });

    it('says never used, and marks revoked ones so that menus do not offer Revoke', () => {
      assert.equal(credentialRow(credential({ label: '' }), time).description, 'agent · never used · created t10');
      const row = credentialRow(credential({ revokedAt: 30, lastUsedAt: 20 }), time);
      assert.equal(row.description, 'agent · revoked t30 · created t10');
      assert.equal(row.contextValue, 'credential+agent+revoked');
      assert.equal(row.color, 'disabledForeground');
      const menu = /^credential(?!.*[+]revoked)/;
      assert.ok(menu.test(credentialRow(credential(), time).contextValue));
      assert.ok(!menu.test(row.contextValue));
    });

    it('shows an enrolment credential as such', () => {
      const enrolment = credential({ id: 'e1', kind: 'enrolment', agentId: null, label: 'terminals of this window' });
      const row = credentialRow(enrolment, time);
      assert.equal(row.label, 'terminals of this window');
      assert.equal(row.description, 'enrolment · never used · created t10');
      assert.equal(row.contextValue, 'credential+enrolment');
      assert.match(row.tooltip, /may register new agent ids/);
      assert.equal(credentialSubject(enrolment), 'enrolment credential "terminals of this window"');
      assert.equal(credentialSubject(credential()), 'agent credential of agent-1');
    });

    it('keeps agent text as data in the tooltip (a plain string, nothing interpreted)', () => {
      const row = credentialRow(credential({ label: '**bold** [x](command:sw4rm.stop) <img src=x>' }), time);
      assert.equal(typeof row.tooltip, 'string');
      assert.match(row.tooltip, /label: \*\*bold\*\* \[x\]\(command:sw4rm\.stop\) <img src=x>/);
    });

    it('lists credentials in use first (newest first), then revoked ones, and knows which agents hold one', () => {
      const list = [
        credential({ id: 'old', createdAt: 1 }),
        credential({ id: 'revoked', createdAt: 5, revokedAt: 6, agentId: 'agent-9' }),
        credential({ id: 'new', createdAt: 3, agentId: 'agent-2' }),
        credential({ id: 'enrol', kind: 'enrolment', agentId: null, createdAt: 2 }),
      ];
      assert.deepEqual(
        orderCredentials(list).map((c) => c.id),
        ['new', 'enrol', 'old', 'revoked'],
      );
      assert.deepEqual(credentialedAgentIds(list).sort(), ['agent-1', 'agent-2']);
    });
  });
});

describe('credentials contributions (package.json)', () => {
  const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../..', 'package.json'), 'utf8')) as {
    contributes: {
      views: Record<string, Array<{ id: string; name: string }>>;
      menus: Record<string, Array<{ command: string; when: string; group?: string }>>;
    };
  };

  it('declares the Credentials view in the SW4RM container', () => {
    assert.ok(manifest.contributes.views.sw4rm.some((v) => v.id === 'sw4rm.credentials' && v.name === 'Credentials'));
  });

  it('offers Revoke on credentials not revoked, inline and in the context menu', () => {
    const entries = manifest.contributes.menus['view/item/context'].filter(
      (e) => e.command === 'sw4rm.credentials.revoke',
    );
    assert.deepEqual(entries.map((e) => e.group!.split('@')[0]).sort(), ['1_revoke', 'inline']);
    for (const entry of entries) {
      const regex = new RegExp(/viewItem =~ \/(.*)\//.exec(entry.when)![1]);
      assert.ok(regex.test('credential+agent') && regex.test('credential+enrolment'));
      assert.ok(!regex.test('credential+agent+revoked'));
    }
  });
});
