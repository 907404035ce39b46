/**
 * A stopping daemon waits at most this, once its runs ended, for Redis to take back the fires and
 * deliveries it held. Past it (Redis away) it leaves them held and stops: their hold expires
 * (cluster.hold) and whichever daemon takes them goes on as after a daemon killed mid-run.
 */
export const LET_GO_MS = 5_000;

/**
 * `work`'s value, or what `late` gives (or throws) once `ms` passed first; `work` goes on either
 * way. How anything that waits on Redis stays bounded while Redis connected does not answer.
 */
export async function within<T, L>(work: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), ms)));
  try {
    const first = await Promise.race([work.then((value) => ({ value })), waited]);
    return first === "late" ? late() : first.value;
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `promise` settled (either way) within `ms`; it goes on either way. */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return within(
    promise.then(
      () => true,
      () => true,
    ),
    ms,
    () => false,
  );
}
