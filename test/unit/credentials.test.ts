import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorApiError, type CredentialsChange } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { loadOrMintEnrolment, ENROLMENT_FILE_NAME } from '../../src/core/auth/enrolment';
import {
  CredentialError,
  LAST_USED_FLUSH_MS,
  OPERATOR,
  UNAUTHENTICATED_EVENTS_PER_WINDOW,
  UNAUTHENTICATED_WINDOW_MS,
} from '../../src/core/credentials/credentials';
import type { Principal } from '../../src/core/credentials/model';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { RouterHarness } from '../support/routerHarness';

const ctx = { correlationId: 'credentials-test' };

function principal(value: Principal | string): Principal {
  assert.notEqual(typeof value, 'string', `expected a principal, got: ${String(value)}`);
  return value as Principal;
}

describe('credentials (the area: mint, verify, revoke, owners)', () => {
  let h: RouterHarness;

  beforeEach(() => {
    h = new RouterHarness();
  });

  afterEach(() => h.dispose());

  const credentials = () => h.coordinator.credentials;

  it('mints a token that names its credential and verifies it; the store keeps only a hash', () => {
    const minted = credentials().mintAgent('alpha', 'editor:test', 'for alpha', ctx);
    const [prefix, id, secret] = minted.token.split('.');
    assert.equal(prefix, 'sw4rm');
    assert.equal(id, minted.credential.id);
    assert.ok(Buffer.from(secret, 'base64url').length >= 32);
    assert.deepEqual(principal(credentials().verify(minted.token)), {
      kind: 'agent',
      credentialId: id,
      agentId: 'alpha',
    });
    assert.deepEqual(
      { ...minted.credential, createdAt: 0 },
      {
        id,
        kind: 'agent',
        agentId: 'alpha',
        label: 'for alpha',
        createdAt: 0,
        createdBy: 'editor:test',
        revokedAt: null,
        lastUsedAt: null,
      },
    );
    const row = h.store.credentials.all().find((r) => r.id === id)!;
    assert.equal(row.secretHash.length, 32);
    h.restart();
    assert.equal(principal(credentials().verify(minted.token)).kind, 'agent', 'a credential survives a restart');
    for (const file of fs.readdirSync(h.dataDir).filter((f) => f.startsWith(STORE_FILE_NAME))) {
      assert.ok(!fs.readFileSync(path.join(h.dataDir, file)).includes(secret), `${file} never holds the secret`);
    }
  });

  it('logs refused calls up to a bound per window, then counts them and says so in the next window', () => {
    const refused = () => h.coordinator.log.query({ eventType: 'auth.unauthenticated', limit: 10_000 });
    for (let i = 0; i < UNAUTHENTICATED_EVENTS_PER_WINDOW + 50; i++)
      credentials().recordUnauthenticated('/x/Y', 'wrong token', ctx);
    assert.equal(
      refused().length,
      UNAUTHENTICATED_EVENTS_PER_WINDOW,
      'a flood of bad tokens writes a bounded number of events',
    );
    h.clock.advance(UNAUTHENTICATED_WINDOW_MS);
    credentials().recordUnauthenticated('/x/Y', 'wrong token', ctx);
    const events = refused();
    assert.equal(events.length, UNAUTHENTICATED_EVENTS_PER_WINDOW + 1);
    assert.equal(events[events.length - 1].details.refusals_not_logged_before, 50);
  });

  it('refuses a forged secret, an unknown id, a malformed token and a revoked credential; revoked ones stay listed', () => {
    const minted = credentials().mintAgent('alpha', 'test', '', ctx);
    const [, id, secret] = minted.token.split('.');
    assert.match(String(credentials().verify(`sw4rm.${id}.${secret}x`)), /unknown credential/);
    assert.match(String(credentials().verify(`sw4rm.other.${secret}`)), /unknown credential/);
    assert.match(String(credentials().verify('sw4rm.nodot')), /malformed/);
    const revoked = credentials().revoke(id, 'editor:test', ctx);
    assert.notEqual(revoked.revokedAt, null);
    assert.match(String(credentials().verify(minted.token)), /was revoked/);
    assert.equal(
      credentials()
        .list()
        .find((c) => c.id === id)?.revokedAt,
      revoked.revokedAt,
    );
    assert.deepEqual(credentials().revoke(id, 'again', ctx), revoked, 'revoking twice changes nothing');
    assert.throws(
      () => credentials().revoke('nope', 'x', ctx),
      (err: unknown) => err instanceof CredentialError && err.code === 'not_found',
    );
    h.restart();
    assert.match(String(credentials().verify(minted.token)), /was revoked/, 'revocation is durable');
  });

  it('records every mint and revocation as one event, never with the token', () => {
    const minted = credentials().mintAgent('alpha', 'editor:test', 'x', ctx);
    credentials().revoke(minted.credential.id, 'editor:test', ctx);
    const events = h.coordinator.log
      .query({ correlationId: ctx.correlationId })
      .filter((e) => e.eventType.startsWith('credential.'));
    assert.deepEqual(
      events.map((e) => [e.eventType, e.details.credential_id, e.details.agent_id]),
      [
        ['credential.minted', minted.credential.id, 'alpha'],
        ['credential.revoked', minted.credential.id, 'alpha'],
      ],
    );
    assert.ok(!JSON.stringify(events).includes(minted.token.split('.')[2]));
  });

  it('refuses to mint for an agent id the registry would refuse', () => {
    for (const bad of ['', 'has space', '../x', 'coordinator']) {
      assert.throws(
        () => credentials().mintAgent(bad, 'test', '', ctx),
        (err: unknown) => err instanceof CredentialError && err.code === 'invalid',
        bad,
      );
    }
  });

  it('keeps last use in memory on every verify and writes it at most once a minute', () => {
    const minted = credentials().mintAgent('alpha', 'test', '', ctx);
    const start = h.clock.now();
    credentials().verify(minted.token);
    assert.equal(credentials().get(minted.credential.id)?.lastUsedAt, start);
    const stored = () => h.store.credentials.all()[0].lastUsedAt;
    assert.equal(stored(), null, 'not written on the verify path');
    h.clock.advance(1_000);
    credentials().verify(minted.token);
    h.clock.advance(LAST_USED_FLUSH_MS);
    assert.equal(stored(), start + 1_000, 'written by the minute flush');
  });

  it('an agent credential acts only as its agent; the operator as anyone', () => {
    const alpha = principal(credentials().verify(credentials().mintAgent('alpha', 'test', '', ctx).token));
    assert.equal(credentials().refusal(alpha, 'alpha', false), undefined);
    assert.equal(
      credentials().refusal(alpha, 'beta', true),
      "this credential acts as agent 'alpha'; the call acts as 'beta'",
    );
    assert.equal(credentials().refusal(OPERATOR, 'beta', false), undefined);
  });

  it('an enrolment credential registers ids nobody holds, owns what it enrolled, and gets each agent a credential once', () => {
    const enrolment = principal(
      credentials().verify(credentials().mintEnrolment('coordinator', 'terminals', ctx).token),
    );
    h.register('byOperator');
    credentials().mintAgent('reserved', 'editor:test', '', ctx);
    assert.match(String(credentials().refusal(enrolment, 'byOperator', true)), /is registered with another credential/);
    assert.match(String(credentials().refusal(enrolment, 'reserved', true)), /has a credential of its own/);
    assert.match(String(credentials().refusal(enrolment, 'fresh', false)), /register 'fresh' first/);
    assert.equal(credentials().refusal(enrolment, 'fresh', true), undefined);
    h.register('fresh');
    const minted = credentials().registered(enrolment, 'fresh', ctx);
    assert.equal(minted?.credential.agentId, 'fresh');
    assert.equal(minted?.credential.createdBy, `enrolment:${(enrolment as { credentialId: string }).credentialId}`);
    assert.equal(credentials().registered(enrolment, 'fresh', ctx), undefined, 'minted once');
    assert.equal(credentials().registered(OPERATOR, 'other', ctx), undefined, 'the operator enrols nothing');
    assert.equal(credentials().refusal(enrolment, 'fresh', false), undefined);
    h.restart();
    assert.equal(credentials().refusal(enrolment, 'fresh', false), undefined, 'ownership is durable');
    const next = principal(credentials().verify(credentials().mintEnrolment('editor:test', 'rotated', ctx).token));
    assert.equal(
      credentials().get((enrolment as { credentialId: string }).credentialId)?.revokedAt !== null,
      true,
      'the previous one is revoked',
    );
    assert.equal(
      credentials()
        .list()
        .filter((c) => c.kind === 'enrolment' && c.revokedAt === null).length,
      1,
      'one active enrolment credential',
    );
    assert.match(String(credentials().refusal(next, 'fresh', true)), /enrolled by another one/);
  });

  it('keeps the enrolment token in a 0600 file and mints a new one when the file no longer matches', () => {
    const token = loadOrMintEnrolment(h.dataDir, credentials(), ctx);
    const file = path.join(h.dataDir, ENROLMENT_FILE_NAME);
    if (process.platform !== 'win32') assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(loadOrMintEnrolment(h.dataDir, credentials(), ctx), token);
    credentials().revoke(credentials().activeEnrolment()!.id, 'test', ctx);
    const next = loadOrMintEnrolment(h.dataDir, credentials(), ctx);
    assert.notEqual(next, token);
    assert.equal(fs.readFileSync(file, 'utf8').trim(), next);
  });

  it('offers mint, list, revoke and changes through the editor API, as plain data', async () => {
    const api = new InProcessCoordinatorApi(h.coordinator);
    const seen: CredentialsChange[] = [];
    api.onDidChangeCredentials((change) => seen.push(change));
    const minted = await api.mintAgentCredential('alpha', 'editor:test');
    assert.deepEqual(structuredClone(minted), minted);
    assert.equal((await api.credentials())[0].id, minted.credential.id);
    const revoked = await api.revokeCredential(minted.credential.id, 'editor:test');
    assert.notEqual(revoked.revokedAt, null);
    assert.deepEqual(
      seen.map((c) => c.kind),
      ['minted', 'revoked'],
    );
    await assert.rejects(
      api.mintAgentCredential('bad id', 'x'),
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'invalid',
    );
    await assert.rejects(
      api.revokeCredential('nope', 'x'),
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'not_found',
    );
    api.dispose();
  });
});
