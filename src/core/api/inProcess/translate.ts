import { CredentialError } from '../../credentials/credentials';
import { HitlStateError } from '../../hitl/hitlService';
import { HitlRequestError } from '../../hitl/request';
import { LaunchError } from '../../launch/launches';
import { SessionError } from '../../sessions/sessions';
import { NegotiationError } from '../../policy/speaker';
import { SchedulerError } from '../../scheduler/scheduler';
import { BindingRequestError, BindingStateError } from '../../worktree/bindings';
import { MergeRefusedError } from '../../worktree/mergeBack';
import { WorktreeOperationError } from '../../worktree/operations';
import { InvalidWorktreeIdError } from '../../worktree/snapshots';
import { WorktreeRefusedError } from '../../worktree/worktrees';
import { CoordinatorApiError } from '../errors';

/** The core's errors the user must see become CoordinatorApiErrors with the same message; others pass as they are. */
export function translateError(err: unknown): unknown {
  if (err instanceof HitlStateError)
    return new CoordinatorApiError(err.reason === 'settled' ? 'settled' : 'not_found', err.message);
  if (err instanceof HitlRequestError) return new CoordinatorApiError('invalid', err.message, err.code);
  if (err instanceof CredentialError) return new CoordinatorApiError(err.code, err.message);
  if (err instanceof WorktreeOperationError) return new CoordinatorApiError(err.kind, err.message, err.reason);
  if (err instanceof WorktreeRefusedError) {
    return err.reason === 'not_found'
      ? new CoordinatorApiError('not_found', err.message, err.reason)
      : err.reason === 'bad_base'
        ? new CoordinatorApiError('invalid', err.message, err.reason)
        : new CoordinatorApiError('refused', err.message, err.reason);
  }
  if (err instanceof MergeRefusedError)
    return new CoordinatorApiError(err.reason === 'not_found' ? 'not_found' : 'refused', err.message, err.reason);
  if (err instanceof BindingStateError) return new CoordinatorApiError('invalid', err.message, 'INVALID_TRANSITION');
  if (err instanceof BindingRequestError)
    return new CoordinatorApiError(
      err.kind === 'not_found' ? 'not_found' : err.kind === 'invalid_argument' ? 'invalid' : 'refused',
      err.message,
      err.code,
    );
  if (err instanceof SchedulerError) return new CoordinatorApiError(err.code, err.message, err.sw4rmCode);
  if (err instanceof InvalidWorktreeIdError) return new CoordinatorApiError('invalid', err.message, 'VALIDATION_ERROR');
  if (err instanceof LaunchError) return new CoordinatorApiError(err.kind, err.message, err.code);
  if (err instanceof SessionError) return new CoordinatorApiError(err.kind, err.message, err.errorCode);
  if (err instanceof NegotiationError) {
    return new CoordinatorApiError(
      err.kind === 'invalid' ? 'invalid' : err.kind === 'not_found' ? 'not_found' : 'refused',
      err.message,
      err.code,
    );
  }
  return err;
}
