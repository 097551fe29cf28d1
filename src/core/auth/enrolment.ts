import * as path from 'node:path';
import type { CallContext } from '../context';
import type { Credentials } from '../credentials/credentials';
import { readSecretFile, writeSecretFile } from './token';

export const ENROLMENT_FILE_NAME = 'enrolment-token';

/**
 * The data folder's enrolment credential (README, "Security model"): minted at first start, its hash in the
 * store and its token in `<data folder>/enrolment-token` (0600), so that the editor can hand it to new integrated
 * terminals after a restart. A file that no longer matches an active enrolment credential is replaced.
 */
export function loadOrMintEnrolment(dataDir: string, credentials: Credentials, ctx: CallContext): string {
  const file = path.join(dataDir, ENROLMENT_FILE_NAME);
  const existing = readSecretFile(file);
  if (existing !== undefined) {
    const principal = credentials.verify(existing);
    if (typeof principal !== 'string' && principal.kind === 'enrolment') return existing;
  }
  return rotateEnrolment(dataDir, credentials, 'coordinator', ctx);
}

/** Revokes the enrolment credential and mints a new one (written to the file); agents it enrolled stay its own. */
export function rotateEnrolment(dataDir: string, credentials: Credentials, by: string, ctx: CallContext): string {
  const minted = credentials.mintEnrolment(by, 'terminals of this data folder', ctx);
  writeSecretFile(path.join(dataDir, ENROLMENT_FILE_NAME), minted.token);
  return minted.token;
}
