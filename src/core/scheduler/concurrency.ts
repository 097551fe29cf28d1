// CONTRACT SKELETON (s6-api): helper B replaces every body; nothing here is called done.
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { EventLog } from '../log/eventLog';
import type { DispatchGate, GateAdmission, GateVerdict, ParallelismScorer, SchedulerOptions, TaskRecord } from './model';

export interface ConcurrencyDeps {
  readonly log: EventLog;
  readonly clock: Clock;
  readonly hitl: HitlService;
  readonly scorer: ParallelismScorer;
}

/**
 * RFC §9: max_parallel_instances per agent type, job uniqueness (a duplicate job only with a human's approval), scope
 * conflicts (overlap → the parallelism scorer → below the threshold a HITL CONFLICT invocation, whose decision —
 * serialise or run in parallel — is followed; an unavailable scorer → conservative).
 */
export class ConcurrencyControl implements DispatchGate, Disposable {
  readonly onDidChange: Event<void>;

  constructor(private readonly deps: ConcurrencyDeps, private options: SchedulerOptions) {
    void this.deps; void this.options;
    this.onDidChange = () => ({ dispose() { /* skeleton */ } });
  }

  /** Replaces the max_parallel_instances limits (settings, API); tasks waiting on a limit are tried again. */
  setMaxParallelInstances(_limits: Readonly<Record<string, number>>, _defaultLimit: number): void {
    throw new Error('ConcurrencyControl.setMaxParallelInstances: not built yet (s6 helper B)');
  }

  jobKey(_target: string, _contentType: string, _params: Buffer): string {
    throw new Error('ConcurrencyControl.jobKey: not built yet (s6 helper B)');
  }

  admit(_task: TaskRecord, _open: readonly TaskRecord[], _ctx: CallContext): GateAdmission {
    throw new Error('ConcurrencyControl.admit: not built yet (s6 helper B)');
  }

  mayStart(_task: TaskRecord, _agentType: string, _running: readonly TaskRecord[], _ctx: CallContext): GateVerdict {
    throw new Error('ConcurrencyControl.mayStart: not built yet (s6 helper B)');
  }

  forget(_taskId: string, _ctx: CallContext): void {
    throw new Error('ConcurrencyControl.forget: not built yet (s6 helper B)');
  }

  dispose(): void { /* skeleton */ }
}
