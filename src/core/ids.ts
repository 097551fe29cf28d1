import { v4 as uuidv4 } from 'uuid';

/** Where fresh identifiers come from. Injected so tests can make them predictable. */
export interface IdSource {
  /** A new UUIDv4 string. */
  uuid(): string;
}

export const randomIds: IdSource = { uuid: () => uuidv4() };

/** Predictable ids for tests: `prefix-1`, `prefix-2`, ... in UUID shape is not needed there. */
export class SequentialIds implements IdSource {
  private next = 1;
  constructor(private readonly prefix = '00000000-0000-4000-8000-') {}
  uuid(): string {
    return this.prefix + String(this.next++).padStart(12, '0');
  }
}
