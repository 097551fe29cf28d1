/**
 * Waits for something a real process or socket does, by polling until `check` answers a value other than
 * undefined or the deadline passes. Never used for time-based rules of the core: those run on ManualClock.
 */
export async function pollUntil<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  deadlineMs = 10_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Answers what `promise` answers, or fails with the error `timedOut` makes once `deadlineMs` passed (a process's deadline). */
export async function within<T>(promise: Promise<T>, deadlineMs: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), deadlineMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `within` for a test's own waits: fails saying what it waited for (a ManualClock never ends a wait on its own). */
export function settles<T>(promise: Promise<T>, what: string, ms = 5_000): Promise<T> {
  return within(promise, ms, () => new Error(`timed out after ${ms} ms waiting for ${what}`));
}
