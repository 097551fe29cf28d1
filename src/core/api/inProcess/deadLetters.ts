import type { DeadLetter, DeadLetterFilter } from '../../router/model';
import type { DeadLettersApi, DeadLettersChange, RequeueResult } from '../sections/deadLetters';
import type { InProcessHost } from './host';

/** CoordinatorApi's dead-letter section over a coordinator in this thread. */
export function deadLettersSection(host: InProcessHost): DeadLettersApi {
  const deadLettersChanged = host.emitter<DeadLettersChange>();
  host.subscribe(
    host.coordinator.router.onDidChangeDeadLetters(({ kind, id }) =>
      deadLettersChanged.fire(id === undefined ? { kind } : { kind, id }),
    ),
  );
  return {
    onDidChangeDeadLetters: deadLettersChanged.event,

    deadLetters(filter?: DeadLetterFilter): Promise<DeadLetter[]> {
      return host.run((c) => c.router.deadLetters(filter));
    },

    deadLetter(id: number): Promise<DeadLetter | undefined> {
      return host.run((c) => c.router.deadLetter(id));
    },

    deadLetterCount(): Promise<number> {
      return host.run((c) => c.router.deadLetterCount());
    },

    exportDeadLetters(filter?: DeadLetterFilter): Promise<Record<string, unknown>> {
      return host.run((c) => c.router.exportDeadLetters(filter));
    },

    requeueDeadLetter(id: number, options: { readonly correlationId?: string } = {}): Promise<RequeueResult> {
      return host.run((c) => c.router.requeue(id, { correlationId: options.correlationId || c.ids.uuid() }));
    },
  };
}
