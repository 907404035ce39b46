import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { silentLogger, type Logger } from "../log.js";
import { spendLinesOf, tokensOf, type SpendBook, type SpendLedger, type SpendLine, type SpentToday } from "../store/spend-ledger.js";
import { errorText } from "../text.js";
import { localClock } from "../time.js";
import { settlesWithin, within } from "./settle.js";

/**
 * What a day in a time zone spent, every node's calls summed as they are made: a hash with `cost`
 * and `tokens`, and `<job>:cost`, `<job>:tokens` per job (job names hold no ":").
 */
const dayKey = (timeZone: string, date: string) => `countd:spend:day:${timeZone}:${date}`;
/** Every node's calls of one UTC day, a JSON line each (as in a spend file), for `countd cost`. */
const callsKey = (utcDate: string) => `countd:spend:calls:${utcDate}`;
/** Set once a call is counted: a call sent again after a lost reply is not counted twice. */
const seenKey = (id: string) => `countd:spend:seen:${id}`;
/** Longer than any outage a daemon rides out holding an unsent call in memory. */
const SEEN_KEPT_MS = 86_400_000;
/**
 * How long a budget check waits for Redis before it goes on with this node's own figures: a check
 * comes before every LLM call, and a Redis that accepts connections but does not answer must not hang runs.
 */
export const CLUSTER_FIGURES_WAIT_MS = 2_000;
const DAY_MS = 86_400_000;

/**
 * Counts a call once. KEYS: seen, day, calls; ARGV: kept (ms), job, cost (USD, 0 for an unpriced
 * call), tokens, the call's line.
 */
const RECORD = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ${SEEN_KEPT_MS}) then return 0 end
redis.call('HINCRBYFLOAT', KEYS[2], 'cost', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'tokens', ARGV[4])
redis.call('HINCRBYFLOAT', KEYS[2], ARGV[2] .. ':cost', ARGV[3])
redis.call('HINCRBY', KEYS[2], ARGV[2] .. ':tokens', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[1])
return 1
`;

interface Unsent {
  id: string;
  line: SpendLine;
  /** The budget day it counts in, in the time zone of when it was made. */
  timeZone: string;
  date: string;
}

export interface ClusterSpendOptions {
  /** budget.timezone, read at each call: the day whose counters a call adds to. */
  timeZone: () => string;
  /** How long a day's calls are kept in Redis: retention.audit, as the spend files are kept. */
  keptMs: () => number;
  now?: () => Date;
  log?: Logger;
}

/**
 * The budgets' spend in a cluster: every node's calls count against the daily caps and show in
 * `countd cost` on any node. Each call goes to this node's spend file (its own audit, as on a
 * daemon alone) and to Redis, where one Lua step adds it to its day's counters (HINCRBYFLOAT, keyed
 * by the day in budget.timezone) and to its UTC day's list of calls, both expiring after
 * retention.audit.
 *
 * When Redis is away a budget check never waits for it: it goes on with this node's own figures
 * (fail open, as the spend file errs toward letting a call through), and says so once per outage.
 * Calls made meanwhile are kept in memory and sent, each counted once, when Redis is back.
 */
export class ClusterSpend implements SpendBook {
  private readonly unsent: Unsent[] = [];
  /** The call being sent: Redis answers a read sent after it with it counted. */
  private inFlight: Unsent | undefined;
  private sending: Promise<void> | undefined;
  private readonly now: () => Date;
  private readonly log: Logger;
  private away = false;

  constructor(
    private readonly redis: Redis,
    private readonly local: SpendLedger,
    private readonly opts: ClusterSpendOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "spend" });
    redis.on("ready", () => void this.send());
  }

  record(line: SpendLine): void {
    this.local.record(line);
    const timeZone = this.opts.timeZone();
    this.unsent.push({ id: randomUUID(), line, timeZone, date: localClock(new Date(line.at), timeZone).date });
    void this.send();
  }

  async today(timeZone: string, job?: string): Promise<SpentToday> {
    const date = localClock(this.now(), timeZone).date;
    const fields = job === undefined ? ["cost", "tokens"] : [`${job}:cost`, `${job}:tokens`];
    try {
      if (this.redis.status !== "ready") throw new Error(`the connection is ${this.redis.status}`);
      const [cost, tokens] = await within(this.redis.hmget(dayKey(timeZone, date), ...fields), CLUSTER_FIGURES_WAIT_MS, () => {
        throw new Error(`no answer within ${CLUSTER_FIGURES_WAIT_MS} ms`);
      });
      this.away = false;
      // Calls this node made that Redis does not have yet count too.
      const spent = { cost: Number(cost ?? 0), tokens: Number(tokens ?? 0), date };
      for (const call of this.unsent) {
        if (call === this.inFlight || call.timeZone !== timeZone || call.date !== date || (job !== undefined && call.line.job !== job))
          continue;
        spent.cost += call.line.cost ?? 0;
        spent.tokens += tokensOf(call.line.usage);
      }
      return spent;
    } catch (err) {
      if (!this.away)
        this.log.warn(
          { error: errorText(err) },
          "cannot read the cluster's spend from Redis; budgets count this node's calls only until it is back",
        );
      this.away = true;
      return this.local.today(timeZone, job);
    }
  }

  /**
   * Resolves once this node's file has every call and Redis every call it could be sent, waiting
   * for a Redis that does not answer no longer than a budget check does; the rest is logged.
   */
  async flush(): Promise<void> {
    await Promise.all([this.local.flush(), settlesWithin(this.send(), CLUSTER_FIGURES_WAIT_MS)]);
    if (this.unsent.length > 0)
      this.log.warn(
        { calls: this.unsent.length },
        "calls not counted in Redis: the cluster's budgets and `countd cost` miss them (this node's spend file has them)",
      );
  }

  /** Sends the unsent calls in order, one sender at a time; stops at the first that fails, keeping it and those after it. */
  private send(): Promise<void> {
    this.sending ??= (async () => {
      try {
        while (this.unsent.length > 0) {
          const call = this.unsent[0]!;
          const { line } = call;
          const args = [this.opts.keptMs(), line.job, line.cost ?? 0, tokensOf(line.usage), JSON.stringify(line)];
          this.inFlight = call;
          try {
            await this.redis.eval(RECORD, 3, seenKey(call.id), dayKey(call.timeZone, call.date), callsKey(line.at.slice(0, 10)), ...args);
          } catch (err) {
            this.log.warn(
              { unsent: this.unsent.length, error: errorText(err) },
              "could not count a call's price in Redis; kept until Redis is back",
            );
            return;
          } finally {
            this.inFlight = undefined;
          }
          this.unsent.shift();
        }
      } finally {
        this.sending = undefined;
      }
    })();
    return this.sending;
  }
}

/** Every node's calls made since `since`, oldest day first. */
export async function readClusterSpend(redis: Redis, since: Date, now = new Date()): Promise<SpendLine[]> {
  const lines: SpendLine[] = [];
  for (let day = since.getTime() - DAY_MS; day <= now.getTime() + DAY_MS; day += DAY_MS) {
    const texts = await redis.lrange(callsKey(new Date(day).toISOString().slice(0, 10)), 0, -1);
    const values = texts.flatMap((text) => {
      try {
        return [JSON.parse(text) as unknown];
      } catch {
        return [];
      }
    });
    for (const line of spendLinesOf(values)) if (Date.parse(line.at) >= since.getTime()) lines.push(line);
  }
  return lines;
}
