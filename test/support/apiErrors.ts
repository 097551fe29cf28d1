import { strict as assert } from 'node:assert';
import { CoordinatorApiError } from '../../src/core/api';

/** The CoordinatorApiError a call is refused with; fails the test when it is answered or fails otherwise. */
export async function rejection(promise: Promise<unknown>): Promise<CoordinatorApiError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof CoordinatorApiError, `a CoordinatorApiError, not ${String(err)}`);
    return err;
  }
  assert.fail('the call was expected to be refused');
}
