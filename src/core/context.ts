/** Who is asking, for the log: every call into an area carries one. */
export interface CallContext {
  readonly correlationId: string;
}
