import { createHash } from 'node:crypto';
import * as path from 'node:path';

/** The folder under the extension's global storage that holds one data folder per workspace. */
export const STORES_FOLDER_NAME = 'stores';

/**
 * The default data folder of a workspace: `<global storage>/stores/<name>-<digest>`, where the digest is of the
 * workspace's folder paths (sorted, so reordering the folders of a multi-root workspace keeps the store) and the
 * name is the first folder's, for a person looking at the folder. The same folders find the same store after any
 * restart of the editor, whatever workspace-storage folder the editor hands out; another checkout of the repository
 * gets a store of its own.
 */
export function defaultDataFolder(globalStorage: string, workspaceFolders: readonly string[]): string {
  if (workspaceFolders.length === 0) return path.join(globalStorage, STORES_FOLDER_NAME, 'no-folder');
  const key = [...workspaceFolders]
    .map((folder) => path.resolve(folder))
    .sort()
    .join('\n');
  const digest = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const name =
    path
      .basename(path.resolve(workspaceFolders[0]))
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .slice(0, 40) || 'workspace';
  return path.join(globalStorage, STORES_FOLDER_NAME, `${name}-${digest}`);
}
