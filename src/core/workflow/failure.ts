import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import { type HitlInvocation, HitlRequestError } from '../hitl/model';
import type { Transition } from '../kernel/transitions';
import { ACTOR, type Core, type FailurePart, type Parts } from './core';
import type { NodeRecord } from './model';
import { answeredBy, question, retryWaiting, WORKFLOW_COMPONENT } from './notices';
import { isPlainObject } from './paths';
import { asksPerson, automaticRetryDelay, MAX_AUTOMATIC_RETRIES, nodeOf, type LiveWorkflow } from './state';

/**
 * A node FAILED, and what follows: its dependents SKIPPED, or (`on_failure: hitl`) a person asked (HitlService.open,
 * whenSettled) and their answer applied: approve = retry (a rule's or a fallback's at most MAX_AUTOMATIC_RETRIES
 * times, later on the Clock), modify = COMPLETED with the payload, deny = failed for good.
 */
export class Failures implements FailurePart {
  constructor(
    private readonly c: Pick<Core, 'deps' | 'transitions' | 'guard' | 'live' | 'watched'>,
    private readonly p: Pick<Parts, 'progress' | 'completion' | 'dispatch'>,
  ) {}

  /**
   * A node FAILED (its task failed or was cancelled, its output or route could not be used, its task could not be
   * submitted). With `on_failure: hitl` a person is asked (the workflow WAITING) unless `final` (a retry could only fail
   * the same way: a submission refused for a reason that does not pass); otherwise its dependents are SKIPPED and the
   * workflow ends FAILED once nothing runs.
   */
  fail(tx: Transition, live: LiveWorkflow, nodeId: string, reason: string, by: string, final = false): void {
    const progress = this.p.progress;
    const node = nodeOf(live, nodeId);
    const def = live.defs.get(nodeId)!;
    node.error = reason.slice(0, 4096);
    node.waiting = '';
    node.fireAt = null;
    node.completedAt = this.c.deps.clock.now();
    if (final || !asksPerson(def)) {
      progress.setStatus(tx, live, node, 'FAILED', reason, by);
      progress.skipDependents(tx, live, nodeId, 'FAILED', by);
      return;
    }
    let invocation: HitlInvocation;
    try {
      invocation = this.c.deps.hitl.open(
        question(live, def, node, this.c.deps.clock.now()),
        { kind: 'internal', component: WORKFLOW_COMPONENT },
        { correlationId: live.record.workflowId },
      ).invocation;
    } catch (err) {
      if (!(err instanceof HitlRequestError)) throw err;
      node.error = `${reason} (a person could not be asked: ${err.code}: ${err.message})`.slice(0, 4096);
      progress.setStatus(tx, live, node, 'FAILED', node.error, by);
      progress.skipDependents(tx, live, nodeId, 'FAILED', by);
      return;
    }
    node.invocationId = invocation.id;
    node.waiting = `a person: approve (retry), modify (skip with an output) or deny (fail) — HITL ${invocation.id}`;
    progress.setStatus(tx, live, node, 'FAILED', reason, by, { invocation_id: invocation.id });
    // An auto rule may have answered inside open().
    if (invocation.state !== 'pending') this.applyHitl(tx, live, node, invocation, 'policy');
    else this.watch(live.record.workflowId, nodeId, invocation.id);
  }

  /** A FAILED node whose question was answered deny (or not answered): final, its dependents SKIPPED. */
  finalFailure(tx: Transition, live: LiveWorkflow, node: NodeRecord, error: string, by: string): void {
    node.invocationId = '';
    node.waiting = '';
    node.error = error.slice(0, 4096);
    this.p.progress.putNode(live, node);
    this.c.deps.log.record({
      correlationId: live.record.workflowId,
      actor: by,
      eventType: 'workflow.node',
      level: 'WARN',
      details: {
        workflow_id: live.record.workflowId,
        node_id: node.nodeId,
        from: 'FAILED',
        to: 'FAILED',
        reason: node.error.slice(0, 1024),
        final: true,
        run: node.runs,
      },
    });
    this.p.progress.notifyNode(tx, live, node);
    this.p.progress.skipDependents(tx, live, node.nodeId, 'FAILED', by);
  }

  /** Watches a pending question about a node: its answer is applied in a transition of its own. */
  watch(workflowId: string, nodeId: string, invocationId: string): void {
    if (this.c.watched.has(invocationId)) return;
    this.c.watched.add(invocationId);
    this.c.deps.hitl.whenSettled(invocationId).then(
      (invocation) => {
        this.c.watched.delete(invocationId);
        this.c.guard.run(workflowId, () => {
          const live = this.c.live.get(workflowId);
          const node = live?.record.nodes.get(nodeId);
          if (!live || !node || node.status !== 'FAILED' || node.invocationId !== invocation.id) return;
          this.c.transitions.run((tx) => {
            this.applyHitl(tx, live, node, invocation, invocation.decision?.origin.by || 'hitl');
            this.p.progress.settle(tx, live, ACTOR);
          }, workflowId);
          this.p.dispatch.drain();
        });
      },
      () => {
        this.c.watched.delete(invocationId); /* the coordinator is stopping: restore() applies it at the next start */
      },
    );
  }

  /** A person's answer (or the fallback's) about a FAILED node: approve = retry, modify = COMPLETED with the payload, else fail. */
  applyHitl(tx: Transition, live: LiveWorkflow, node: NodeRecord, invocation: HitlInvocation, by: string): void {
    const progress = this.p.progress;
    const d = invocation.decision;
    const who = answeredBy(invocation);
    const action = invocation.state === 'cancelled' ? 'deny' : (d?.action ?? 'deny');
    const rationale = d?.rationale ? `: ${d.rationale.slice(0, 500)}` : '';
    node.invocationId = '';
    if (action === 'approve' && d?.origin.automatic) {
      // A rule or a fallback, not a person: bounded, and later (the Clock), never in the turn that failed it.
      const retries = node.retries ?? 0;
      if (retries >= MAX_AUTOMATIC_RETRIES) {
        this.finalFailure(
          tx,
          live,
          node,
          `${node.error} — ${who} approved a retry, but it was retried automatically ${retries} times ` +
            `(at most ${MAX_AUTOMATIC_RETRIES}): failed for good`,
          by,
        );
        return;
      }
      const now = this.c.deps.clock.now();
      node.retries = retries + 1;
      node.error = '';
      node.readyAt = now;
      node.fireAt = now + automaticRetryDelay(node.retries);
      node.waiting = retryWaiting(node.retries, node.fireAt, who);
      progress.setStatus(
        tx,
        live,
        node,
        'READY',
        `automatic retry ${node.retries} of ${MAX_AUTOMATIC_RETRIES} approved by ${who}${rationale}`,
        by,
        { invocation_id: invocation.id, fire_at: isoUtc(node.fireAt) },
      );
      progress.armOrQueue(tx, live, node);
      return;
    }
    if (action === 'approve') {
      node.error = '';
      node.waiting = 'its task to be submitted (retry approved)';
      node.readyAt = this.c.deps.clock.now();
      node.fireAt = null;
      progress.setStatus(tx, live, node, 'READY', `retry approved by ${who}${rationale}`, by, {
        invocation_id: invocation.id,
      });
      progress.queueStart(live, node.nodeId);
      return;
    }
    if (action === 'modify') {
      const payload = d?.payload;
      const output = isPlainObject(payload) ? payload : { result: payload ?? null };
      this.p.completion.complete(tx, live, node.nodeId, output, `skipped with an output by ${who}${rationale}`, by);
      return;
    }
    this.finalFailure(
      tx,
      live,
      node,
      `${node.error} — ${action === 'deny' ? 'denied' : `answered ${action}`} by ${who}${rationale}`,
      by,
    );
  }

  /** Cancels a pending HITL question about a node (it is no longer needed). */
  withdraw(node: NodeRecord, reason: string, by: string, ctx: CallContext): void {
    const id = node.invocationId;
    node.invocationId = '';
    try {
      if (this.c.deps.hitl.get(id)?.state === 'pending') this.c.deps.hitl.cancel(id, by, reason, ctx);
    } catch {
      // Settled meanwhile: its answer finds the node no longer asking and is ignored.
    }
  }
}
