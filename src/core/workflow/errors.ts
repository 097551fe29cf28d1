import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** The kinds of a workflow refusal. */
export type WorkflowErrorKind = 'not_found' | 'invalid' | 'exists' | 'refused' | 'permission';

/** Each kind as the kernel's ErrorKind (one gRPC status, one MCP error). */
const KINDS: Readonly<Record<WorkflowErrorKind, ErrorKind>> = {
  not_found: 'not_found',
  invalid: 'invalid',
  exists: 'exists',
  refused: 'precondition',
  permission: 'permission',
};

/**
 * Why a workflow operation was refused: `not_found` (no such workflow or node), `invalid` (the request itself: bad
 * JSON data, a definition that does not validate), `exists` (another definition has that workflow_id), `refused` (the
 * workflow's state does not allow it now; the message says what would), `permission` (the caller may not: README,
 * "Workflows: who may call"). `code` is the SW4RM-style code. A SwarmError: `errorKind` is the kind as the kernel
 * names it ('refused' → 'precondition'), `errorCode` the code.
 */
export class WorkflowError extends SwarmError {
  constructor(
    readonly kind: WorkflowErrorKind,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'WorkflowError';
  }

  get errorKind(): ErrorKind {
    return KINDS[this.kind];
  }

  get errorCode(): Sw4rmCode {
    return this.code;
  }
}
