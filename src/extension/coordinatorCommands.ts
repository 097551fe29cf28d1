import * as vscode from 'vscode';
import type { CoordinatorApi } from '../core/api';
import { notificationText } from './notificationText';
import type { ReadOnlyDocuments } from './readOnlyDocuments';

/** What a `sw4rm:` document of the coordinator says while none runs. */
const NOT_RUNNING_DOCUMENT = 'The SW4RM coordinator is not running.\n';

/**
 * Commands over the running coordinator: bound to its API (undefined while it is stopped; each command then says so
 * through requireRunning), with `sw4rm:` read-only documents read from it.
 */
export abstract class CoordinatorCommands {
  protected api: CoordinatorApi | undefined;

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    this.api = api;
  }

  /** Documents of `kind` get their text from the running coordinator when opened, or say that none runs. */
  protected registerDocument(
    documents: ReadOnlyDocuments,
    kind: string,
    text: (api: CoordinatorApi, key: string) => Promise<string>,
  ): void {
    coordinatorDocument(documents, kind, () => this.api, text);
  }
}

/** Documents of `kind` get their text from the coordinator `api()` answers when opened, or say that none runs. */
export function coordinatorDocument(
  documents: ReadOnlyDocuments,
  kind: string,
  api: () => CoordinatorApi | undefined,
  text: (api: CoordinatorApi, key: string) => Promise<string>,
): void {
  documents.register(kind, async (key) => {
    const current = api();
    return current ? text(current, key) : NOT_RUNNING_DOCUMENT;
  });
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The coordinator's words (e.g. it stopped while a form was open), after what failed, as notification text; nothing was picked. */
export function showError(err: unknown, what?: string): undefined {
  void vscode.window.showErrorMessage(notificationText(what ? `${what}: ${messageOf(err)}` : messageOf(err)));
  return undefined;
}
