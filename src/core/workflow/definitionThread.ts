import * as fs from 'node:fs';
import * as path from 'node:path';
import { WorkerThread } from '../workerThread';
import { parseDefinitionText } from './definitionFile';
import type { WorkflowDefinition, WorkflowFileIssue } from './model';

/** A definition file read: the definition when it could be shaped, and every issue placed in the file. */
export interface ParsedDefinition {
  readonly definition?: WorkflowDefinition;
  readonly issues: readonly WorkflowFileIssue[];
}

/**
 * Texts up to this many characters are parsed on the caller's thread (a few ms at most); longer ones on the definition
 * worker: `yaml` takes about 0.9 s per MiB (definition files are read up to 1 MiB), and the file is the workspace's,
 * which agents write.
 */
export const DEFINITION_TEXT_ON_THREAD_CHARS = 16 * 1024;

/** Where the worker's script is: beside this module (tsc output) or beside the bundle (dist/definitionWorker.js). */
export function definitionWorkerScript(dir: string = __dirname): string | undefined {
  const script = path.join(dir, 'definitionWorker.js');
  return fs.existsSync(script) ? script : undefined;
}

let thread: WorkerThread<{ text: string; fileName: string }, ParsedDefinition> | null | undefined;

function failed(why: string): ParsedDefinition {
  return {
    issues: [
      {
        severity: 'error',
        code: 'internal',
        path: '',
        message: `the definition file could not be read: ${why}`,
        line: 0,
        column: 0,
        endLine: 0,
        endColumn: 0,
      },
    ],
  };
}

/**
 * parseDefinitionText (without `validated`: creating the workflow validates it again), on the definition worker for a
 * text over DEFINITION_TEXT_ON_THREAD_CHARS, so the coordinator's event loop waits for none of the parsing. Without the
 * worker's script (not built), on this thread.
 */
export function parseDefinitionTextOffThread(text: string, fileName: string): Promise<ParsedDefinition> {
  const here = (): ParsedDefinition => {
    const { definition, issues } = parseDefinitionText(text, fileName);
    return definition ? { definition, issues } : { issues };
  };
  if (typeof text !== 'string' || text.length <= DEFINITION_TEXT_ON_THREAD_CHARS) return Promise.resolve(here());
  if (thread === undefined) {
    const script = definitionWorkerScript();
    thread =
      script === undefined
        ? null
        : new WorkerThread(script, failed, {
            timeoutMs: 60_000,
            maxOldGenerationSizeMb: 512,
            what: 'reading the definition file',
          });
  }
  if (thread === null) return Promise.resolve(here());
  return thread.run({ text, fileName });
}
