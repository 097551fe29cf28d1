import picomatch from 'picomatch';
import { applyEdits, boundedDiff, coarseDiff } from '../boundedDiff';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { HitlInvocation, ReasonType } from '../hitl/model';
import { HitlRequestError, parseInvocationRequest } from '../hitl/request';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import { Confinement, ConfinementError } from '../worktree/confinement';
import type { WorktreeLocator } from '../worktree/model';
import type { RequestPermissionRequest } from '@agentclientprotocol/sdk' with { 'resolution-mode': 'import' };
import { permissionOutcome, toolUseOfPermission } from './acpPermissions';
import { formatAnswer, parseHookInput } from './cliHooks';
import type { HookAnswer, HookCli, HookVerdict, PathPlace, PermissionAnswer, ToolRule, ToolUse } from './model';
import { compileRules, evaluate, placeOfAll, type CompiledRule } from './rules';
import { placesOf, relativeInside } from './paths';

/** The HITL component name (origin `internal`) of the invocations opened for tool uses. */
export const TOOL_APPROVAL_COMPONENT = 'tool_approval';
const ACTOR = 'tool_approval';

export interface ToolApprovalOptions {
  /** The longest a hook waits for a person (then: "ask", the question withdrawn); the HITL policy's deadline may end it sooner. Default 600 s. */
  readonly maxWaitMs: number;
  /** The current file read for a diff: at most this many bytes (larger files: no diff, said so). Default 1 MiB. */
  readonly maxFileBytes: number;
  /** The diff shown in the invocation: at most this many characters (cut, said so). Default 64 KiB. */
  readonly maxDiffChars: number;
  /** The tool's arguments shown in the invocation's facts: at most this many characters of JSON. Default 16 KiB. */
  readonly maxInputChars: number;
}

export const DEFAULT_TOOL_APPROVAL_OPTIONS: ToolApprovalOptions = {
  maxWaitMs: 600_000,
  maxFileBytes: 1024 * 1024,
  maxDiffChars: 64 * 1024,
  maxInputChars: 16 * 1024,
};

export interface ToolApprovalDeps {
  readonly hitl: Pick<HitlService, 'open' | 'whenSettled' | 'cancel' | 'get' | 'listOfComponent'>;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly locator: WorktreeLocator;
  readonly ids: IdSource;
}

/**
 * Tool approvals (README, "Approvals for CLI agents"): a CLI's hook input → a ToolUse → the rules → allow / deny at
 * once (one `tool_approval.decided` event), or a HITL invocation the editor's approval panel decides:
 *
 * - reason type TOOL_PRIVILEGE_ESCALATION for shell and web tools and anything naming a path outside the worktree
 *   (what reaches beyond the agent's sandbox), SECURITY_APPROVAL for the rest (file writes and edits inside it, MCP
 *   and other tools);
 * - the context carries the tool, its arguments and, for writes and edits, a unified diff of the current file (read
 *   through the worktree's Confinement) against the new content;
 * - a PERSON's approve → allow; deny → deny with their rationale; modify → deny whose reason carries the person's
 *   rationale and edited arguments, so that the agent retries with them (the CLIs cannot all take new arguments);
 *   defer → ask. An auto rule of the HITL policy decides like a person would, and says so.
 * - anything that is not a decision — a deadline or no-operator fallback (RFC §15.4), a cancellation, the 600 s cap,
 *   the hook's request closing — answers "ask": the CLI asks its own user; never a deny presented as a person's.
 *
 * An agent without a worktree: its paths are neither inside nor outside (rules.ts), so path rules do not apply and
 * such tool uses are asked in the editor.
 */
export class ToolApprovals {
  private readonly options: ToolApprovalOptions;
  private userRules: CompiledRule[] = [];

  constructor(
    private readonly deps: ToolApprovalDeps,
    options: Partial<ToolApprovalOptions> = {},
    rules: readonly ToolRule[] = [],
  ) {
    this.options = { ...DEFAULT_TOOL_APPROVAL_OPTIONS, ...options };
    this.userRules = compileRules(rules);
  }

  /** Replaces the user's rules (already checked by parseToolRules; they come before the built-in ones), logged once. */
  setRules(rules: readonly ToolRule[], by: string): void {
    const before = JSON.stringify(this.rules);
    this.userRules = compileRules(rules);
    if (JSON.stringify(this.rules) === before) return;
    this.deps.log.record({
      correlationId: this.deps.ids.uuid(),
      actor: by,
      eventType: 'tool_approval.rules_set',
      details: { rules: this.rules.length, names: this.rules.slice(0, 50).map((r, i) => r.name ?? `toolRules[${i}]`) },
    });
  }

  /**
   * After a restart: a pending tool-use question has nobody waiting for it (the hook's HTTP request ended with the
   * previous process), so it is withdrawn — a cancellation, not a denial; the CLI asked its own user already.
   */
  restore(ctx: CallContext): void {
    for (const invocation of this.deps.hitl.listOfComponent(TOOL_APPROVAL_COMPONENT)) {
      if (invocation.state === 'pending') this.withdraw(invocation.id, 'restart', ctx);
    }
  }

  get rules(): readonly ToolRule[] {
    return this.userRules.map((r) => r.rule);
  }

  /**
   * Decides one tool use for `agentId` (the authenticated caller). A hook input that cannot be read throws
   * HookInputError (VALIDATION_ERROR). Resolves with the answer in the CLI's words.
   */
  async decide(
    cli: HookCli,
    hookInput: unknown,
    agentId: string,
    ctx: CallContext,
    signal?: AbortSignal,
  ): Promise<HookAnswer> {
    return this.decideUse(parseHookInput(cli, hookInput), agentId, ctx, signal);
  }

  /**
   * An ACP agent's `session/request_permission` (agent sessions): read as a tool use (acpPermissions.ts), decided as a
   * hook's is, answered with the option the agent offered for that decision. Nobody deciding never selects an allow.
   */
  async decidePermission(
    request: RequestPermissionRequest,
    agentId: string,
    ctx: CallContext,
    signal?: AbortSignal,
  ): Promise<PermissionAnswer> {
    const answer = await this.decideUse(toolUseOfPermission(request.toolCall), agentId, ctx, signal);
    return {
      outcome: permissionOutcome(answer.decision, request.options),
      decidedBy: answer.decidedBy,
      ...(answer.invocationId === undefined ? {} : { invocationId: answer.invocationId }),
    };
  }

  /**
   * The same decision for a tool use already read (an ACP agent's permission request, sessions/permissions.ts): the
   * answer is in the words of `use.cli`.
   */
  async decideUse(use: ToolUse, agentId: string, ctx: CallContext, signal?: AbortSignal): Promise<HookAnswer> {
    const cli = use.cli;
    const root = this.deps.locator.worktreePathOf(agentId);
    // Without a worktree even a tool naming no path (a search of "here") has no known place.
    const places =
      root === undefined && use.paths.length === 0 ? ['unknown' as const] : await placesOf(root, use.paths);
    const guarded = root === undefined ? undefined : await guardedWiringFile(root, use);
    const outcome =
      guarded !== undefined
        ? {
            action: 'ask' as const,
            rule: 'builtin:guard-wiring',
            reason: `${use.toolName} ${guarded}: changes the agent's own approval or bridge wiring (always asked)`,
          }
        : evaluate(use, places, this.userRules);
    if (outcome.action !== 'ask') {
      const answer = formatAnswer(cli, { decision: outcome.action, reason: outcome.reason }, `rule:${outcome.rule}`);
      this.record(ctx, 'tool_approval.decided', agentId, use, places, answer, { rule: outcome.rule });
      return answer;
    }
    let invocation: HitlInvocation;
    try {
      const request = await this.request(use, places, agentId, root, outcome.rule, ctx);
      invocation = this.deps.hitl.open(
        request,
        { kind: 'internal', component: TOOL_APPROVAL_COMPONENT },
        ctx,
      ).invocation;
    } catch (err) {
      if (!(err instanceof HitlRequestError)) throw err;
      const answer = formatAnswer(
        cli,
        { decision: 'ask', reason: `Could not ask in the editor (${err.code}: ${err.message})` },
        'hitl_refused',
      );
      this.record(
        ctx,
        'tool_approval.answered',
        agentId,
        use,
        places,
        answer,
        { rule: outcome.rule, refused: err.code },
        'WARN',
      );
      return answer;
    }
    const settled = await this.wait(invocation, ctx, signal);
    const verdict: HookVerdict & { by: string } =
      settled === 'timeout'
        ? {
            decision: 'ask',
            reason: `Nobody decided in the SW4RM approvals panel within ${Math.round(this.options.maxWaitMs / 1000)} s`,
            by: 'timeout',
          }
        : settled === 'aborted'
          ? { decision: 'ask', reason: 'The hook stopped waiting before anyone decided', by: 'aborted' }
          : verdictOf(settled);
    const answer = formatAnswer(cli, verdict, verdict.by, invocation.id);
    this.record(ctx, 'tool_approval.answered', agentId, use, places, answer, {
      rule: outcome.rule,
      invocation_id: invocation.id,
      hitl_state: settled === 'timeout' || settled === 'aborted' ? settled : settled.state,
    });
    return answer;
  }

  /** Waits for the invocation to settle, at most maxWaitMs (Clock) and while `signal` is not aborted; withdraws it otherwise. */
  private wait(
    invocation: HitlInvocation,
    ctx: CallContext,
    signal?: AbortSignal,
  ): Promise<HitlInvocation | 'timeout' | 'aborted'> {
    return new Promise((resolve, reject) => {
      let done = false;
      let timer: Disposable | undefined;
      const finish = (result: HitlInvocation | 'timeout' | 'aborted'): void => {
        if (done) return;
        done = true;
        timer?.dispose();
        signal?.removeEventListener('abort', onAbort);
        if (result === 'timeout' || result === 'aborted') this.withdraw(invocation.id, result, ctx);
        resolve(result);
      };
      const onAbort = (): void => finish('aborted');
      timer = this.deps.clock.setTimer(this.options.maxWaitMs, () => finish('timeout'));
      if (signal?.aborted) {
        finish('aborted');
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.deps.hitl.whenSettled(invocation.id).then(finish, (err) => {
        if (done) return;
        done = true;
        timer?.dispose();
        signal?.removeEventListener('abort', onAbort);
        reject(err);
      });
    });
  }

  /** A question nobody will wait for any more leaves the panel: cancelled (recorded as a cancellation, not a denial). */
  private withdraw(id: string, why: 'timeout' | 'aborted' | 'restart', ctx: CallContext): void {
    if (this.deps.hitl.get(id)?.state !== 'pending') return;
    try {
      this.deps.hitl.cancel(
        id,
        ACTOR,
        why === 'timeout'
          ? `the agent's hook stopped waiting after ${Math.round(this.options.maxWaitMs / 1000)} s and asked the CLI's own user`
          : why === 'restart'
            ? "the coordinator restarted; the agent's hook is no longer waiting"
            : "the agent's hook request closed before anyone decided",
        ctx,
      );
    } catch (err) {
      this.deps.log.internalError(ACTOR, ctx.correlationId, err, { invocation_id: id, during: 'withdraw' });
    }
  }

  private async request(
    use: ToolUse,
    places: readonly PathPlace[],
    agentId: string,
    root: string | undefined,
    rule: string,
    ctx: CallContext,
  ) {
    const place = placeOfAll(places);
    const escalation = use.kind === 'shell' || use.kind === 'web' || place === 'outside';
    const reasonType: ReasonType = escalation ? 'TOOL_PRIVILEGE_ESCALATION' : 'SECURITY_APPROVAL';
    const where = this.deps.locator.placeOf(agentId);
    const inputJson = JSON.stringify(use.input);
    const diffs =
      root !== undefined
        ? await this.diffs(use, root)
        : { diffs: [], notes: use.edits.length > 0 ? ['The agent has no worktree: no diff.'] : [] };
    const what =
      use.command !== undefined
        ? `\`${use.command.slice(0, 300)}${use.command.length > 300 ? '…' : ''}\``
        : use.paths.length > 0
          ? use.paths.slice(0, 3).join(', ')
          : '';
    const notes = [
      `Asked by rule ${rule}.`,
      ...(place === 'unknown' ? ['The agent has no worktree: where its paths lie is unknown.'] : []),
      ...(place === 'outside' ? ["A path lies outside the agent's worktree."] : []),
      ...diffs.notes,
      'If nobody decides, the CLI asks its own user (this is never taken as a denial).',
    ];
    return parseInvocationRequest(
      {
        reason_type: reasonType,
        subject: { repo_id: where?.repoId ?? '', worktree_id: where?.worktreeId ?? '', task_id: '' },
        summary: `${agentId} (${use.cli}) wants to run ${use.toolName}${what ? ` ${what}` : ''}`.slice(0, 1000),
        facts: {
          operation: 'tool_use',
          cli: use.cli,
          tool: use.toolName,
          kind: use.kind,
          agent_id: agentId,
          ...(use.command !== undefined ? { command: use.command.slice(0, 4000) } : {}),
          paths: use.paths.slice(0, 50).map((p) => p.slice(0, 1000)),
          places: places.slice(0, 50),
          input:
            inputJson.length > this.options.maxInputChars
              ? `${inputJson.slice(0, this.options.maxInputChars)}… (${inputJson.length} characters)`
              : use.input,
          ...(use.toolUseId !== undefined ? { tool_use_id: use.toolUseId.slice(0, 200) } : {}),
          worktree: root ?? null,
          rule,
        },
        ...(diffs.diffs.length > 0 ? { diffs: diffs.diffs } : {}),
        risk_level: escalation ? 'high' : 'medium',
        risk_notes: notes.join(' '),
        proposed_actions: ['approve', 'deny', 'modify'],
      },
      { requester: agentId, correlationId: ctx.correlationId, now: this.deps.clock.now() },
    );
  }

  /** One unified diff per file a write or edit changes: the current content (through Confinement) against the new. */
  private async diffs(use: ToolUse, root: string): Promise<{ diffs: Array<Record<string, unknown>>; notes: string[] }> {
    const diffs: Array<Record<string, unknown>> = [];
    const notes: string[] = [];
    if (use.edits.length === 0) return { diffs, notes };
    let confinement: Confinement | undefined;
    try {
      confinement = await Confinement.forWorktree(root);
    } catch {
      notes.push('The worktree could not be opened: no diff.');
      return { diffs, notes };
    }
    const budget = { left: this.options.maxDiffChars };
    const byPath = new Map<string, (typeof use.edits)[number][]>();
    // Grouped in linear time (a MultiEdit may carry ~100,000 edits of one file in a 4 MiB body).
    for (const edit of use.edits) {
      const list = byPath.get(edit.path);
      if (list === undefined) byPath.set(edit.path, [edit]);
      else list.push(edit);
    }
    for (const [file, edits] of byPath) {
      if (diffs.length >= 10) {
        notes.push(`${byPath.size - 10} more files are not shown.`);
        break;
      }
      const patch = edits.find((e) => e.patch !== undefined)?.patch;
      if (patch !== undefined) {
        if (!diffs.some((d) => d.unified === patch))
          diffs.push({ title: `apply_patch ${file}`, unified: this.cut(patch, notes, budget) });
        continue;
      }
      const relative = await relativeInside(root, file);
      if (relative === undefined) {
        notes.push(`${file}: not inside the worktree, no diff.`);
        continue;
      }
      let before = '';
      let exists = true;
      try {
        before = (await confinement.readFile(relative, { maxBytes: this.options.maxFileBytes })).toString('utf8');
      } catch (err) {
        if (err instanceof ConfinementError && err.reason === 'not_found') exists = false;
        else {
          notes.push(
            `${relative}: the current file could not be read (${err instanceof ConfinementError ? err.message : String(err)}), no diff.`,
          );
          continue;
        }
      }
      const fromName = exists ? `a/${relative}` : '/dev/null';
      const edited = applyEdits(before, exists, edits);
      let diff;
      if (edited.kind === 'too_large') {
        // The approval never waits on a diff too large to compute: shown coarse (sizes of the current file only).
        diff = coarseDiff(
          fromName,
          `b/${relative}`,
          before,
          undefined,
          `${edited.why}, the edited text is not computed`,
        );
      } else {
        if (edited.notFound > 0) notes.push(`${relative}: the text to replace is not in the current file.`);
        diff = boundedDiff(fromName, `b/${relative}`, before, edited.after);
      }
      if (diff.coarse)
        notes.push(
          `${relative}: the diff is coarse (files and sizes only): the change is too large to show line by line.`,
        );
      const unified = diff.unified;
      diffs.push({
        title: `${exists ? use.toolName : `${use.toolName} (new file)`} ${relative}`,
        unified: this.cut(unified, notes, budget),
      });
    }
    return { diffs, notes };
  }

  /** The diffs of one tool use share maxDiffChars (the invocation stays far below the HITL size limit). */
  private cut(text: string, notes: string[], budget: { left: number }): string {
    const allowed = Math.max(0, budget.left);
    budget.left -= Math.min(text.length, allowed);
    if (text.length <= allowed) return text;
    notes.push(
      `A diff is cut at ${allowed} characters (of ${text.length}): the diffs of one tool use show at most ${this.options.maxDiffChars}.`,
    );
    return `${text.slice(0, allowed)}\n… (cut)`;
  }

  private record(
    ctx: CallContext,
    eventType: string,
    agentId: string,
    use: ToolUse,
    places: readonly PathPlace[],
    answer: HookAnswer,
    extra: Record<string, unknown>,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    this.deps.log.record({
      correlationId: ctx.correlationId,
      actor: ACTOR,
      eventType,
      level,
      details: {
        agent_id: agentId,
        principal: ctx.principal ?? null,
        cli: use.cli,
        tool: use.toolName,
        kind: use.kind,
        ...(use.command !== undefined ? { command: use.command.slice(0, 1000) } : {}),
        paths: use.paths.slice(0, 20).map((p) => p.slice(0, 500)),
        places: places.slice(0, 20),
        decision: answer.decision,
        decided_by: answer.decidedBy,
        reason: answer.reason.slice(0, 1000),
        ...extra,
      },
    });
  }
}

/** A settled invocation as the hook's verdict: only a person's (or an auto rule's) decision allows or denies. */
export function verdictOf(invocation: HitlInvocation): HookVerdict & { by: string } {
  const decision = invocation.decision;
  if (
    !decision ||
    invocation.state === 'cancelled' ||
    decision.origin.kind === 'fallback' ||
    decision.origin.kind === 'cancel'
  ) {
    const why =
      decision?.origin.kind === 'fallback'
        ? `nobody decided in the SW4RM approvals panel (${decision.origin.trigger === 'hitl_unavailable' ? 'no operator is attached' : 'the deadline passed'}; fallback ${decision.origin.policy ?? ''} not applied to tool uses)`
        : `the question was withdrawn (${decision?.rationale ?? 'cancelled'})`;
    return {
      decision: 'ask',
      reason: why.charAt(0).toUpperCase() + why.slice(1),
      by: decision?.origin.kind === 'fallback' ? 'fallback' : 'cancelled',
    };
  }
  const who = decision.origin.kind === 'human' ? decision.origin.by : `HITL rule ${decision.origin.rule ?? ''}`.trim();
  const by =
    decision.origin.kind === 'human' ? `person:${decision.origin.by}` : `hitl_rule:${decision.origin.rule ?? ''}`;
  switch (decision.action) {
    case 'approve':
      return { decision: 'allow', reason: `Approved by ${who}: ${decision.rationale}`, by };
    case 'deny':
      return { decision: 'deny', reason: `Denied by ${who}: ${decision.rationale}`, by };
    case 'modify':
      return {
        decision: 'deny',
        reason: `Not run as asked: ${who} wants it changed: ${decision.rationale}. Retry with these arguments: ${JSON.stringify(decision.payload).slice(0, 4000)}`,
        by,
      };
    case 'defer':
      return { decision: 'ask', reason: `${who} deferred the decision to the CLI's user: ${decision.rationale}`, by };
  }
}

/**
 * The files a launch writes to wire an agent's approvals and bridge (src/core/launch/wiring.ts): a write or edit of one
 * is always asked, before the user's rules, so that an agent allowed to write in its worktree cannot quietly remove
 * its own hook. Best effort: a shell command can still change them, and shell commands are matched by text only.
 */
const GUARDED_WIRING = picomatch(
  [
    '.claude/**',
    '.gemini/**',
    '.github/hooks/**',
    '.codex/**',
    '.mcp.json',
    '.sw4rm/**',
    '.vscode/mcp.json',
    '.cursor/mcp.json',
  ],
  { dot: true },
);

async function guardedWiringFile(root: string, use: ToolUse): Promise<string | undefined> {
  if (use.kind !== 'write' && use.kind !== 'edit') return undefined;
  for (const requested of use.paths) {
    const relative = await relativeInside(root, requested);
    if (relative !== undefined && GUARDED_WIRING(relative)) return relative;
  }
  return undefined;
}
