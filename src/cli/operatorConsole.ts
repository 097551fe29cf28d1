import * as fs from 'node:fs';
import { isoUtc } from '../core/clock';
import type { Disposable } from '../core/events';
import { HitlStateError, type HitlService } from '../core/hitl/hitlService';
import type { HitlInvocation } from '../core/hitl/model';
import { HitlRequestError } from '../core/hitl/request';
import type { WorktreeOperations } from '../core/worktree/operations';
import { WORKTREE_HELP, WorktreeConsole } from './worktreeConsole';

export const OPERATOR_HELP = `HITL operator commands:
  list [all]                       pending invocations (all: decided ones too)
  show <id>                        one invocation with its context and audit trail
  approve <id> <rationale>         decide, saying why (required); likewise deny, defer
  modify <id> <json> -- <rationale> approve with an edited payload (JSON), saying why (required)
  cancel <id> [reason]             withdraw a pending invocation (the requester gets deny)
  audit [file]                     the audit trail as JSON (to a file, else printed)
  pause | resume                   pause all approvals (auto rules stop deciding) or resume
  help
`;

/**
 * The headless operator (`sw4rm-coordinator --operator`): the terminal is an attached HITL operator. New
 * invocations are announced as they open; decisions are typed as commands, one per line.
 */
export class OperatorConsole implements Disposable {
  private readonly attachment: Disposable;
  private readonly subscription: Disposable;
  private readonly worktreeConsole: WorktreeConsole | undefined;

  constructor(
    private readonly hitl: HitlService,
    readonly operator: string,
    private readonly print: (text: string) => void,
    worktrees?: WorktreeOperations,
  ) {
    this.worktreeConsole = worktrees && new WorktreeConsole(worktrees, operator, print);
    this.attachment = hitl.attachOperator(operator);
    this.subscription = hitl.onDidChange((change) => {
      if (change.kind === 'opened' && change.invocation.state === 'pending')
        print(`HITL pending: ${summaryLine(change.invocation)}\n`);
      if (change.kind === 'settled') print(`HITL ${summaryLine(change.invocation)}\n`);
    });
    const pending = hitl.list({ pendingOnly: true });
    print(`# HITL operator ${operator} attached; ${pending.length} pending. Type "help" for commands.\n`);
    for (const invocation of pending) print(`HITL pending: ${summaryLine(invocation)}\n`);
  }

  /** Runs one command line, the worktree commands too (they read and change git, so they answer later). */
  runAsync(line: string): Promise<string> {
    const [command = '', ...args] = line.trim().split(/\s+/);
    if (this.worktreeConsole && WorktreeConsole.COMMANDS.has(command.toLowerCase()))
      return this.worktreeConsole.run(command.toLowerCase(), args);
    if (this.worktreeConsole && command.toLowerCase() === 'help') return Promise.resolve(OPERATOR_HELP + WORKTREE_HELP);
    return Promise.resolve(this.run(line));
  }

  /** Runs one command line and answers what to print. Bad input answers an error line; nothing throws. */
  run(line: string): string {
    const [command = '', ...rest] = line.trim().split(/\s+/);
    const id = rest[0] ?? '';
    const text = line.trim().slice(command.length).trim().slice(id.length).trim();
    const ctx = { correlationId: `operator-${Date.now()}` };
    try {
      switch (command.toLowerCase()) {
        case '':
          return '';
        case 'help':
          return OPERATOR_HELP;
        case 'list': {
          const all = this.hitl.list({ pendingOnly: id !== 'all' });
          return all.length === 0 ? 'no invocations\n' : all.map((i) => `${summaryLine(i)}\n`).join('');
        }
        case 'show': {
          const invocation = this.need(id);
          const audit = this.hitl.auditTrail({ invocationId: invocation.id });
          return JSON.stringify({ invocation, audit }, null, 2) + '\n';
        }
        case 'approve':
        case 'deny':
        case 'defer': {
          if (id && !text) return `error: a rationale is required: ${command.toLowerCase()} ${id} <why>\n`;
          const decided = this.hitl.decide(
            this.need(id).id,
            { action: command.toLowerCase(), rationale: text },
            this.operator,
            ctx,
          );
          return `${decided.id}: ${decided.decision?.action}\n`;
        }
        case 'modify': {
          const [jsonText, rationale = ''] = splitAtSeparator(text);
          let payload: unknown;
          try {
            payload = JSON.parse(jsonText);
          } catch {
            return 'error: modify takes <id> <json> -- <rationale>, with valid JSON\n';
          }
          if (id && !rationale) return `error: a rationale is required: modify ${id} <json> -- <why>\n`;
          const decided = this.hitl.decide(
            this.need(id).id,
            { action: 'modify', rationale, payload },
            this.operator,
            ctx,
          );
          return `${decided.id}: modify\n`;
        }
        case 'cancel': {
          const cancelled = this.hitl.cancel(this.need(id).id, this.operator, text, ctx);
          return `${cancelled.id}: cancelled\n`;
        }
        case 'audit': {
          const json = JSON.stringify(this.hitl.exportAudit(), null, 2) + '\n';
          if (!id) return json;
          fs.writeFileSync(id, json);
          return `audit written to ${id}\n`;
        }
        case 'pause':
        case 'resume':
          this.hitl.setPolicy({ ...this.hitl.policy, paused: command.toLowerCase() === 'pause' }, this.operator);
          return command.toLowerCase() === 'pause'
            ? 'approvals paused: every new invocation waits for a human\n'
            : 'approvals resumed\n';
        default:
          return `error: unknown command '${command}'; type "help"\n`;
      }
    } catch (err) {
      if (err instanceof HitlRequestError || err instanceof HitlStateError) return `error: ${err.message}\n`;
      throw err;
    }
  }

  private need(id: string): HitlInvocation {
    if (!id) throw new HitlStateError('not_found', 'give an invocation id (see "list")');
    const invocation = this.hitl.get(id);
    if (!invocation) throw new HitlStateError('not_found', `no HITL invocation '${id}'`);
    return invocation;
  }

  dispose(): void {
    this.subscription.dispose();
    this.attachment.dispose();
  }
}

/** One line per invocation; agent-supplied text never carries terminal control sequences through. */
function summaryLine(i: HitlInvocation): string {
  const subject = [i.subject.repoId, i.subject.worktreeId, i.subject.taskId].filter(Boolean).join('/');
  const status =
    i.state === 'pending'
      ? `deadline ${isoUtc(i.deadlineAt)}`
      : `${i.state}: ${i.decision?.action} by ${i.decision?.origin.by}`;
  return printable(
    `${i.id}  ${i.reasonType}  from ${i.requester}${subject ? `  on ${subject}` : ''}  ${JSON.stringify(i.context.summary)}  ${status}`,
  );
}

function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `<json> -- <rationale>` → [json, rationale]; a `--` with nothing after it gives an empty rationale. */
function splitAtSeparator(text: string): [string, string?] {
  const match = /\s--(?:\s|$)/.exec(text);
  return match ? [text.slice(0, match.index), text.slice(match.index + match[0].length).trim()] : [text];
}
