/**
 * A stopping daemon waits at most this, once its runs ended, for Redis to take back the fires and
 * deliveries it held. Past it (Redis away) it leaves them held and stops: their hold expires
 * (LOCK_MS) and whichever daemon takes them goes on as after a daemon killed mid-run.
 */
export const LET_GO_MS = 5_000;

/** Whether `promise` settled within `ms`; it goes on either way. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = promise.then(
    () => true,
    () => true,
  );
  const inTime = await Promise.race([settled, late]);
  clearTimeout(timer);
  return inTime;
}
