import type { Disposable } from '../events';
import { parseAck, type Envelope, type InboxSink } from '../router/model';
import { TERMINAL_TASK_STATES, type TaskRecord } from '../scheduler/model';
import type { AcpSession, TurnResult } from './acpSession';
import type { SessionRecord, SessionState, TurnOrigin } from './model';
import { acknowledgementPrompt, messagePrompt, originOfTask, payloadText, preamble, taskPrompt } from './prompts';
import type { SessionAgentSide } from './agentSide';

/** A task's states in which it is the agent's (its `run` went to it and it has not ended). */
const HELD = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);
/** ACK stages that end a message: the ones worth a turn when they answer a message the agent sent. */
const FINAL_STAGES = new Set(['FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT']);
/** The ACK payload's limit is 4 KiB: what a turn's last message gives a task (result) or a message (note) stays under it. */
const ACK_BYTES_MAX = 3800;
const NOTE_MAX_CHARS = 1000;

/** The error code a run or a message ends with when its turn did not end normally. */
export function endCode(result: TurnResult, exited: boolean): string {
  if (exited) return 'AGENT_UNAVAILABLE';
  switch (result.end) {
    case 'refusal':
      return 'TURN_REFUSED';
    case 'max_tokens':
      return 'TURN_MAX_TOKENS';
    case 'max_turn_requests':
      return 'TURN_MAX_TURN_REQUESTS';
    case 'cancelled':
      return 'TURN_CANCELLED';
    default:
      return 'TURN_ERROR';
  }
}

/** Why, in words: the note of a FAILED ACK. */
function endNote(result: TurnResult, exitReason: string | undefined): string {
  if (exitReason !== undefined)
    return `the agent's process ended (${exitReason}) during the turn`.slice(0, NOTE_MAX_CHARS);
  const said = result.text.trim() === '' ? '' : `: ${result.text.trim()}`;
  return `the turn ended ${result.end}${result.error ? ` (${result.error})` : ''}${said}`.slice(0, NOTE_MAX_CHARS);
}

/** The turn's last message as a run's FULFILLED ACK fields: `result` a JSON string, `note` its start, both under 4 KiB. */
export function completion(text: string): { note: string; result?: string } {
  const trimmed = text.trim();
  if (trimmed === '') return { note: 'completed (session turn ended)' };
  let result = trimmed;
  while (Buffer.byteLength(JSON.stringify(result), 'utf8') > ACK_BYTES_MAX - 1200)
    result = result.slice(0, Math.floor(result.length * 0.8));
  return { note: trimmed.slice(0, 300), result };
}

/** One thing the session turns into a prompt turn. */
type Work =
  | { readonly kind: 'task'; readonly envelope: Envelope; readonly taskId: string }
  | { readonly kind: 'message'; readonly envelope: Envelope }
  | {
      readonly kind: 'ack';
      readonly envelope: Envelope;
      readonly forMessageId: string;
      readonly stage: string;
      readonly note: string;
      readonly errorCode: string;
    }
  | { readonly kind: 'person'; readonly text: string; readonly by: string };

export interface DriverNeeds {
  /** Reads and answers the agent's inbox and its tasks as the agent (agentSide.ts). */
  readonly side: SessionAgentSide;
  /** The instructions file's path in the worktree, named in the first turn's preamble. */
  readonly instructionsPath: string | undefined;
  /** The session's record changed (state, turn). */
  changed(patch: Partial<SessionRecord>): void;
  /** A fault the driver recovered from, for the log. */
  fault(during: string, err: unknown): void;
}

/**
 * Drives one open ACP session for the swarm (README, "Run a workflow of coding agents"): while idle it holds the agent's
 * inbox (a delivery window of one) and turns the first thing that needs the agent into a prompt turn — a scheduler
 * `run` (a task, a workflow node), a message, the final acknowledgement of a message the agent sent — or a person's
 * prompt. During the turn the inbox is the agent's own (read_inbox works); the driver answers as the agent's SDK would:
 * the `run` READ at the turn's first update, then FULFILLED with its last message (unless the agent called
 * complete_task / fail_task), FAILED when the turn ended in error or refusal or the process died; a message RECEIVED at
 * its start and FULFILLED at its end. A preemption of the running task cancels the turn (`session/cancel`) and yields it
 * back to the queue; a `terminate` ends the process. One turn at a time.
 */
export class SessionDriver implements Disposable {
  private attached: Disposable | undefined;
  private taking = false;
  private current: Work | undefined;
  private started = false;
  private turns = 0;
  private exitReason: string | undefined;
  private closed = false;
  private readonly queuedPerson: Work[] = [];
  private readonly watch: Disposable;

  constructor(
    private readonly agentId: string,
    private readonly session: AcpSession,
    private readonly needs: DriverNeeds,
  ) {
    this.watch = needs.side.onTaskChange((task) => this.onTask(task));
  }

  get state(): SessionState {
    if (this.closed || this.session.hasExited) return 'exited';
    return this.current === undefined ? 'idle' : 'working';
  }

  get busy(): boolean {
    return this.current !== undefined;
  }

  /** Begins: idle, holding the inbox. */
  open(): void {
    this.idle();
  }

  /** A person's prompt in the same session: runs now when idle, else refused (one turn at a time). */
  prompt(text: string, by: string): boolean {
    if (this.closed || this.session.hasExited) return false;
    if (this.current !== undefined || this.taking) return false;
    this.queuedPerson.push({ kind: 'person', text, by });
    this.detach();
    void this.run(this.queuedPerson.shift() as Work);
    return true;
  }

  /** Stop: cancels the running turn (the agent ends it `cancelled`). */
  async cancel(): Promise<void> {
    await this.session.cancel();
  }

  /**
   * The process ended (the session's onExit): nothing more is taken; the running turn ends with it and is answered
   * (its task FAILED AGENT_UNAVAILABLE).
   */
  exited(reason: string): void {
    this.exitReason = reason;
    this.watch.dispose();
    this.detach();
  }

  dispose(): void {
    this.closed = true;
    this.watch.dispose();
    this.detach();
  }

  // ---------------------------------------------------------------- the inbox while idle

  private idle(): void {
    if (this.closed || this.session.hasExited) return;
    this.needs.changed({ state: 'idle', turn: null });
    const taken: Array<{ seq: number; envelope: Envelope }> = [];
    const sink: InboxSink = {
      deliver: (seq, envelope) => {
        taken.push({ seq, envelope });
        if (!this.taking) {
          this.taking = true;
          // Out of the router's dispatch: the deliveries of one commit are looked at together.
          queueMicrotask(() => this.take(taken));
        }
      },
      close: () => {
        this.attached = undefined;
      },
    };
    try {
      this.attached = this.needs.side.attach(sink, 1);
    } catch (err) {
      this.needs.fault('holding the inbox', err);
    }
  }

  private detach(): void {
    const attached = this.attached;
    this.attached = undefined;
    attached?.dispose();
  }

  /** Confirms what the router delivered, answers what needs no turn, and runs the first that needs one. */
  private take(taken: Array<{ seq: number; envelope: Envelope }>): void {
    const batch = taken.splice(0);
    let work: Work | undefined;
    try {
      for (const { seq, envelope } of batch) {
        if (work !== undefined) break; // the rest go back to the inbox when it is let go (a read_inbox or the next idle)
        const w = this.classify(envelope);
        if (w === 'live') continue;
        this.needs.side.confirm(seq, envelope.messageId);
        if (w !== 'none') work = w;
      }
    } catch (err) {
      this.needs.fault('taking a delivery', err);
    }
    this.taking = false;
    if (work === undefined) return;
    this.detach();
    void this.run(work);
  }

  /** What a delivery needs: a turn, an answer without one ('none', answered here), or nothing (a live-only envelope). */
  private classify(envelope: Envelope): Work | 'none' | 'live' {
    const side = this.needs.side;
    if (envelope.messageType === 'ACKNOWLEDGEMENT') {
      const ack = parseAck(jsonObject(envelope.payload));
      if (typeof ack === 'string' || !FINAL_STAGES.has(ack.stage) || envelope.producerId === 'coordinator')
        return 'none';
      return {
        kind: 'ack',
        envelope,
        forMessageId: ack.ackForMessageId,
        stage: ack.stage,
        note: ack.note,
        errorCode: ack.errorCode,
      };
    }
    if (!side.isTracked(envelope.messageId)) return 'live';
    if (envelope.messageType === 'CONTROL' && envelope.producerId === 'coordinator') {
      const command = jsonObject(envelope.payload);
      const name = typeof command?.command === 'string' ? command.command : '';
      const taskId = typeof command?.task_id === 'string' ? command.task_id : '';
      if (name === 'run') return { kind: 'task', envelope, taskId };
      void this.answerIdle(name, taskId, envelope);
      return 'none';
    }
    return { kind: 'message', envelope };
  }

  /** A command for a task that is not running in a turn (the session is idle). */
  private async answerIdle(name: string, taskId: string, envelope: Envelope): Promise<void> {
    const side = this.needs.side;
    const task = taskId === '' ? undefined : side.task(taskId);
    const held = task !== undefined && task.assignedAgentId === this.agentId && HELD.has(task.state);
    try {
      switch (name) {
        case 'preempt_request':
          if (held && task.state === 'PREEMPTING') await this.yieldTask(task);
          else await side.ack(envelope, 'FULFILLED', { note: 'completed' });
          return;
        case 'terminate':
          await side.ack(envelope, 'FULFILLED', { note: 'terminated' });
          if (held) await side.ackRun(task, 'FULFILLED', { note: 'terminated' });
          return;
        case 'shutdown':
          await side.ack(envelope, 'FULFILLED', { note: 'shut down: the session ends' });
          await this.session.close();
          return;
        default:
          await side.ack(envelope, 'REJECTED', {
            error_code: 'UNSUPPORTED_MESSAGE_TYPE',
            note: `a session agent does not know the command '${name.slice(0, 64)}'`,
          });
      }
    } catch (err) {
      this.needs.fault(`answering ${name}`, err);
    }
  }

  // ---------------------------------------------------------------- turns

  private async run(work: Work): Promise<void> {
    this.current = work;
    const side = this.needs.side;
    try {
      let task: TaskRecord | undefined;
      if (work.kind === 'task') {
        task = side.task(work.taskId);
        if (task === undefined || task.assignedAgentId !== this.agentId || !HELD.has(task.state)) return;
        if (task.state === 'PREEMPTING') {
          // Asked to yield before it started: back to the queue without a turn.
          await this.yieldTask(task);
          return;
        }
      }
      const origin = originOf(work, task);
      const first = this.turns === 0 && !this.started;
      const text = (first ? preamble(this.agentId, this.needs.instructionsPath) : '') + promptOf(work, task);
      this.started = true;
      this.turns += 1;
      this.needs.changed({
        state: 'working',
        turn: { number: this.session.transcript.turn + 1, origin, startedAt: side.now() },
      });
      let began = false;
      const onFirstUpdate = async () => {
        if (began || this.closed) return;
        began = true;
        try {
          if (work.kind === 'task' && task !== undefined) {
            const now = side.task(task.taskId);
            if (now !== undefined && now.state === 'DISPATCHED')
              await side.ackRun(now, 'READ', { note: 'started (session turn)' });
          } else if (work.kind === 'message') {
            await side.ack(work.envelope, 'RECEIVED', { note: 'a session turn began' });
          }
        } catch (err) {
          this.needs.fault('acknowledging the start of a turn', err);
        }
      };
      const untilFirst = this.session.onFirstUpdate(() => void onFirstUpdate());
      // A message is RECEIVED when its turn starts; a task is RUNNING at the turn's first update.
      if (work.kind === 'message') await onFirstUpdate();
      const result = await this.session.prompt(origin, text);
      untilFirst.dispose();
      // The coordinator is stopping: what the turn held is answered by the next one's restore.
      if (this.closed) return;
      await this.finish(work, result, began);
    } catch (err) {
      this.needs.fault('running a turn', err);
    } finally {
      this.current = undefined;
      if (this.session.hasExited || this.closed) {
        this.needs.changed({ turn: null });
      } else this.idle();
    }
  }

  /** The end of a turn, answered as the agent's SDK would (see the class comment). */
  private async finish(work: Work, result: TurnResult, began: boolean): Promise<void> {
    const side = this.needs.side;
    const exited = this.exitReason !== undefined || this.session.hasExited;
    if (work.kind === 'task') {
      const task = side.task(work.taskId);
      if (task === undefined || task.assignedAgentId !== this.agentId || TERMINAL_TASK_STATES.has(task.state)) return;
      if (task.terminateMessageId !== '') {
        await side.ackById(task.terminateMessageId, task.taskId, 'FULFILLED', { note: 'terminated' });
        await side.ackRun(task, 'FULFILLED', { note: 'terminated' });
        return;
      }
      if (task.state === 'PREEMPTING' && result.end === 'cancelled' && !exited) {
        await this.yieldTask(task);
        return;
      }
      if (result.end === 'end_turn' && !exited) {
        if (!began && task.state === 'DISPATCHED') await side.ackRun(task, 'READ', { note: 'started (session turn)' });
        await side.ackRun(side.task(task.taskId) ?? task, 'FULFILLED', completion(result.text));
        if (task.preemptMessageId !== '' && task.state === 'PREEMPTING')
          await side.ackById(task.preemptMessageId, task.taskId, 'FULFILLED', { note: 'completed' });
        return;
      }
      if (!began && task.state === 'DISPATCHED' && !exited) {
        // Refused before it began: back to the queue, as a busy agent answers a run.
        await side.ackRun(task, 'REJECTED', { error_code: endCode(result, false), note: endNote(result, undefined) });
        return;
      }
      await side.ackRun(task, 'FAILED', {
        error_code: endCode(result, exited),
        note: endNote(result, this.exitReason),
      });
      return;
    }
    if (work.kind === 'message') {
      if (!side.isOpen(work.envelope.messageId)) return; // the agent acknowledged it itself
      if (result.end === 'end_turn' && !exited)
        await side.ack(work.envelope, 'FULFILLED', { note: result.text.trim().slice(0, NOTE_MAX_CHARS) || 'done' });
      else
        await side.ack(work.envelope, 'FAILED', {
          error_code: endCode(result, exited),
          note: endNote(result, this.exitReason),
        });
    }
  }

  /** Yields the task back to the queue (RFC §7.1): the preempt_request and the run FULFILLED `yielded`. */
  private async yieldTask(task: TaskRecord): Promise<void> {
    const side = this.needs.side;
    if (task.preemptMessageId !== '')
      await side.ackById(task.preemptMessageId, task.taskId, 'FULFILLED', { note: 'yielded' });
    const now = side.task(task.taskId) ?? task;
    if (now.runMessageId !== '' && !TERMINAL_TASK_STATES.has(now.state))
      await side.ackById(task.runMessageId, task.taskId, 'FULFILLED', { note: 'yielded' });
  }

  /** The running task changed: a preemption cancels the turn; a terminate ends the process. */
  private onTask(task: TaskRecord): void {
    const work = this.current;
    if (work?.kind !== 'task' || work.taskId !== task.taskId || task.assignedAgentId !== this.agentId) return;
    if (task.terminateMessageId !== '') {
      void this.session.close().catch((err) => this.needs.fault('ending the process for terminate', err));
    } else if (task.state === 'PREEMPTING') {
      void this.session.cancel().catch((err) => this.needs.fault('cancelling the turn for a preemption', err));
    }
  }
}

function jsonObject(payload: Uint8Array): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(payload).toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function originOf(work: Work, task: TaskRecord | undefined): TurnOrigin {
  switch (work.kind) {
    case 'task':
      return task ? originOfTask(task) : { kind: 'task', taskId: work.taskId };
    case 'message':
      return { kind: 'message', messageId: work.envelope.messageId, from: work.envelope.producerId };
    case 'ack':
      return { kind: 'message', messageId: work.envelope.messageId, from: work.envelope.producerId };
    case 'person':
      return { kind: 'person', by: work.by };
  }
}

function promptOf(work: Work, task: TaskRecord | undefined): string {
  switch (work.kind) {
    case 'task':
      return taskPrompt(task!);
    case 'message': {
      const e = work.envelope;
      return messagePrompt(
        e.producerId,
        e.messageId,
        e.messageType,
        e.correlationId,
        payloadText(e.payload, e.contentType),
      );
    }
    case 'ack':
      return acknowledgementPrompt(work.envelope.producerId, work.forMessageId, work.stage, work.note, work.errorCode);
    case 'person':
      return work.text;
  }
}
