/**
 * When a failed delivery is tried again. The first attempt is immediate; after the n-th failure
 * the wait is RETRY_DELAYS_MS[n - 1], then hourly, until GIVE_UP_AFTER_MS after the delivery was
 * queued.
 */
export const RETRY_DELAYS_MS = [30_000, 120_000, 600_000, 1_800_000, 3_600_000] as const;
export const HOURLY_MS = 3_600_000;
export const GIVE_UP_AFTER_MS = 24 * HOURLY_MS;
/** Spread of each wait, so deliveries that failed together (a receiver outage) do not retry together. */
export const JITTER = 0.15;

/**
 * The wait after `attempts` failed attempts, jittered by ±JITTER; a longer Retry-After from the
 * receiver (429, 503) wins.
 */
export function retryDelayMs(attempts: number, random: () => number, retryAfterMs?: number): number {
  const base = RETRY_DELAYS_MS[attempts - 1] ?? HOURLY_MS;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random()));
  return Math.max(jittered, retryAfterMs ?? 0);
}
