/**
 * The longest delay setTimeout keeps: Node fires at once for anything beyond 2^31-1 ms (about
 * 24.8 days), so longer waits are cut to it or refused.
 */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;
