import { DEFAULT_CODE, SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';
/**
 * Why a change was refused, in terms the user can act on; the message is meant to be shown as it is.
 * - `not_found`: no such invocation;
 * - `settled`: the invocation was already settled;
 * - `invalid`: the request itself cannot be accepted (`sw4rmCode` says which SW4RM error, e.g. VALIDATION_ERROR);
 * - `refused`: the operation would lose or break something now (`sw4rmCode` names the reason); the message says what to do;
 * - `stopped`: the coordinator behind this API has stopped.
 */
export type CoordinatorApiErrorCode = 'not_found' | 'settled' | 'invalid' | 'refused' | 'stopped';

export class CoordinatorApiError extends SwarmError {
  /**
   * `sw4rmCode`: the SW4RM error code, if any; for `refused`, the reason the operation was refused (a worktree's
   * `bound`, `dirty`, `unmerged`, `locked`…, a merge's `target_dirty`, `checked_out_elsewhere`…).
   */
  constructor(
    readonly code: CoordinatorApiErrorCode,
    message: string,
    readonly sw4rmCode?: string,
  ) {
    super(message);
    this.name = 'CoordinatorApiError';
  }

  override get errorKind(): ErrorKind {
    return this.code === 'settled' || this.code === 'refused'
      ? 'precondition'
      : this.code === 'stopped'
        ? 'unavailable'
        : this.code;
  }

  override get errorCode(): Sw4rmCode {
    return this.sw4rmCode ?? DEFAULT_CODE[this.errorKind];
  }
}
