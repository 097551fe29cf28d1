import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Credentials } from '../credentials/credentials';
import { Emitter, type Disposable, type Event } from '../events';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import { validateDescriptor } from '../registry/descriptor';
import type { Registry } from '../registry/registry';
import type { RecipientAckTimeouts } from '../router/model';
import type { WorkspaceWorktrees, WorktreeBindings } from '../worktree/bindings';
import { BindingRequestError, BindingStateError, homeWorktreeIdOf } from '../worktree/bindings';
import type { Git } from '../worktree/git';
import { checkWorktreeId, InvalidWorktreeIdError } from '../worktree/snapshots';
import { profileAvailability, systemLookup, type ProgramLookup } from './availability';
import { BUILTIN_PROFILES } from './builtinProfiles';
import type {
  BridgeEndpoints,
  LaunchesChange,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  LaunchStorage,
  ProfileAvailability,
  ProfileIssue,
} from './model';
import { mergeProfiles, parseSettingsProfiles, readRepositoryProfiles } from './profiles';
import { launchCommand, needsEndpoints, plannedFiles, WiringError, writeWiring, type WiringContext } from './wiring';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** A launch refused or not found: `kind` is the editor's error code, the message is for the person. */
export class LaunchError extends SwarmError {
  constructor(
    readonly kind: 'not_found' | 'invalid' | 'refused',
    message: string,
    readonly code: string = kind === 'not_found'
      ? 'NOT_FOUND'
      : kind === 'invalid'
        ? 'VALIDATION_ERROR'
        : 'FAILED_PRECONDITION',
  ) {
    super(message);
    this.name = 'LaunchError';
  }

  override get errorKind(): ErrorKind {
    return this.kind === 'refused' ? 'precondition' : this.kind;
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}

import { BRIDGED_ACK_TIMEOUT_BOUNDS_MS, DEFAULT_LAUNCHES_OPTIONS, type LaunchesOptions } from './options';

export {
  BRIDGED_ACK_TIMEOUT_BOUNDS_MS,
  DEFAULT_LAUNCHES_OPTIONS,
  INBOX_ACK_TIMEOUT_MINUTES,
  type LaunchesOptions,
} from './options';

export interface LaunchesDeps {
  readonly store: LaunchStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly git: Git;
  /** The registry: the launch registers the agent as RegisterAgent does, moves its lifecycle, records its liveness. */
  readonly registry: Pick<Registry, 'register' | 'get' | 'transition' | 'recordLiveness'>;
  readonly credentials: Pick<Credentials, 'mintAgent' | 'revoke' | 'get'>;
  /** The router: a bridged launched agent's own ACK timeout (LaunchesOptions.bridgedAckTimeoutMs). */
  readonly ackTimeouts: RecipientAckTimeouts;
  readonly bindings: Pick<WorktreeBindings, 'bind' | 'unbind' | 'status' | 'list'>;
  readonly workspace: Pick<WorkspaceWorktrees, 'repositories' | 'worktrees'>;
  /** The worktree setup started when a worktree was made (WorktreeOperations.setupOf): the launch waits for it. */
  readonly setupOf: (repoId: string, worktreeId: string) => Promise<unknown> | undefined;
  /** Where commands are looked up (tests inject a PATH); default this process's. */
  readonly lookup?: ProgramLookup;
  /** The environment `${env:NAME}` in a profile's env reads, and git's XDG default; default this process's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Whether an agent launched with `profile` reaches its inbox through the MCP bridge (read_inbox): its profile wires the
 * bridge, or it is a custom command, which gets SW4RM_MCP_URL and SW4RM_TOKEN and may call the bridge on its own. A known
 * CLI whose profile has no bridge (Aider) cannot read its inbox at all: its messages keep the RFC's 10 s. A session
 * agent's messages wait for the end of its running turn (or its read_inbox): bridged too.
 */
export function pullsInbox(profile: Pick<LaunchProfile, 'bridge' | 'cli' | 'mode'>): boolean {
  return profile.mode === 'session' || profile.bridge.kind !== 'none' || profile.cli === 'custom';
}

const ACTOR = 'launch';
/** A launch, a relaunch and the record they write: at most one at a time per agent id. */
type Attempt = { readonly relaunch: boolean; readonly previous: LaunchRecord | undefined };

/**
 * Managed agents launched from the editor (README, "Launch profiles"): `launch` checks the profile (installed?), the
 * agent id (RegisterAgent's rules; not an agent this launch area does not manage), binds the agent's worktree (a new
 * one from a branch, or an existing one not bound to another agent; the worktree setup runs first), writes the wiring
 * into it (wiring.ts), registers the agent as RegisterAgent does and mints its agent credential, and answers the
 * LaunchPlan the editor starts the process with. Every change of a LaunchRecord and its `launch.*` event are one
 * transaction; the registration, the credential and the prepared record are the last step and one transaction, so a
 * failure before it (the worktree, the wiring) leaves nothing registered or minted: it releases the binding it made,
 * revokes the agent's earlier credential and leaves a FAILED record with the reason. `started` / `exited` follow the process (RUNNING; EXITED with the
 * registry lifecycle moved to SHUTTING_DOWN without a grace timer: the agent is gone, its history kept, never
 * deregistered). While RUNNING the agent's liveness is recorded every `livenessIntervalMs` on the Clock: the process
 * running in its terminal is the sign of life of a CLI agent, which has no heartbeat of its own.
 */
export class Launches implements Disposable {
  private readonly changed = new Emitter<LaunchesChange>();
  readonly onDidChange: Event<LaunchesChange> = this.changed.event;
  private endpoints: BridgeEndpoints | undefined;
  private settings: { profiles: LaunchProfile[]; issues: ProfileIssue[] } = { profiles: [], issues: [] };
  /** Agent credential tokens minted by this process (a relaunch reuses one while active); never stored. */
  private readonly tokens = new Map<string, { credentialId: string; token: string }>();
  private readonly inFlight = new Set<string>();
  private readonly liveness: Disposable;
  private disposed = false;

  constructor(
    private readonly deps: LaunchesDeps,
    private readonly options: LaunchesOptions = DEFAULT_LAUNCHES_OPTIONS,
  ) {
    const { min, max } = BRIDGED_ACK_TIMEOUT_BOUNDS_MS;
    if (!(
      Number.isInteger(options.bridgedAckTimeoutMs) &&
      options.bridgedAckTimeoutMs >= min &&
      options.bridgedAckTimeoutMs <= max
    )) {
      throw new RangeError(
        `bridgedAckTimeoutMs must be a whole number of ms from ${min} to ${max}, not ${options.bridgedAckTimeoutMs}`,
      );
    }
    // After a restart: every launched agent's ACK timeout as its record says, before any message reaches it.
    for (const record of this.list()) this.applyAckTimeout(record);
    this.liveness = this.armLiveness();
  }

  // ---------------------------------------------------------------- profiles

  /** Where the bridge listens (the host sets it once its bridge listens; undefined when it stops). */
  setEndpoints(endpoints: BridgeEndpoints | undefined): void {
    this.endpoints = endpoints && {
      ...endpoints,
      stdioCommand: [...endpoints.stdioCommand],
      hookCommand: [...endpoints.hookCommand],
    };
  }

  bridgeEndpoints(): BridgeEndpoints | undefined {
    return this.endpoints;
  }

  /** The `sw4rm.agents.profiles` setting's value; answers its issues. */
  setSettingsProfiles(value: unknown): ProfileIssue[] {
    this.settings = parseSettingsProfiles(value);
    return [...this.settings.issues];
  }

  /** Built in, then the setting's, then each repository's `.sw4rm/agents.json` (read now), with every refusal. */
  profiles(): { profiles: LaunchProfile[]; issues: ProfileIssue[] } {
    const lists: LaunchProfile[][] = [[...BUILTIN_PROFILES], this.settings.profiles];
    const issues: ProfileIssue[] = [...this.settings.issues];
    for (const repository of this.deps.workspace.repositories) {
      if (repository.bare) continue;
      const read = readRepositoryProfiles(repository.path);
      lists.push(read.profiles);
      issues.push(...read.issues);
    }
    // Copies: the built-in profiles are module constants, and callers get plain data.
    return { profiles: JSON.parse(JSON.stringify(mergeProfiles(...lists))) as LaunchProfile[], issues };
  }

  profile(profileId: string): LaunchProfile {
    const profile = this.profiles().profiles.find((p) => p.id === profileId);
    if (!profile)
      throw new LaunchError('not_found', `There is no launch profile '${String(profileId).slice(0, 100)}'.`);
    return profile;
  }

  availability(profileId: string): ProfileAvailability {
    return profileAvailability(this.profile(profileId), this.deps.lookup ?? systemLookup());
  }

  // ---------------------------------------------------------------- records

  /** Every launched agent, newest first. */
  list(): LaunchRecord[] {
    return this.deps.store.launches.list();
  }

  get(agentId: string): LaunchRecord | undefined {
    return this.deps.store.launches.get(agentId);
  }

  // ---------------------------------------------------------------- launch, relaunch

  /** SW4RM: Launch Agent… (see the class comment). Rejects LaunchError; a failure after the checks leaves a FAILED record. */
  async launch(request: LaunchRequest, by: string, ctx: CallContext): Promise<LaunchPlan> {
    this.checkOpen();
    const profile = this.profile(request.profileId);
    const repository = this.deps.workspace.repositories.find((r) => r.id === request.repoId);
    if (!repository) {
      const known = this.deps.workspace.repositories.map((r) => r.id);
      throw new LaunchError(
        'not_found',
        `There is no repository '${String(request.repoId).slice(0, 100)}' in the workspace${known.length ? ` (known: ${known.join(', ')})` : ''}.`,
      );
    }
    this.checkRunnable(profile);
    const agentId =
      request.agentId === undefined || request.agentId === '' ? this.nextAgentId(profile.id) : request.agentId;
    const verdict = validateDescriptor({ agentId });
    if (!verdict.ok)
      throw new LaunchError('invalid', `The agent id ${verdict.reason.replace(/^VALIDATION_ERROR: /, '')}.`);
    const previous = this.get(agentId);
    if (previous && previous.state !== 'FAILED') {
      throw new LaunchError(
        'refused',
        `Agent '${agentId}' was launched here already (${previous.state}): use Relaunch for it, or choose another id.`,
      );
    }
    if (this.registeredByOthers(agentId, previous)) {
      throw new LaunchError(
        'refused',
        `Agent id '${agentId}' is taken by a registered agent that was not launched from the editor; choose another id.`,
      );
    }
    let worktreeId: string | null = null;
    let base: string | undefined;
    if (profile.needsWorktree) {
      if (request.worktree.kind === 'existing') {
        try {
          worktreeId = checkWorktreeId(request.worktree.worktreeId);
        } catch (err) {
          if (err instanceof InvalidWorktreeIdError) throw new LaunchError('invalid', err.message);
          throw err;
        }
        const owner = this.deps.bindings
          .list()
          .find(
            (b) =>
              b.agentId !== agentId &&
              b.repoId === repository.id &&
              b.homeWorktreeId === worktreeId &&
              (b.state === 'BOUND_HOME' || b.state === 'SWITCH_PENDING' || b.state === 'BOUND_NON_HOME'),
          );
        if (owner)
          throw new LaunchError(
            'refused',
            `Worktree '${worktreeId}' of ${repository.id} is the worktree of agent '${owner.agentId}'; pick another one or a new worktree.`,
            'PERMISSION_DENIED',
          );
      } else {
        worktreeId = homeWorktreeIdOf(agentId);
        base = request.worktree.fromBranch || undefined;
        if (base !== undefined && (base.startsWith('-') || base.includes('\0')))
          throw new LaunchError('invalid', `'${base.slice(0, 80)}' is not a branch.`);
      }
    }
    if (this.inFlight.has(agentId)) throw new LaunchError('refused', `Agent '${agentId}' is being launched already.`);
    this.inFlight.add(agentId);
    try {
      if (request.worktree.kind === 'existing' && worktreeId !== null) {
        const worktrees = this.deps.workspace.worktrees(repository.id);
        if (!worktrees || !(await worktrees.get(worktreeId)))
          throw new LaunchError('not_found', `There is no worktree '${worktreeId}' in ${repository.id}.`);
      }
      return await this.prepare(
        { relaunch: false, previous },
        agentId,
        profile,
        repository.id,
        repository.path,
        worktreeId,
        base,
        by,
        ctx,
      );
    } finally {
      this.inFlight.delete(agentId);
    }
  }

  /**
   * Relaunch: the same agent and worktree again with the current profile of its id (refused when no profile has that
   * id any more), the wiring rewritten, its credential reused when this process still holds it and it is active, else
   * a new one minted and the old one revoked.
   */
  async relaunch(agentId: string, by: string, ctx: CallContext): Promise<LaunchPlan> {
    this.checkOpen();
    const previous = this.get(agentId);
    if (!previous)
      throw new LaunchError('not_found', `Agent '${String(agentId).slice(0, 100)}' was not launched from the editor.`);
    if (previous.state === 'RUNNING')
      throw new LaunchError('refused', `Agent '${agentId}' is running; close its terminal first.`);
    const profile = this.profiles().profiles.find((p) => p.id === previous.profileId);
    if (!profile)
      throw new LaunchError(
        'not_found',
        `The launch profile '${previous.profileId}' of agent '${agentId}' is gone (it was ${previous.profileName}); add it again to relaunch the agent.`,
      );
    const repository = this.deps.workspace.repositories.find((r) => r.id === previous.repoId);
    if (!repository)
      throw new LaunchError(
        'not_found',
        `The repository '${previous.repoId}' of agent '${agentId}' is no longer in the workspace.`,
      );
    this.checkRunnable(profile);
    if (this.inFlight.has(agentId)) throw new LaunchError('refused', `Agent '${agentId}' is being launched already.`);
    this.inFlight.add(agentId);
    try {
      const worktreeId = profile.needsWorktree ? (previous.worktreeId ?? homeWorktreeIdOf(agentId)) : null;
      return await this.prepare(
        { relaunch: true, previous },
        agentId,
        profile,
        repository.id,
        repository.path,
        worktreeId,
        undefined,
        by,
        ctx,
      );
    } finally {
      this.inFlight.delete(agentId);
    }
  }

  /** The editor opened its terminal and the process runs: RUNNING (the registry INITIALIZING → RUNNABLE). Idempotent. */
  started(agentId: string, ctx: CallContext): LaunchRecord {
    this.checkOpen();
    const record = this.must(agentId);
    if (record.state === 'RUNNING') return record;
    if (record.state !== 'STARTING')
      throw new LaunchError('refused', `Agent '${agentId}' is ${record.state}, not starting: relaunch it.`);
    const next: LaunchRecord = { ...record, state: 'RUNNING', updatedAt: this.deps.clock.now() };
    this.deps.store.transaction(() => {
      this.write(next, 'launch.running', ctx, { from: record.state, to: 'RUNNING' });
      const agent = this.deps.registry.get(agentId);
      if (agent?.state === 'INITIALIZING') {
        this.deps.registry.transition(
          agentId,
          'RUNNABLE',
          { by: 'operator', reason: "its process started in the editor's terminal" },
          ctx,
        );
      }
    });
    this.changed.fire({ kind: 'state', record: next });
    return next;
  }

  /**
   * Its process ended or its terminal closed: EXITED with the exit code, and the registry lifecycle to SHUTTING_DOWN
   * (allowed from every state) without a grace timer, so the agent is never deregistered for it. Idempotent.
   */
  exited(agentId: string, exitCode: number | null, by: string, ctx: CallContext): LaunchRecord {
    this.checkOpen();
    const record = this.must(agentId);
    if (record.state === 'EXITED' || record.state === 'FAILED') return record;
    const code = exitCode === null || !Number.isFinite(exitCode) ? null : Math.trunc(exitCode);
    const next: LaunchRecord = { ...record, state: 'EXITED', exitCode: code, updatedAt: this.deps.clock.now() };
    this.deps.store.transaction(() => {
      this.write(next, 'launch.exited', ctx, { from: record.state, to: 'EXITED', exit_code: code, by });
      const agent = this.deps.registry.get(agentId);
      if (agent && agent.state !== 'SHUTTING_DOWN') {
        this.deps.registry.transition(
          agentId,
          'SHUTTING_DOWN',
          {
            by: 'shutdown',
            reason: `its process ${code === null ? 'ended' : `exited with code ${code}`} (launched from the editor)`,
            timeoutMs: 0,
          },
          ctx,
        );
      }
    });
    this.changed.fire({ kind: 'state', record: next });
    return next;
  }

  dispose(): void {
    this.disposed = true;
    this.liveness.dispose();
    this.changed.dispose();
    this.tokens.clear();
  }

  // ---------------------------------------------------------------- inside

  private checkOpen(): void {
    if (this.disposed) throw new LaunchError('refused', 'The coordinator is stopping.');
  }

  private must(agentId: string): LaunchRecord {
    const record = this.get(agentId);
    if (!record)
      throw new LaunchError('not_found', `Agent '${String(agentId).slice(0, 100)}' was not launched from the editor.`);
    return record;
  }

  /** Installed, and the bridge listening when the profile needs it. */
  private checkRunnable(profile: LaunchProfile): void {
    const availability = profileAvailability(profile, this.deps.lookup ?? systemLookup());
    if (availability.problem !== null) throw new LaunchError('refused', availability.problem);
    if (needsEndpoints(profile) && !this.endpoints) {
      throw new LaunchError(
        'refused',
        `The MCP bridge is not listening, and profile '${profile.id}' needs it (its MCP configuration or approval hook); start the coordinator with the bridge on (sw4rm.bridge.port).`,
      );
    }
  }

  /**
   * Whether `agentId` is registered by someone else than this launch area: registered with no launch record, or
   * registered anew after its launch failed (a failed first launch deregistered it).
   */
  private registeredByOthers(agentId: string, previous: LaunchRecord | undefined): boolean {
    const agent = this.deps.registry.get(agentId);
    if (!agent) return false;
    if (!previous) return true;
    return previous.state === 'FAILED' && agent.registeredAt >= previous.updatedAt;
  }

  /** `<profile>-<n>` with the smallest n not registered, launched or being launched. */
  private nextAgentId(profileId: string): string {
    for (let n = 1; ; n++) {
      const id = `${profileId}-${n}`;
      if (!this.deps.registry.get(id) && !this.get(id) && !this.inFlight.has(id)) return id;
    }
  }

  private async prepare(
    attempt: Attempt,
    agentId: string,
    profile: LaunchProfile,
    repoId: string,
    repoPath: string,
    worktreeId: string | null,
    base: string | undefined,
    by: string,
    ctx: CallContext,
  ): Promise<LaunchPlan> {
    const now = this.deps.clock.now();
    const { previous } = attempt;
    const starting: LaunchRecord = {
      agentId,
      profileId: profile.id,
      profileName: profile.name,
      cli: profile.cli,
      mode: profile.mode,
      repoId,
      worktreeId,
      cwd: profile.needsWorktree ? (previous?.worktreeId === worktreeId ? (previous?.cwd ?? '') : '') : repoPath,
      credentialId: previous?.credentialId ?? '',
      state: 'STARTING',
      launchedAt: attempt.relaunch && previous ? previous.launchedAt : now,
      updatedAt: now,
      launches: (previous?.launches ?? 0) + 1,
      exitCode: null,
      error: null,
      wroteFiles: previous?.wroteFiles ?? [],
      bridged: pullsInbox(profile),
    };
    this.deps.store.transaction(() =>
      this.write(starting, 'launch.starting', ctx, {
        from: previous?.state ?? null,
        to: 'STARTING',
        profile_id: profile.id,
        repo_id: repoId,
        worktree_id: worktreeId,
        relaunch: attempt.relaunch,
        launches: starting.launches,
        by,
      }),
    );
    this.changed.fire({ kind: attempt.relaunch ? 'state' : 'launched', record: starting });

    let boundNow = false;
    let minted: string | undefined;
    try {
      let cwd = repoPath;
      if (worktreeId !== null) {
        const before = this.deps.bindings.status(agentId);
        let binding;
        try {
          binding = await this.deps.bindings.bind(
            agentId,
            repoId,
            worktreeId,
            ctx,
            undefined,
            base === undefined ? {} : { base },
          );
        } catch (err) {
          if (err instanceof BindingRequestError || err instanceof BindingStateError)
            throw new LaunchError('refused', `The worktree could not be bound: ${err.message}`);
          throw err;
        }
        if (
          binding.state !== 'BOUND_HOME' &&
          binding.state !== 'SWITCH_PENDING' &&
          binding.state !== 'BOUND_NON_HOME'
        ) {
          boundNow = binding.state === 'BIND_FAILED';
          throw new LaunchError(
            'refused',
            `The worktree could not be bound: ${binding.failure?.detail ?? binding.state}`,
          );
        }
        boundNow = before.state === 'UNBOUND' || before.state === 'BIND_FAILED';
        cwd = binding.homePath;
        // The worktree setup (copies, its command) runs before the agent does.
        await this.deps.setupOf(repoId, worktreeId);
      }
      const wiring: WiringContext = {
        agentId,
        profile,
        cwd,
        endpoints: this.endpoints,
        ...(pullsInbox(profile) ? { inboxWaitMs: this.options.bridgedAckTimeoutMs } : {}),
      };
      const command = launchCommand(wiring);
      const wrote = await writeWiring(this.deps.git, cwd, plannedFiles(wiring), this.deps.env ?? process.env);
      if (this.disposed) throw new LaunchError('refused', 'The coordinator is stopping.');

      // Registration, credential and record together: RegisterAgent's rules, now that the agent can start.
      if (!attempt.relaunch && this.registeredByOthers(agentId, previous)) {
        throw new LaunchError(
          'refused',
          `Agent id '${agentId}' was registered by another agent meanwhile; choose another id.`,
        );
      }
      let token: string;
      const ready = this.deps.store.transaction(() => {
        const result = this.deps.registry.register(
          {
            agentId,
            name: agentId,
            description: `Launched from the editor with profile ${profile.id} (${profile.name})`,
            capabilities: profile.capabilities,
            communicationClass: 'STANDARD',
            modalitiesSupported: [],
            reasoningConnectors: [],
          },
          ctx,
        );
        if (!result.accepted)
          throw new LaunchError(
            'invalid',
            `The agent could not be registered: ${result.reason.replace(/^VALIDATION_ERROR: /, '')}`,
          );
        const held = this.tokens.get(agentId);
        const active = held && this.deps.credentials.get(held.credentialId)?.revokedAt === null ? held : undefined;
        let credentialId: string;
        if (active) {
          credentialId = active.credentialId;
          token = active.token;
        } else {
          const fresh = this.deps.credentials.mintAgent(
            agentId,
            by,
            `launched from the editor (profile ${profile.id})`,
            ctx,
          );
          minted = fresh.credential.id;
          credentialId = fresh.credential.id;
          token = fresh.token;
          // The credential of an earlier launch is replaced: after a restart its token is known to nobody.
          const old = previous?.credentialId;
          if (old && old !== credentialId && this.deps.credentials.get(old)?.revokedAt === null) {
            this.deps.credentials.revoke(old, by, ctx);
          }
        }
        const record: LaunchRecord = {
          ...starting,
          cwd,
          credentialId,
          wroteFiles: wrote,
          updatedAt: this.deps.clock.now(),
        };
        this.write(record, 'launch.prepared', ctx, {
          credential_id: credentialId,
          cwd,
          wrote_files: wrote,
          program: command[0],
        });
        return record;
      });
      this.tokens.set(agentId, { credentialId: ready.credentialId, token: token! });
      this.changed.fire({ kind: 'state', record: ready });
      return {
        record: ready,
        mode: profile.mode,
        command,
        cwd,
        env: this.environment(profile, agentId, token!),
        title: `SW4RM: ${agentId} (${profile.name})`,
      };
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      await this.fail(starting, reason, { boundNow, minted }, by, ctx);
      if (err instanceof LaunchError) throw err;
      if (err instanceof WiringError) throw new LaunchError('refused', `${err.message}`);
      throw err;
    }
  }

  /**
   * Rolls back what the failed attempt did (the binding it made; a credential minted in a transaction that then failed
   * is revoked in memory too) and records FAILED with the reason. Nothing was registered: that is the last step.
   */
  private async fail(
    record: LaunchRecord,
    reason: string,
    done: { boundNow: boolean; minted: string | undefined },
    by: string,
    ctx: CallContext,
  ): Promise<void> {
    if (done.boundNow) {
      try {
        await this.deps.bindings.unbind(record.agentId, ctx);
      } catch (err) {
        this.deps.log.internalError(ACTOR, ctx.correlationId, err, {
          agent_id: record.agentId,
          during: 'releasing the binding of a failed launch',
        });
      }
    }
    if (this.disposed) return;
    const failed: LaunchRecord = {
      ...record,
      state: 'FAILED',
      error: reason.slice(0, 2000),
      updatedAt: this.deps.clock.now(),
    };
    try {
      this.deps.store.transaction(() => {
        for (const id of [done.minted, record.credentialId]) {
          if (id && this.deps.credentials.get(id)?.revokedAt === null) this.deps.credentials.revoke(id, by, ctx);
        }
        this.write(failed, 'launch.failed', ctx, {
          from: record.state,
          to: 'FAILED',
          error: failed.error,
          binding_released: done.boundNow,
        });
      });
      this.tokens.delete(record.agentId);
      this.changed.fire({ kind: 'state', record: failed });
    } catch (err) {
      this.deps.log.internalError(ACTOR, ctx.correlationId, err, {
        agent_id: record.agentId,
        during: 'recording a failed launch',
      });
    }
  }

  /** The agent's environment: the profile's (with `${env:NAME}` filled from this process's), then the coordinator's. */
  private environment(profile: LaunchProfile, agentId: string, token: string): Record<string, string> {
    const source = this.deps.env ?? process.env;
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(profile.env)) {
      env[name] = value.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, n: string) => source[n] ?? '');
    }
    env.SW4RM_AGENT_ID = agentId;
    env.SW4RM_TOKEN = token;
    const e = this.endpoints;
    if (e) {
      env.SW4RM_MCP_URL = e.mcpUrl;
      env.SW4RM_HOOK_URL = e.hookUrl;
      env.SW4RM_ADDRESS = e.grpcAddress;
    }
    // ELECTRON_RUN_AS_NODE (stdioCommand / hookCommand under Electron) goes to those commands only: BridgeEndpoints.commandEnv.
    return env;
  }

  /** Stores `record` with its event (inside the caller's transaction), and gives the router its ACK timeout. */
  private write(record: LaunchRecord, eventType: string, ctx: CallContext, details: Record<string, unknown>): void {
    this.deps.store.launches.upsert(record);
    this.applyAckTimeout(record);
    this.deps.log.record({
      correlationId: ctx.correlationId,
      actor: ACTOR,
      eventType,
      level: eventType === 'launch.failed' ? 'WARN' : 'INFO',
      details: { agent_id: record.agentId, state: record.state, ...details },
    });
  }

  /**
   * A bridged agent's messages wait `bridgedAckTimeoutMs` to be RECEIVED (it pulls them with read_inbox), in every
   * state of its record: while it is EXITED they wait for its relaunch, and still time out. Any other agent keeps the
   * RFC's default. A record written before `bridged` existed counts as bridged.
   */
  private applyAckTimeout(record: LaunchRecord): void {
    this.deps.ackTimeouts.setRecipientAckTimeout(
      record.agentId,
      record.bridged !== false ? this.options.bridgedAckTimeoutMs : undefined,
    );
  }

  /** Every RUNNING launched agent counts as present while its process runs. */
  private armLiveness(): Disposable {
    let timer: Disposable | undefined;
    const tick = () => {
      if (this.disposed) return;
      try {
        for (const record of this.list()) {
          if (record.state === 'RUNNING' && this.deps.registry.get(record.agentId)) {
            this.deps.registry.recordLiveness(record.agentId, { correlationId: `launch-liveness:${record.agentId}` });
          }
        }
      } catch (err) {
        this.deps.log.internalError(ACTOR, 'launch-liveness', err);
      }
      timer = this.deps.clock.setTimer(this.options.livenessIntervalMs, tick);
    };
    timer = this.deps.clock.setTimer(this.options.livenessIntervalMs, tick);
    return { dispose: () => timer?.dispose() };
  }
}
