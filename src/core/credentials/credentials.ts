import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import { validateDescriptor } from '../registry/descriptor';
import type { AgentDirectory } from '../registry/model';
import type {
  CredentialInfo,
  CredentialKind,
  CredentialRecord,
  CredentialsChange,
  CredentialsStorage,
  MintedCredential,
  Principal,
} from './model';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** Every agent and enrolment token starts so; the operator token (base64url, no '.') never does. */
export const CREDENTIAL_TOKEN_PREFIX = 'sw4rm.';
/** Bytes of randomness in a secret (base64url: 43 characters). */
const SECRET_BYTES = 32;
/** Last-use times are kept in memory and written at most this often. */
export const LAST_USED_FLUSH_MS = 60_000;
/**
 * Refused calls logged per window at most (`auth.unauthenticated`); beyond that they are counted, and the first
 * event of the next window says how many were not logged, so a peer sending bad tokens cannot flood the event log.
 */
export const UNAUTHENTICATED_EVENTS_PER_WINDOW = 100;
export const UNAUTHENTICATED_WINDOW_MS = 60_000;

export class CredentialError extends SwarmError {
  constructor(
    readonly code: 'invalid' | 'not_found',
    message: string,
  ) {
    super(message);
    this.name = 'CredentialError';
  }

  override get errorKind(): ErrorKind {
    return this.code;
  }

  override get errorCode(): Sw4rmCode {
    return this.code === 'invalid' ? 'VALIDATION_ERROR' : 'NOT_FOUND';
  }
}

/** One credential in memory: the verify path reads only this. */
interface LiveCredential {
  info: CredentialInfo;
  readonly hash: Buffer;
  /** Built once, handed out on every verify (no allocation per call). */
  readonly principal: Principal;
  lastUsedAt: number | null;
}

/** The operator's principal: one object for every operator call. */
export const OPERATOR: Principal = Object.freeze({ kind: 'operator' });

/** `operator`, `agent:<id>`, `enrolment:<id>`: how a principal appears in events, owners and CallContext. */
export function principalName(principal: Principal): string {
  return principal.kind === 'operator' ? 'operator' : `${principal.kind}:${principal.credentialId}`;
}

/**
 * Agent and enrolment credentials (README, "Security model"): minting, verification on every call, revocation,
 * and who owns each agent id. A token is `sw4rm.<credential id>.<secret>`: lookup is by id, in memory, and the
 * secret is compared in constant time with the stored SHA-256. Secrets are never stored or logged.
 */
export class Credentials implements Disposable {
  private readonly byId = new Map<string, LiveCredential>();
  /** agent id → `enrolment:<id>`: the enrolment credential that enrolled it. */
  private readonly owners = new Map<string, string>();
  private readonly used = new Set<LiveCredential>();
  private unauthenticated = { windowStart: -Infinity, logged: 0, suppressed: 0 };
  private readonly changed = new Emitter<CredentialsChange>();
  readonly onDidChange: Event<CredentialsChange> = this.changed.event;
  private flushTimer: Disposable;

  constructor(
    private readonly store: CredentialsStorage,
    private readonly agents: AgentDirectory,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly ids: IdSource,
  ) {
    for (const record of store.credentials.all()) this.remember(record);
    for (const owner of store.credentials.owners()) this.owners.set(owner.agentId, owner.owner);
    this.flushTimer = this.armFlush();
  }

  // ---------------------------------------------------------------- the hot path

  /** The principal a presented credential token stands for, or why it stands for none. O(1): a map lookup and one hash. */
  verify(token: string): Principal | string {
    const dot = token.indexOf('.', CREDENTIAL_TOKEN_PREFIX.length);
    if (!token.startsWith(CREDENTIAL_TOKEN_PREFIX) || dot < 0) return 'malformed credential';
    const live = this.byId.get(token.slice(CREDENTIAL_TOKEN_PREFIX.length, dot));
    if (live === undefined) return 'unknown credential: it was not minted by this coordinator';
    const presented = hash('sha256', token.slice(dot + 1), 'buffer');
    if (!timingSafeEqual(presented, live.hash)) return 'unknown credential: it was not minted by this coordinator';
    if (live.info.revokedAt !== null) return `credential ${live.info.id} was revoked`;
    live.lastUsedAt = this.clock.now();
    this.used.add(live);
    return live.principal;
  }

  /** Whether the credential (by id) is still active: streams opened with it end when it is not. */
  isActive(credentialId: string): boolean {
    const live = this.byId.get(credentialId);
    return live !== undefined && live.info.revokedAt === null;
  }

  /**
   * Why `principal` may not act as `agentId`, or undefined when it may. The operator acts for anyone; an agent
   * credential only as its agent; an enrolment credential as the agents it enrolled, and, when `registering`,
   * as an agent id nobody holds: not enrolled by another enrolment credential, not registered now (by the operator
   * or an agent credential), and without an active credential of its own minted by someone else.
   */
  refusal(principal: Principal, agentId: string, registering: boolean): string | undefined {
    if (principal.kind === 'operator') return undefined;
    if (principal.kind === 'agent') {
      return principal.agentId === agentId
        ? undefined
        : `this credential acts as agent '${principal.agentId}'; the call acts as '${agentId}'`;
    }
    const self = principalName(principal);
    const owner = this.owners.get(agentId);
    if (owner === self) return undefined;
    if (owner !== undefined) {
      return `this enrolment credential acts as the agents it enrolled; agent '${agentId}' was enrolled by another one (${owner})`;
    }
    if (this.hasOwnCredential(agentId, self)) {
      return `this enrolment credential acts as the agents it enrolled; agent '${agentId}' has a credential of its own: use it`;
    }
    if (this.agents.get(agentId) !== undefined) {
      return `this enrolment credential acts as the agents it enrolled; agent '${agentId}' is registered with another credential`;
    }
    return registering
      ? undefined
      : `this enrolment credential acts as the agents it enrolled; register '${agentId}' first`;
  }

  /** Records a refused call: `auth.permission_denied` (WARN) with the RPC, the credential and the claimed agent. */
  recordDenial(rpc: string, principal: Principal, claimedAgent: string, reason: string, ctx: CallContext): void {
    this.log.record({
      correlationId: ctx.correlationId,
      actor: 'auth',
      eventType: 'auth.permission_denied',
      level: 'WARN',
      details: {
        rpc,
        reason,
        claimed_agent: claimedAgent,
        principal: principal.kind,
        ...(principal.kind === 'operator' ? {} : { credential_id: principal.credentialId }),
      },
    });
  }

  /** Records a call refused before it was authenticated (`auth.unauthenticated`, WARN); never the token itself. */
  recordUnauthenticated(rpc: string, reason: string, ctx: CallContext): void {
    const now = this.clock.now();
    const window = this.unauthenticated;
    if (now - window.windowStart >= UNAUTHENTICATED_WINDOW_MS || now < window.windowStart) {
      this.unauthenticated = { windowStart: now, logged: 0, suppressed: window.suppressed };
    }
    const current = this.unauthenticated;
    if (current.logged >= UNAUTHENTICATED_EVENTS_PER_WINDOW) {
      current.suppressed++;
      return;
    }
    current.logged++;
    const notLogged = current.suppressed;
    current.suppressed = 0;
    try {
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'auth',
        eventType: 'auth.unauthenticated',
        level: 'WARN',
        details: { rpc, reason, ...(notLogged > 0 ? { refusals_not_logged_before: notLogged } : {}) },
      });
    } catch (err) {
      // Called from the auth interceptor, where a throw would escape grpc-js: a store that refuses writes is logged elsewhere.
      this.log.internalError('auth', ctx.correlationId, err, { during: 'logging a refused call' });
    }
  }

  /**
   * After a successful registration (in its transaction): an enrolment credential that registers an agent id it does
   * not own yet enrols it (`agent.enrolled`): it owns the id from now on, and the agent gets a credential of its
   * own, minted this once and answered here. Other principals change nothing.
   */
  registered(principal: Principal | undefined, agentId: string, ctx: CallContext): MintedCredential | undefined {
    if (principal?.kind !== 'enrolment' || this.owners.has(agentId)) return undefined;
    const owner = principalName(principal);
    return this.store.transaction(() => {
      this.store.credentials.putOwner({ agentId, owner, since: this.clock.now() });
      this.owners.set(agentId, owner);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'auth',
        eventType: 'agent.enrolled',
        details: { agent_id: agentId, credential_id: principal.credentialId },
      });
      return this.mint('agent', agentId, owner, `enrolled by ${owner}`, ctx);
    });
  }

  // ---------------------------------------------------------------- minting, listing, revoking

  /** Mints a credential bound to `agentId` (registered or not yet). The token is in the answer this once. */
  mintAgent(agentId: string, by: string, label: string, ctx: CallContext): MintedCredential {
    const verdict = validateDescriptor({ agentId });
    if (!verdict.ok) throw new CredentialError('invalid', verdict.reason.replace(/^VALIDATION_ERROR: /, ''));
    return this.store.transaction(() => this.mint('agent', agentId, by, label, ctx));
  }

  /** Mints the data folder's enrolment credential, revoking any other active one (rotation). */
  mintEnrolment(by: string, label: string, ctx: CallContext): MintedCredential {
    return this.store.transaction(() => {
      for (const live of [...this.byId.values()]) {
        if (live.info.kind === 'enrolment' && live.info.revokedAt === null) this.revoke(live.info.id, by, ctx);
      }
      return this.mint('enrolment', null, by, label, ctx);
    });
  }

  /** The active enrolment credential's id, if there is one. */
  activeEnrolment(): CredentialInfo | undefined {
    for (const live of this.byId.values())
      if (live.info.kind === 'enrolment' && live.info.revokedAt === null) return this.info(live);
    return undefined;
  }

  /** Revokes a credential: calls with it are refused from then on. Revoking a revoked one changes nothing. */
  revoke(credentialId: string, by: string, ctx: CallContext): CredentialInfo {
    const live = this.byId.get(credentialId);
    if (live === undefined) throw new CredentialError('not_found', `no credential '${credentialId}'`);
    if (live.info.revokedAt !== null) return this.info(live);
    this.store.transaction(() => {
      const at = this.clock.now();
      this.store.credentials.revoke(credentialId, at);
      live.info = { ...live.info, revokedAt: at };
      this.log.record({
        correlationId: ctx.correlationId,
        actor: ctx.principal ?? by,
        eventType: 'credential.revoked',
        details: { credential_id: credentialId, kind: live.info.kind, agent_id: live.info.agentId, by },
      });
    });
    const info = this.info(live);
    this.changed.fire({ kind: 'revoked', credential: info });
    return info;
  }

  /** Every credential, revoked ones included, newest first; never a secret. */
  list(): CredentialInfo[] {
    return [...this.byId.values()].reverse().map((live) => this.info(live));
  }

  get(credentialId: string): CredentialInfo | undefined {
    const live = this.byId.get(credentialId);
    return live && this.info(live);
  }

  /** The enrolment credential (`enrolment:<id>`) that enrolled an agent id, if one did. */
  ownerOf(agentId: string): string | undefined {
    return this.owners.get(agentId);
  }

  /** Writes the last-use times gathered in memory (every minute, and when the coordinator stops). */
  flush(): void {
    if (this.used.size === 0) return;
    const uses: Array<[string, number]> = [];
    for (const live of this.used) if (live.lastUsedAt !== null) uses.push([live.info.id, live.lastUsedAt]);
    this.used.clear();
    this.store.transaction(() => this.store.credentials.touch(uses));
  }

  dispose(): void {
    this.flushTimer.dispose();
    try {
      this.flush();
    } catch (err) {
      this.log.internalError('auth', this.ids.uuid(), err);
    }
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- inside

  private mint(
    kind: CredentialKind,
    agentId: string | null,
    by: string,
    label: string,
    ctx: CallContext,
  ): MintedCredential {
    const id = this.ids.uuid();
    const secret = randomBytes(SECRET_BYTES).toString('base64url');
    const record: CredentialRecord = {
      id,
      kind,
      agentId,
      label: label.slice(0, 200),
      createdAt: this.clock.now(),
      createdBy: by,
      revokedAt: null,
      lastUsedAt: null,
      secretHash: hash('sha256', secret, 'buffer'),
    };
    this.store.credentials.insert(record);
    const live = this.remember(record);
    this.log.record({
      correlationId: ctx.correlationId,
      actor: ctx.principal ?? by,
      eventType: 'credential.minted',
      details: { credential_id: id, kind, agent_id: agentId, label: record.label, by },
    });
    const credential = this.info(live);
    this.changed.fire({ kind: 'minted', credential });
    return { credential, token: `${CREDENTIAL_TOKEN_PREFIX}${id}.${secret}` };
  }

  private remember(record: CredentialRecord): LiveCredential {
    const { secretHash, ...info } = record;
    const principal: Principal =
      record.kind === 'agent'
        ? Object.freeze({ kind: 'agent', credentialId: record.id, agentId: record.agentId ?? '' })
        : Object.freeze({ kind: 'enrolment', credentialId: record.id });
    const live: LiveCredential = { info, hash: secretHash, principal, lastUsedAt: record.lastUsedAt };
    this.byId.set(record.id, live);
    return live;
  }

  private info(live: LiveCredential): CredentialInfo {
    return { ...live.info, lastUsedAt: live.lastUsedAt };
  }

  /** An active agent credential for `agentId` that was not minted by `exceptBy`. */
  private hasOwnCredential(agentId: string, exceptBy: string): boolean {
    for (const live of this.byId.values()) {
      const { info } = live;
      if (info.kind === 'agent' && info.agentId === agentId && info.revokedAt === null && info.createdBy !== exceptBy)
        return true;
    }
    return false;
  }

  private armFlush(): Disposable {
    return this.clock.setTimer(LAST_USED_FLUSH_MS, () => {
      try {
        this.flush();
      } catch (err) {
        this.log.internalError('auth', this.ids.uuid(), err);
      }
      this.flushTimer = this.armFlush();
    });
  }
}
