import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

const KINDS: Readonly<Record<SchedulerError['code'], ErrorKind>> = {
  not_found: 'not_found',
  refused: 'precondition',
  invalid: 'invalid',
};
/** The SW4RM code of a refusal that names none (what SchedulerService's errorStatus answered before the kernel's kinds). */
const CODES: Readonly<Record<SchedulerError['code'], Sw4rmCode>> = {
  not_found: 'NO_ROUTE',
  refused: 'VALIDATION_ERROR',
  invalid: 'VALIDATION_ERROR',
};

/** Why an operation on a task or agent was refused (the API maps it onto CoordinatorApiError, the server onto a status). */
export class SchedulerError extends SwarmError {
  constructor(
    readonly code: 'not_found' | 'refused' | 'invalid',
    message: string,
    readonly sw4rmCode?: string,
  ) {
    super(message);
    this.name = 'SchedulerError';
  }

  /** not_found → NOT_FOUND, refused → FAILED_PRECONDITION, invalid → INVALID_ARGUMENT. */
  get errorKind(): ErrorKind {
    return KINDS[this.code];
  }

  get errorCode(): Sw4rmCode {
    return this.sw4rmCode ?? CODES[this.code];
  }
}
