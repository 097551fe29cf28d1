/** Why a QUEUED task is not running yet, as the Tasks view shows it. */
export type WaitingReason =
  | { readonly kind: 'agent_busy'; readonly agentId: string }
  | { readonly kind: 'agent_not_runnable'; readonly agentId: string; readonly state: string }
  | { readonly kind: 'no_agent_of_type'; readonly agentType: string }
  | {
      readonly kind: 'max_parallel_instances';
      readonly agentType: string;
      readonly limit: number;
      readonly running: number;
    }
  | { readonly kind: 'conflict_decision'; readonly invocationId: string; readonly withTaskId: string }
  /** The parallelism check of its scope against a running task's is under way (an inference engine answers later). */
  | { readonly kind: 'conflict_check'; readonly withTaskId: string }
  | { readonly kind: 'serialised_after'; readonly taskId: string }
  | { readonly kind: 'preempted'; readonly byTaskId: string };

/** What a waiting task tells its submitter and the Tasks view. */
export function describeWaiting(w: WaitingReason): string {
  switch (w.kind) {
    case 'agent_busy':
      return `waiting for agent ${w.agentId} to finish its current task`;
    case 'agent_not_runnable':
      return `waiting for agent ${w.agentId} to become RUNNABLE (it is ${w.state})`;
    case 'no_agent_of_type':
      return `waiting for a RUNNABLE agent of type ${w.agentType}`;
    case 'max_parallel_instances':
      return `queued behind max_parallel_instances (${w.running} of ${w.limit} running for type ${w.agentType})`;
    case 'conflict_decision':
      return `waiting for a conflict decision (its scope overlaps task ${w.withTaskId})`;
    case 'conflict_check':
      return `waiting for the inference engine's parallelism check (its scope overlaps task ${w.withTaskId})`;
    case 'serialised_after':
      return `serialised after task ${w.taskId} (a conflict decision)`;
    // byTaskId is '' when the operator (or an agent's RequestPreemption) asked the task to yield, not a task.
    case 'preempted':
      return w.byTaskId ? `preempted by task ${w.byTaskId}` : 'preempted by the operator (RequestPreemption)';
  }
}
