import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { IdSource } from '../ids';
import type { EventRecorder } from '../log/model';
import {
  ackPayload,
  agentEnvelope,
  derivedToken,
  isTerminal,
  type Envelope,
  type InboxSink,
  type MessageRecord,
} from '../router/model';
import type { TaskChange, TaskRecord } from '../scheduler/model';

/** What a session uses of the router (Router implements it; the composition root hands in the instance). */
export interface SessionRouter {
  attach(agentId: string, sink: InboxSink, ctx: CallContext, resumeAfter?: number, window?: number): Disposable;
  ackDelivery(
    agentId: string,
    seq: number,
    messageId: string,
    outcome: 'DELIVERED' | 'PERMANENT_FAILURE',
    ctx: CallContext,
  ): boolean;
  submit(envelope: Envelope, ctx: CallContext, options?: { receivedAt?: number }): SubmitAnswer | Promise<SubmitAnswer>;
  message(messageId: string): Pick<MessageRecord, 'tracked' | 'state'> | undefined;
}

/** Router.submit's answer as a session reads it. */
export type SubmitAnswer =
  { readonly accepted: true } | { readonly accepted: false; readonly code: string; readonly reason: string };

/** What a session's driver does as its agent: its inbox, its tasks, its acknowledgements. */
export interface SessionAgentSide {
  now(): number;
  /** Holds the agent's inbox with a delivery window (Router.attach). */
  attach(sink: InboxSink, window: number): Disposable;
  /** AckDelivery DELIVERED. */
  confirm(seq: number, messageId: string): void;
  /** A message the router keeps (not a live-only envelope). */
  isTracked(messageId: string): boolean;
  /** A kept message that has not ended. */
  isOpen(messageId: string): boolean;
  task(taskId: string): TaskRecord | undefined;
  onTaskChange(listener: (task: TaskRecord) => void): Disposable;
  /** The agent's protocol ACK of a message at a stage, durable; a refusal is logged (`session.ack_refused`), not thrown. */
  ack(
    target: Pick<Envelope, 'messageId' | 'correlationId'>,
    stage: AckStageName,
    extra?: Record<string, unknown>,
  ): Promise<void>;
  ackById(
    messageId: string,
    correlationId: string,
    stage: AckStageName,
    extra?: Record<string, unknown>,
  ): Promise<void>;
  /** The ACK of a task's current `run`. */
  ackRun(task: TaskRecord, stage: AckStageName, extra?: Record<string, unknown>): Promise<void>;
}

export type AckStageName = 'RECEIVED' | 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED';

export interface AgentSideDeps {
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly log: EventRecorder;
  readonly router: SessionRouter;
  readonly scheduler: { task(taskId: string): TaskRecord | undefined; readonly onDidChange: Event<TaskChange> };
  readonly whenDurable: () => Promise<void>;
}

/**
 * The agent's side of the router and the scheduler, as the agent's own SDK would use them: ACKNOWLEDGEMENT envelopes
 * from the agent through Router.submit (the router checks it is the recipient; the scheduler reads them as any agent's
 * ACK), with the token the bridge's ack_message derives for the same message and stage, so an ACK the agent sent itself
 * during the turn and the driver's are one operation.
 */
export function agentSide(agentId: string, deps: AgentSideDeps): SessionAgentSide {
  const ctx = (): CallContext => ({ correlationId: deps.ids.uuid() });
  const ackById = async (
    messageId: string,
    correlationId: string,
    stage: AckStageName,
    extra: Record<string, unknown> = {},
  ): Promise<void> => {
    const envelope = agentEnvelope(
      deps,
      agentId,
      'ACKNOWLEDGEMENT',
      ackPayload(messageId, stage, extra),
      'application/json',
      correlationId || deps.ids.uuid(),
      derivedToken('ack', agentId, messageId, stage),
    );
    const result = await deps.router.submit(envelope, ctx(), { receivedAt: deps.clock.now() });
    await deps.whenDurable();
    if (!result.accepted && result.code !== 'DUPLICATE_DETECTED' && result.code !== 'ALREADY_IN_PROGRESS') {
      deps.log.record({
        correlationId: correlationId || envelope.messageId,
        actor: agentId,
        eventType: 'session.ack_refused',
        level: 'WARN',
        details: { agent_id: agentId, ack_for: messageId, stage, code: result.code, reason: result.reason },
      });
    }
  };
  return {
    now: () => deps.clock.now(),
    attach: (sink, window) => deps.router.attach(agentId, sink, ctx(), undefined, window),
    confirm: (seq, messageId) => {
      deps.router.ackDelivery(agentId, seq, messageId, 'DELIVERED', ctx());
    },
    isTracked: (messageId) => deps.router.message(messageId)?.tracked === true,
    isOpen: (messageId) => {
      const record = deps.router.message(messageId);
      return record !== undefined && record.tracked && !isTerminal(record.state);
    },
    task: (taskId) => deps.scheduler.task(taskId),
    onTaskChange: (listener) =>
      deps.scheduler.onDidChange((change) => {
        if (change.task.assignedAgentId === agentId) listener(change.task);
      }),
    ack: (target, stage, extra) => ackById(target.messageId, target.correlationId, stage, extra),
    ackById,
    ackRun: (task, stage, extra) => ackById(task.runMessageId, task.taskId, stage, extra),
  };
}
