import { createHash } from 'node:crypto';
import type { HitlInvocation } from '../hitl/model';

/** Job identity (RFC §9.2): sha256 of the target, the content type ('' = application/json) and the params bytes, length-prefixed. */
export function jobKeyOf(target: string, contentType: string, params: Buffer): string {
  const hash = createHash('sha256');
  for (const part of [Buffer.from(target, 'utf8'), Buffer.from(contentType || 'application/json', 'utf8'), params]) {
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(part.length));
    hash.update(length).update(part);
  }
  return hash.digest('hex');
}

/** What the gate knows of a duplicate job's admission: asked (pending), allowed or refused. */
export type AdmissionState =
  | { readonly state: 'pending'; readonly invocationId: string; readonly duplicateOf: string }
  | { readonly state: 'allowed'; readonly invocationId: string; readonly duplicateOf: string }
  | { readonly state: 'refused'; readonly invocationId: string; readonly duplicateOf: string; readonly reason: string };

/** `duplicates`: the open tasks of the same job when it was asked; a task that ends leaves the list (see `forget`). */
export interface DuplicateUse {
  readonly kind: 'duplicate';
  readonly taskId: string;
  readonly duplicateOf: string;
  readonly duplicates: Set<string>;
}

/**
 * The one rule for a settled duplicate invocation: only an approval decided (by a human or an approving rule) allows
 * the duplicate; a denial, a timeout or a cancellation refuses it (with the reason told to the submitter).
 */
export function duplicateAdmission(invocation: HitlInvocation, use: DuplicateUse): AdmissionState {
  const action = invocation.decision?.action ?? 'deny';
  const allowed = invocation.state === 'decided' && action === 'approve';
  const reason = allowed
    ? ''
    : `a duplicate of task '${use.duplicateOf}' (the same target, content type and params): ${
        invocation.state === 'timed_out'
          ? 'no approval before the deadline'
          : invocation.state === 'cancelled'
            ? 'its approval was cancelled'
            : `${action} by ${invocation.decision?.origin.by ?? 'the operator'}`
      }${invocation.decision?.rationale ? ` (${invocation.decision.rationale.slice(0, 300)})` : ''}`;
  return allowed
    ? { state: 'allowed', invocationId: invocation.id, duplicateOf: use.duplicateOf }
    : { state: 'refused', invocationId: invocation.id, duplicateOf: use.duplicateOf, reason };
}
