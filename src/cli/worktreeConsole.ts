import { isoUtc } from '../core/clock';
import type { WorktreePruneCandidate } from '../core/api/coordinatorApi';
import { BindingRequestError, BindingStateError } from '../core/worktree/bindings';
import { MergeRefusedError, type MergeStrategy } from '../core/worktree/mergeBack';
import { WorktreeOperationError, type WorktreeOperations } from '../core/worktree/operations';
import { InvalidWorktreeIdError } from '../core/worktree/snapshots';
import { WorktreeRefusedError } from '../core/worktree/worktrees';

export const WORKTREE_HELP = `Worktree commands:
  worktrees                        every agent worktree: branch, ahead/behind, uncommitted files, agents, last snapshot
  snapshots <repo> <worktree>      its snapshots, newest first (also of a removed worktree)
  restore <repo> <worktree> <ref>  write a snapshot back (the current state is snapshotted first)
  remove <repo> <worktree> [--confirm]  remove through git; --confirm for uncommitted files or unmerged
                                   commits (a snapshot and the branch are kept); never a bound one
  prune                            list what prune would forget (worktrees whose folder is gone)
  prune apply                      forget exactly what the last "prune" listed
  merge <repo> <worktree> [merge|squash|rebase] [target]  preview, then an approval opens (decide it
                                   with approve/deny); the merge runs when it is approved
  merges                           merges that can be undone, newest first
  undo <merge-id>                  put the target back as it was before that merge
`;

const STRATEGIES: readonly MergeStrategy[] = ['merge', 'squash', 'rebase'];

/**
 * The operator console's worktree commands (`sw4rm-coordinator --operator`): list, snapshots and restore, remove, prune,
 * merge back (its approval is an ordinary pending approval of the console) and undo, through WorktreeOperations.
 */
export class WorktreeConsole {
  private lastPlan: WorktreePruneCandidate[] | undefined;

  constructor(
    private readonly ops: WorktreeOperations,
    private readonly operator: string,
    private readonly print: (text: string) => void,
  ) {}

  static readonly COMMANDS = new Set([
    'worktrees',
    'snapshots',
    'restore',
    'remove',
    'prune',
    'merge',
    'merges',
    'undo',
  ]);

  /** Runs one worktree command; refusals answer an error line, nothing throws for them. */
  async run(command: string, args: readonly string[]): Promise<string> {
    try {
      return await this.dispatch(command, args);
    } catch (err) {
      if (
        err instanceof WorktreeOperationError ||
        err instanceof WorktreeRefusedError ||
        err instanceof MergeRefusedError ||
        err instanceof BindingRequestError ||
        err instanceof BindingStateError ||
        err instanceof InvalidWorktreeIdError
      ) {
        const reason = (err as { reason?: string }).reason;
        return `error${reason ? ` (${reason})` : ''}: ${printable(err.message)}\n`;
      }
      throw err;
    }
  }

  private async dispatch(command: string, args: readonly string[]): Promise<string> {
    const [repoId = '', worktreeId = ''] = args;
    const need = (n: number, usage: string) => {
      if (args.length < n) throw new WorktreeOperationError('invalid', 'usage', `usage: ${usage}`);
    };
    switch (command) {
      case 'worktrees': {
        const list = await this.ops.list();
        if (list.length === 0) return 'no agent worktrees\n';
        return list
          .map(
            (w) =>
              printable(
                [
                  `${w.repoId}/${w.worktreeId}`,
                  w.branch,
                  `+${w.ahead}/-${w.behind}`,
                  w.dirty === undefined ? 'folder missing' : `${w.dirty} uncommitted`,
                  w.boundAgents.length
                    ? `agents ${w.boundAgents.map((a) => `${a.agentId}:${a.state}`).join(',')}`
                    : 'unbound',
                  w.locked ? 'locked' : '',
                  w.prunable ? 'prunable' : '',
                  w.lastSnapshot ? `last snapshot ${isoUtc(w.lastSnapshot.takenAt)}` : 'no snapshot',
                  w.path,
                ]
                  .filter(Boolean)
                  .join('  '),
              ) + '\n',
          )
          .join('');
      }
      case 'snapshots': {
        need(2, 'snapshots <repo> <worktree>');
        const list = await this.ops.snapshotsOf(repoId, worktreeId);
        return list.length === 0
          ? `no snapshots of ${printable(repoId)}/${printable(worktreeId)}\n`
          : list.map((s) => `${s.ref}  ${isoUtc(s.takenAt)}  ${s.commit.slice(0, 12)}\n`).join('');
      }
      case 'restore': {
        need(3, 'restore <repo> <worktree> <snapshot-ref>');
        const { before } = await this.ops.restore(repoId, worktreeId, args[2], this.operator);
        return `restored ${printable(args[2])} into ${repoId}/${worktreeId}; the state before is ${before.ref}\n`;
      }
      case 'remove': {
        need(2, 'remove <repo> <worktree> [--confirm]');
        const confirmed = args.slice(2).includes('--confirm');
        const removed = await this.ops.remove(repoId, worktreeId, { confirmed }, this.operator);
        return `removed ${repoId}/${worktreeId}; snapshot ${removed.snapshot?.ref ?? 'none'}; branch ${removed.branchKept ? 'kept' : 'deleted (its work is in the target)'}\n`;
      }
      case 'prune': {
        if (repoId === 'apply') {
          if (!this.lastPlan) return 'error: run "prune" first to see what would be pruned\n';
          const pruned = await this.ops.prune(this.lastPlan, this.operator);
          this.lastPlan = undefined;
          return pruned.length === 0
            ? 'nothing pruned (no longer stale)\n'
            : pruned.map((c) => `pruned ${c.repoId}/${printable(c.name)}\n`).join('');
        }
        this.lastPlan = await this.ops.prunePlan(repoId || undefined);
        if (this.lastPlan.length === 0) return 'nothing to prune\n';
        return (
          this.lastPlan.map((c) => `would prune ${c.repoId}/${printable(c.name)}: ${printable(c.reason)}\n`).join('') +
          'type "prune apply" to prune exactly these\n'
        );
      }
      case 'merge': {
        need(2, 'merge <repo> <worktree> [merge|squash|rebase] [target]');
        const strategy = (args[2] ?? 'merge') as MergeStrategy;
        if (!STRATEGIES.includes(strategy)) return `error: the strategy is one of ${STRATEGIES.join(', ')}\n`;
        const options = { strategy, target: args[3] };
        const preview = await this.ops.previewMerge(repoId, worktreeId, options);
        const lines = [
          `merge preview ${preview.sourceBranch} → ${preview.targetBranch} (${strategy}): ${preview.commits.length} commit(s), ${preview.files.length} file(s)`,
          ...preview.commits.map((c) => `  ${c.commit.slice(0, 12)} ${c.subject}`),
          ...preview.files.map((f) => `  ${f.status}\t${f.path}`),
          ...preview.conflicts.map((c) => `  CONFLICT ${c.path}`),
        ];
        let answered = false;
        let resolveAnswer!: (text: string) => void;
        const answer = new Promise<string>((resolve) => {
          resolveAnswer = resolve;
        });
        /** The command's answer (the approval is open, or the merge ended before it could open); later news is printed. */
        const opened = (text: string) => {
          if (answered) this.print(text);
          else resolveAnswer(text);
          answered = true;
        };
        this.ops
          .mergeBack(repoId, worktreeId, options, this.operator, (invocationId) => {
            opened(
              `${lines.map(printable).join('\n')}\napproval ${invocationId} opened: "approve ${invocationId} <why>" merges, "deny ${invocationId} <why>" does not\n`,
            );
          })
          .then(
            (result) => {
              const text =
                result.status === 'merged'
                  ? `merged ${repoId}/${worktreeId}: merge ${result.merge.id} (${result.merge.previousHead.slice(0, 12)} → ${result.merge.resultHead.slice(0, 12)}); "undo ${result.merge.id}" undoes it\n`
                  : result.status === 'conflicts'
                    ? `not merged: conflicts predicted in ${result.conflicts.map((c) => printable(c.path)).join(', ')}\n`
                    : `not merged: approval ${result.invocationId} was not approved\n`;
              opened(result.status === 'conflicts' ? `${lines.map(printable).join('\n')}\n${text}` : text);
            },
            (err: unknown) =>
              opened(
                `error: merge of ${repoId}/${worktreeId}: ${printable(err instanceof Error ? err.message : String(err))}\n`,
              ),
          );
        return answer;
      }
      case 'merges': {
        const merges = this.ops.merges(repoId || undefined);
        return merges.length === 0
          ? 'no merges to undo\n'
          : merges
              .map(
                (m) =>
                  printable(
                    `${m.id}  ${m.repoId}/${m.worktreeId}  ${m.strategy} into ${m.targetBranch}  ${isoUtc(m.mergedAt)} by ${m.by}`,
                  ) + '\n',
              )
              .join('');
      }
      case 'undo': {
        need(1, 'undo <merge-id>');
        const result = await this.ops.undoMerge(repoId, this.operator);
        return `undone: the target is back on ${result.head.slice(0, 12)}${result.sourceRestored ? '' : " (the agent's branch was left as it is)"}\n`;
      }
      default:
        return `error: unknown command '${printable(command)}'\n`;
    }
  }
}

function printable(text: string): string {
  return text.replace(
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
