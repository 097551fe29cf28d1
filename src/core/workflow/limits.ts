/** The bounds of a workflow definition (RFC §17.7: what CreateWorkflow refuses beyond them; validate.ts). */
export const WORKFLOW_LIMITS = {
  maxNodes: 500,
  /** Dependencies of one node. */
  maxDependencies: 500,
  /** Dependencies of all the nodes together. */
  maxTotalDependencies: 10_000,
  /** Entries of every map of a definition together: its metadata, and each node's input_mapping, output_mapping, metadata. */
  maxMapEntries: 8_192,
  /** Characters of every `route` of a definition together (each one also at most ROUTE_LIMITS.maxExpressionChars, 4 KiB): CEL compiles each. */
  maxTotalRouteChars: 32_768,
  /** Characters of every SCHEDULE node's `schedule` together (each also at most SCHEDULE_LIMITS.maxChars, 256): cron-parser reads each, ≈ 0.06 ms for a long one. */
  maxTotalScheduleChars: 16_384,
  /** Node ids and workflow ids. */
  maxIdChars: 128,
  /** An agent id or `type:<agent type>` (the scheduler's target bound). */
  maxAgentIdChars: 256,
  maxMetadataEntries: 64,
  maxMetadataKeyChars: 128,
  maxMetadataValueChars: 4_096,
  /** Entries of input_mapping and of output_mapping, and the characters of each key and value. */
  maxMappingEntries: 256,
  maxMappingChars: 1_024,
  maxIterations: 1_000,
} as const;

/** How often loop backs may re-run a node when its metadata has no `max_iterations`. */
export const DEFAULT_MAX_ITERATIONS = 10;

export type WorkflowLimits = { readonly [K in keyof typeof WORKFLOW_LIMITS]: number };
