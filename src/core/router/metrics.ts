/** Back-pressure metrics of RFC §13, per agent, kept in memory and exported as text. */
export interface AgentRouterMetrics {
  readonly agentId: string;
  queueDepth: number;
  capacity: number;
  inFlight: number;
  rejects: Record<string, number>;
  nacks: Record<string, number>;
  enqueueLatency: LatencySummary;
  dequeueLatency: LatencySummary;
  oldestEnqueuedAgeSeconds: number;
  lastDeliveryAt: number | null;
  delivered: number;
  urgentDispatches: number;
}

export interface LatencySummary {
  count: number;
  sumSeconds: number;
  maxSeconds: number;
}

export function emptyMetrics(agentId: string, capacity: number): AgentRouterMetrics {
  return {
    agentId,
    queueDepth: 0,
    capacity,
    inFlight: 0,
    rejects: {},
    nacks: {},
    enqueueLatency: { count: 0, sumSeconds: 0, maxSeconds: 0 },
    dequeueLatency: { count: 0, sumSeconds: 0, maxSeconds: 0 },
    oldestEnqueuedAgeSeconds: 0,
    lastDeliveryAt: null,
    delivered: 0,
    urgentDispatches: 0,
  };
}

export function observe(summary: LatencySummary, seconds: number): void {
  summary.count++;
  summary.sumSeconds += seconds;
  summary.maxSeconds = Math.max(summary.maxSeconds, seconds);
}

/** Prometheus text exposition of the §13 metrics (names as the RFC suggests). */
export function metricsText(all: readonly AgentRouterMetrics[]): string {
  const lines: string[] = [];
  const label = (agentId: string, extra: Record<string, string> = {}) =>
    '{' +
    Object.entries({ agent_id: agentId, ...extra })
      .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`)
      .join(',') +
    '}';
  const metric = (name: string, help: string, type: string, rows: Array<[string, number]>) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of rows) lines.push(`${name}${labels} ${Number.isFinite(value) ? value : 0}`);
  };
  metric(
    'router_inbound_queue_depth',
    'Messages admitted to the inbox and not yet READ.',
    'gauge',
    all.map((m) => [label(m.agentId), m.queueDepth]),
  );
  metric(
    'router_inbound_queue_capacity',
    'Configured inbox capacity.',
    'gauge',
    all.map((m) => [label(m.agentId), m.capacity]),
  );
  metric(
    'router_in_flight',
    'Deliveries written to the stream and not yet confirmed.',
    'gauge',
    all.map((m) => [label(m.agentId), m.inFlight]),
  );
  metric(
    'router_enqueue_rejects_total',
    'Refused admissions by reason.',
    'counter',
    all.flatMap((m) =>
      Object.entries(m.rejects).map(([reason, n]): [string, number] => [label(m.agentId, { reason }), n]),
    ),
  );
  metric(
    'router_nacks_total',
    'NACKs sent by error code.',
    'counter',
    all.flatMap((m) =>
      Object.entries(m.nacks).map(([code, n]): [string, number] => [label(m.agentId, { error_code: code }), n]),
    ),
  );
  for (const [name, help, pick] of [
    [
      'router_enqueue_latency_seconds',
      'Time from receipt to durable enqueue.',
      (m: AgentRouterMetrics) => m.enqueueLatency,
    ],
    [
      'agent_dequeue_latency_seconds',
      'Time from enqueue to delivery on the stream.',
      (m: AgentRouterMetrics) => m.dequeueLatency,
    ],
  ] as const) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} summary`);
    for (const m of all) {
      const s = pick(m);
      lines.push(
        `${name}_count${label(m.agentId)} ${s.count}`,
        `${name}_sum${label(m.agentId)} ${s.sumSeconds}`,
        `${name}_max${label(m.agentId)} ${s.maxSeconds}`,
      );
    }
  }
  metric(
    'router_oldest_enqueued_age_seconds',
    'Age of the oldest message not yet READ.',
    'gauge',
    all.map((m) => [label(m.agentId), m.oldestEnqueuedAgeSeconds]),
  );
  metric(
    'router_urgent_dispatches_total',
    'Deliveries from the PRIVILEGED lane.',
    'counter',
    all.map((m) => [label(m.agentId), m.urgentDispatches]),
  );
  return lines.join('\n') + '\n';
}
