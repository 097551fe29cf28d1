/**
 * The agent lifecycle of RFC §8 and Appendix C: the states, the only transitions allowed between them, and the
 * §8.3 state timeouts. The Registry applies it (Registry.transition, heartbeats); the scheduler drives it.
 */

/** Agent lifecycle states of RFC §8, by their canonical enum names (common.proto AgentState; FAILED is FAILED_STATE). */
export const AGENT_STATES = [
  'INITIALIZING',
  'RUNNABLE',
  'SCHEDULED',
  'RUNNING',
  'WAITING',
  'WAITING_RESOURCES',
  'SUSPENDED',
  'RESUMED',
  'COMPLETED',
  'FAILED_STATE',
  'SHUTTING_DOWN',
  'RECOVERING',
] as const;
export type AgentState = (typeof AGENT_STATES)[number];

/** What a heartbeat carries when it reports no state: the agent keeps the one it has. */
export const UNSPECIFIED_STATES: ReadonlySet<string> = new Set(['', 'AGENT_STATE_UNSPECIFIED']);

/** The state's name as stored: 'FAILED' (the RFC's word) is accepted for FAILED_STATE (the enum's). */
export function canonicalState(state: string): string {
  return state === 'FAILED' ? 'FAILED_STATE' : state;
}

export function isAgentState(state: string): state is AgentState {
  return (AGENT_STATES as readonly string[]).includes(state);
}

/** Every state but SHUTTING_DOWN itself may be asked to shut down (see the SHUTTING_DOWN edges below). */
const SHUTDOWN_FROM: readonly AgentState[] = AGENT_STATES.filter((s) => s !== 'SHUTTING_DOWN');

/**
 * The allowed transitions, from → to. Entering INITIALIZING is not here: only a (re-)registration does it, from any
 * state (RFC §8.1 INITIALIZING: agents "MUST establish their identity, register with the Scheduler"), and that is
 * Registry.register, not a transition anyone can request.
 */
const EDGES: ReadonlyArray<readonly [AgentState, AgentState, string]> = [
  // Appendix C, agent lifecycle.
  ['INITIALIZING', 'RUNNABLE', 'Appendix C: INITIALIZING --> RUNNABLE'],
  ['INITIALIZING', 'FAILED_STATE', 'Appendix C: INITIALIZING --> FAILED: init_timeout'],
  ['RUNNABLE', 'SCHEDULED', 'Appendix C: RUNNABLE --> SCHEDULED'],
  ['SCHEDULED', 'RUNNING', 'Appendix C: SCHEDULED --> RUNNING'],
  ['RUNNING', 'WAITING', 'Appendix C: RUNNING --> WAITING'],
  ['WAITING', 'RUNNING', 'Appendix C: WAITING --> RUNNING'],
  ['RUNNING', 'WAITING_RESOURCES', 'Appendix C: RUNNING --> WAITING_RESOURCES'],
  ['WAITING_RESOURCES', 'RUNNING', 'Appendix C: WAITING_RESOURCES --> RUNNING'],
  ['WAITING_RESOURCES', 'FAILED_STATE', 'Appendix C: WAITING_RESOURCES --> FAILED: resource_timeout (§8.2)'],
  ['RUNNING', 'SUSPENDED', 'Appendix C: RUNNING --> SUSPENDED'],
  ['SUSPENDED', 'RESUMED', 'Appendix C: SUSPENDED --> RESUMED'],
  ['SUSPENDED', 'FAILED_STATE', 'Appendix C: SUSPENDED --> FAILED: suspend_timeout'],
  ['RESUMED', 'RUNNING', 'Appendix C: RESUMED --> RUNNING'],
  ['RUNNING', 'COMPLETED', 'Appendix C: RUNNING --> COMPLETED'],
  ['RUNNING', 'FAILED_STATE', 'Appendix C: RUNNING --> FAILED'],
  ['RUNNING', 'SHUTTING_DOWN', 'Appendix C: RUNNING --> SHUTTING_DOWN'],
  ['SHUTTING_DOWN', 'FAILED_STATE', 'Appendix C: SHUTTING_DOWN --> FAILED: agent_shutdown_timeout'],
  ['FAILED_STATE', 'RECOVERING', 'Appendix C: FAILED --> RECOVERING'],
  ['RECOVERING', 'RUNNABLE', 'Appendix C: RECOVERING --> RUNNABLE'],
  ['RECOVERING', 'FAILED_STATE', 'Appendix C: RECOVERING --> FAILED: recovery_timeout'],
  ['RECOVERING', 'SHUTTING_DOWN', 'Appendix C: RECOVERING --> SHUTTING_DOWN: recovery_abort (§8.2)'],
  // §8.1 COMPLETED: agents "MUST perform cleanup operations and result reporting before transitioning to RUNNABLE state".
  ['COMPLETED', 'RUNNABLE', '§8.1 COMPLETED: "... before transitioning to RUNNABLE state"'],
  // The assignment withdrawn before the agent started (run refused or timed out, task cancelled): §8.1 SCHEDULED
  // "MUST NOT begin task execution until transitioning to RUNNING"; with nothing to run the agent is idle again,
  // and §8.1 RUNNABLE is "the normal idle state".
  ['SCHEDULED', 'RUNNABLE', '§8.1 SCHEDULED/RUNNABLE: an assignment withdrawn before RUNNING leaves the agent idle'],
  // §8.4: "When an Agent transitions to SHUTTING_DOWN state, implementations MUST provide a configurable grace period"
  // for an operator's ShutdownAgent in whatever state the agent is (RECOVERING → SHUTTING_DOWN is §8.2's recovery abort;
  // FAILED agents "MAY require administrative intervention", §8.1 FAILED; §8.4 cleanup "regardless of shutdown method").
  ...SHUTDOWN_FROM.filter((from) => from !== 'RUNNING' && from !== 'RECOVERING').map(
    (from) => [from, 'SHUTTING_DOWN', '§8.4 graceful shutdown: ShutdownAgent from any state'] as const,
  ),
];

/** from → the states it may move to. */
export const AGENT_TRANSITIONS: ReadonlyMap<AgentState, ReadonlySet<AgentState>> = (() => {
  const table = new Map<AgentState, Set<AgentState>>(AGENT_STATES.map((s) => [s, new Set<AgentState>()]));
  for (const [from, to] of EDGES) table.get(from)!.add(to);
  return table;
})();

/** Whether the table allows `from` → `to` ('FAILED' is read as FAILED_STATE). */
export function allows(from: string, to: string): boolean {
  const f = canonicalState(from);
  const t = canonicalState(to);
  return isAgentState(f) && isAgentState(t) && AGENT_TRANSITIONS.get(f)!.has(t);
}

/** RFC §8.3 state timeouts, in ms; 0 = none. Part of RegistryOptions. */
export interface StateTimeouts {
  /** INITIALIZING → FAILED init_timeout (§8.3 default 60 s). */
  readonly initTimeoutMs: number;
  /** WAITING_RESOURCES → FAILED resource_timeout (§8.2/§8.3 default 300 s). */
  readonly resourceTimeoutMs: number;
  /** SUSPENDED → FAILED suspend_timeout (§8.3 default 3600 s). */
  readonly suspendTimeoutMs: number;
  /** RECOVERING → FAILED recovery_timeout (§8.3 default 120 s). */
  readonly recoveryTimeoutMs: number;
  /** SHUTTING_DOWN → FAILED agent_shutdown_timeout, then deregistered (§8.3/§8.4 default 30 s); a ShutdownAgent's grace overrides it. */
  readonly shutdownTimeoutMs: number;
}

export const DEFAULT_STATE_TIMEOUTS: StateTimeouts = {
  initTimeoutMs: 60_000,
  resourceTimeoutMs: 300_000,
  suspendTimeoutMs: 3_600_000,
  recoveryTimeoutMs: 120_000,
  shutdownTimeoutMs: 30_000,
};

/** The states with a §8.3 timeout, the option that sets it and the error code of the FAILED it leads to. WAITING has none. */
export const STATE_TIMEOUT_CODES: Readonly<
  Partial<Record<AgentState, { readonly option: keyof StateTimeouts; readonly errorCode: string }>>
> = {
  INITIALIZING: { option: 'initTimeoutMs', errorCode: 'init_timeout' },
  WAITING_RESOURCES: { option: 'resourceTimeoutMs', errorCode: 'resource_timeout' },
  SUSPENDED: { option: 'suspendTimeoutMs', errorCode: 'suspend_timeout' },
  RECOVERING: { option: 'recoveryTimeoutMs', errorCode: 'recovery_timeout' },
  SHUTTING_DOWN: { option: 'shutdownTimeoutMs', errorCode: 'agent_shutdown_timeout' },
};

/** The timeout of `state` (ms, 0 = none) and its error code: `overrideMs` when given, else the configured default. */
export function stateTimeout(
  state: string,
  timeouts: StateTimeouts,
  overrideMs?: number,
): { readonly ms: number; readonly errorCode: string } {
  const entry = isAgentState(state) ? STATE_TIMEOUT_CODES[state] : undefined;
  if (!entry) return { ms: 0, errorCode: '' };
  const ms = overrideMs !== undefined ? overrideMs : timeouts[entry.option];
  return { ms: Number.isFinite(ms) && ms > 0 ? ms : 0, errorCode: entry.errorCode };
}

/** Why the table refuses `from` → `to`, for TransitionResult and the log. */
export function refusalReason(from: string, to: string): string {
  if (!isAgentState(canonicalState(to))) return `${to} is not an agent state`;
  if (canonicalState(to) === 'INITIALIZING') return 'only a registration enters INITIALIZING';
  const next = isAgentState(from) ? [...AGENT_TRANSITIONS.get(from)!] : [];
  return `the agent lifecycle does not allow ${from} → ${canonicalState(to)} (from ${from}: ${next.join(', ') || 'none'})`;
}

/** States a path never passes through on its way (only a registration, a failure, a recovery or a shutdown enters them). */
const NOT_ON_THE_WAY: ReadonlySet<string> = new Set(['INITIALIZING', 'FAILED_STATE', 'RECOVERING', 'SHUTTING_DOWN']);

/**
 * The shortest walk through the table from `from` to `to` (the states after `from`, ending with `to`; [] when already
 * there), never passing through INITIALIZING, FAILED_STATE, RECOVERING or SHUTTING_DOWN on the way (they may be `to`,
 * not a step); undefined when there is none. 'FAILED' is read as FAILED_STATE.
 */
export function pathTo(from: string, to: string): AgentState[] | undefined {
  const f = canonicalState(from);
  const t = canonicalState(to);
  if (!isAgentState(f) || !isAgentState(t)) return undefined;
  if (f === t) return [];
  const previous = new Map<AgentState, AgentState>([[f, f]]);
  let frontier: AgentState[] = [f];
  while (frontier.length > 0) {
    const next: AgentState[] = [];
    for (const state of frontier) {
      for (const to2 of AGENT_TRANSITIONS.get(state)!) {
        if (previous.has(to2)) continue;
        previous.set(to2, state);
        if (to2 === t) {
          const path: AgentState[] = [t];
          for (let s = state; s !== f; s = previous.get(s)!) path.unshift(s);
          return path;
        }
        if (!NOT_ON_THE_WAY.has(to2)) next.push(to2);
      }
    }
    frontier = next;
  }
  return undefined;
}
