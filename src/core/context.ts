/** Who is asking, for the log: every call into an area carries one. */
export interface CallContext {
  readonly correlationId: string;
  /**
   * Who the caller authenticated as, when it did (README, "Security model"): `operator`,
   * `agent:<credential id>` or `enrolment:<credential id>`. Absent for the coordinator's own work and with auth `none`.
   */
  readonly principal?: string;
}
