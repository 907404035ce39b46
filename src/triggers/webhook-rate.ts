const MINUTE_MS = 60_000;

/** At most `limit` requests in any minute: the times of the last `limit` taken, oldest first. */
export class RateWindow {
  private readonly taken: number[] = [];

  constructor(readonly limit: number) {}

  /** 0 when a request may go now (and it is counted), else how many milliseconds until one may. */
  take(now: number): number {
    while (this.taken.length > 0 && now - this.taken[0]! >= MINUTE_MS) this.taken.shift();
    if (this.taken.length >= this.limit) return this.taken[0]! + MINUTE_MS - now;
    this.taken.push(now);
    return 0;
  }
}
