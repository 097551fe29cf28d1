import { strict as assert } from 'node:assert';
import type { SubmitResult, TaskRecord } from '../../src/core/scheduler/model';
import type { Scheduler } from '../../src/core/scheduler/scheduler';
import { CollectingSink, RouterHarness, ctx, json, settle } from './routerHarness';

/** One CONTROL command an agent received, with the envelope's ids. */
export interface ReceivedCommand {
  readonly messageId: string;
  readonly correlationId: string;
  readonly command: Record<string, unknown>;
}

/**
 * The real coordinator (store file in a temp dir, ManualClock, registry, router, activity buffer, concurrency gate) with
 * agents that register, heartbeat RUNNABLE, stream their inbox and ACK the scheduler's CONTROL commands over the router,
 * as an agent would.
 */
export class SchedulerHarness extends RouterHarness {
  private readonly sinks = new Map<string, CollectingSink>();
  private readonly seen = new Map<string, number>();
  private readonly seenIds = new Map<string, Set<string>>();
  private readonly confirmed = new WeakMap<CollectingSink, Set<number>>();
  private submissions = 0;

  get scheduler(): Scheduler {
    return this.coordinator.scheduler;
  }

  /** Registers `agentId` of `type`, opens its stream, and reports RUNNABLE. */
  agent(agentId: string, type = 'coder'): CollectingSink {
    this.register(agentId, { name: type });
    const sink = this.stream(agentId).sink;
    this.sinks.set(agentId, sink);
    assert.ok(this.registry.heartbeat(agentId, 'RUNNABLE', {}, ctx(`hb-${agentId}`)));
    assert.equal(this.registry.get(agentId)?.state, 'RUNNABLE');
    return sink;
  }

  /** Opens the stream again after a restart and reports RUNNABLE-ish liveness (keeps its state). */
  reconnect(agentId: string): void {
    this.sinks.set(agentId, this.stream(agentId).sink);
    this.seen.delete(agentId);
    this.seenIds.delete(agentId);
  }

  /** AckDelivery for everything written to `agentId`'s stream not confirmed yet (as an agent confirms what it read). */
  confirmDeliveries(agentId: string): void {
    const sink = this.sinks.get(agentId);
    assert.ok(sink, `no stream for ${agentId}`);
    let confirmed = this.confirmed.get(sink);
    if (!confirmed) this.confirmed.set(sink, (confirmed = new Set()));
    for (const item of sink.items) {
      if (confirmed.has(item.seq)) continue;
      confirmed.add(item.seq);
      this.router.ackDelivery(agentId, item.seq, item.envelope.messageId, 'DELIVERED', ctx(`ack-delivery-${agentId}`));
    }
  }

  agentState(agentId: string): string | undefined {
    return this.registry.get(agentId)?.state;
  }

  /**
   * CONTROL commands `agentId` received since the last call; a redelivery of one already seen (its delivery lease ran
   * out: this agent never calls AckDelivery) is not a new command.
   */
  commands(agentId: string): ReceivedCommand[] {
    const sink = this.sinks.get(agentId);
    assert.ok(sink, `no stream for ${agentId}`);
    const all = sink.ofType('CONTROL');
    const from = this.seen.get(agentId) ?? 0;
    this.seen.set(agentId, all.length);
    let ids = this.seenIds.get(agentId);
    if (!ids) this.seenIds.set(agentId, (ids = new Set()));
    const fresh: ReceivedCommand[] = [];
    for (const i of all.slice(from)) {
      if (ids.has(i.envelope.messageId)) continue;
      ids.add(i.envelope.messageId);
      fresh.push({
        messageId: i.envelope.messageId,
        correlationId: i.envelope.correlationId,
        command: json(i.envelope),
      });
    }
    return fresh;
  }

  /** The one new command `agentId` received; asserts its kind. */
  command(agentId: string, kind: string): ReceivedCommand {
    const got = this.commands(agentId);
    assert.deepEqual(
      got.map((c) => c.command.command),
      [kind],
      `${agentId} expected one ${kind}`,
    );
    return got[0];
  }

  /** Submits a task; distinct params each time unless given (the same params twice are the same job, RFC §9.2). */
  submit(
    target: string,
    priority = 0,
    extra: { taskId?: string; params?: unknown; scope?: string } = {},
  ): SubmitResult {
    this.submissions++;
    return this.scheduler.submit(
      {
        taskId: extra.taskId ?? '',
        target,
        priority,
        params: Buffer.from(JSON.stringify(extra.params ?? { description: `work ${this.submissions}` })),
        contentType: 'application/json',
        scope: extra.scope ?? 'repo:myrepo/path',
        submittedBy: 'operator',
      },
      ctx('submit'),
    );
  }

  submitted(
    target: string,
    priority = 0,
    extra: { taskId?: string; params?: unknown; scope?: string } = {},
  ): TaskRecord {
    const result = this.submit(target, priority, extra);
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    return result.task;
  }

  task(taskId: string): TaskRecord {
    const task = this.scheduler.task(taskId);
    assert.ok(task, `no task ${taskId}`);
    return task;
  }

  async answer(agentId: string, messageId: string, stage: string, extra: Record<string, unknown> = {}): Promise<void> {
    this.acked(agentId, messageId, stage, extra);
    await settle();
  }

  async advance(ms: number): Promise<void> {
    this.clock.advance(ms);
    await settle();
  }
}
