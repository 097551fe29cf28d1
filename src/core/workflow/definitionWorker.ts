/**
 * The worker thread that reads large workflow definition files off the event loop (definitionThread.ts): each request
 * `{id, text, fileName}` is answered `{id, definition?, issues}` by parseDefinitionText. Bundled on its own as dist/definitionWorker.js.
 */
import { parentPort } from 'node:worker_threads';
import { lowerThisThreadsPriority } from '../workerThread';
import { parseDefinitionText } from './definitionFile';

lowerThisThreadsPriority();

parentPort?.on('message', (request: { id: number; text: string; fileName: string }) => {
  try {
    const { definition, issues } = parseDefinitionText(request.text, request.fileName);
    parentPort?.postMessage(definition ? { id: request.id, definition, issues } : { id: request.id, issues });
  } catch (err) {
    const message = `the definition file could not be read: ${(err as Error).message.slice(0, 120)}`;
    parentPort?.postMessage({
      id: request.id,
      issues: [
        { severity: 'error', code: 'internal', path: '', message, line: 0, column: 0, endLine: 0, endColumn: 0 },
      ],
    });
  }
});
