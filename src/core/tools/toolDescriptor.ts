/** A tool's descriptor types, apart from model.ts so that descriptors.ts, which model.ts re-exports, need not import model.ts. Import them from model.ts. */

/** A JSON Schema (draft 2020-12 subset that ajv checks), as a plain JSON value. */
export type JsonSchema = Readonly<Record<string, unknown>>;

/** What a tool may change (RFC §18.1 "side-effect classes"); `none` reads only. */
export type SideEffectClass = 'none' | 'filesystem' | 'git' | 'network' | 'process';

/** One tool as DescribeTools lists it (connector.proto ToolDescriptor). */
export interface ToolDescriptor {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  /** Repeating the call with the same arguments leaves the same state (RFC §18.2: retries are safe). */
  readonly idempotent: boolean;
  /** Runs only for an agent bound to a worktree; otherwise `worktree_not_bound` (RFC §6.4). */
  readonly needsWorktree: boolean;
  /** Advertised; the built-in tools bound their work by sizes instead (README, "Workspace tools"). */
  readonly defaultTimeoutS: number;
  /** Calls of this tool running at once, coordinator-wide; more wait in a FIFO (RFC §18.5: queued, not refused). */
  readonly maxConcurrency: number;
  readonly sideEffects: SideEffectClass;
  /** Every class the provider listed (side_effects is comma-separated on the wire); `sideEffects` is the first. Absent = [sideEffects]. */
  readonly sideEffectClasses?: readonly SideEffectClass[];
}
