import type { Redis } from "ioredis";
import { silentLogger, type Logger } from "../log.js";
import type { RunRecord } from "../store/run-record.js";
import { hasHistory, RUNS_KEPT_PER_JOB, runRecordShape, type RunHistoryStore } from "../store/run-history.js";

/** Every key of the cluster's run history starts with this; BullMQ's queues use the prefix `countd` too, with their own names. */
const PREFIX = "countd:history";
/** The set of jobs with runs. */
const JOBS_KEY = PREFIX;
/** A job's records by id (a hash), and their order (a sorted set by start time); job names hold no ":". */
const recordsKey = (job: string) => `${PREFIX}:${job}`;
const orderKey = (job: string) => `${PREFIX}:${job}:order`;

/**
 * Saves records and drops the oldest past the cap, in one step: daemons saving runs of one job at
 * once never trim each other's new records. A record saved again keeps its place (ZADD NX).
 * KEYS: records, order, jobs; ARGV: cap, job, then id, start time (ms), JSON for each record.
 */
const SAVE = `
for i = 3, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 1], ARGV[i])
end
redis.call('SADD', KEYS[3], ARGV[2])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
end
return 0
`;

/**
 * The cluster's run history in Redis, the same for every daemon: `countd history` on any node lists
 * every node's runs. Capped per job at RUNS_KEPT_PER_JOB like the files of a daemon alone. A save
 * while Redis is away fails at once (the `records` connection): the runner keeps the record and
 * saves it again later.
 */
export class RedisRunHistory implements RunHistoryStore {
  private readonly seen = new Map<string, Set<string>>();
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    opts: { log?: Logger } = {},
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "run-history" });
  }

  async runs(job: string): Promise<RunRecord[]> {
    const ids = await this.redis.zrange(orderKey(job), 0, -1);
    if (ids.length === 0) return [];
    const texts = await this.redis.hmget(recordsKey(job), ...ids);
    const runs: RunRecord[] = [];
    for (const [i, text] of texts.entries()) {
      // Trimmed by another daemon between the two reads.
      if (text === null) continue;
      const run = this.parse(job, ids[i]!, text);
      if (run) runs.push(run);
    }
    this.note(job, runs);
    return runs;
  }

  loadedIds(job: string): Iterable<string> {
    return this.seen.get(job) ?? [];
  }

  async jobs(): Promise<string[]> {
    return (await this.redis.smembers(JOBS_KEY)).filter(hasHistory).sort();
  }

  async save(job: string, runs: readonly RunRecord[]): Promise<void> {
    if (!hasHistory(job)) throw new Error(`"${job}" is not a job name; run histories are kept per job`);
    const args = runs.flatMap((run) => [run.id, String(Date.parse(run.startedAt)), JSON.stringify(run)]);
    await this.redis.eval(SAVE, 3, recordsKey(job), orderKey(job), JOBS_KEY, RUNS_KEPT_PER_JOB, job, ...args);
    this.note(job, runs);
  }

  private note(job: string, runs: readonly RunRecord[]): void {
    let ids = this.seen.get(job);
    if (!ids) this.seen.set(job, (ids = new Set()));
    for (const run of runs) ids.add(run.id);
  }

  /** A record is checked as a file's line is; one that does not fit is logged and skipped (it stays in Redis until trimmed). */
  private parse(job: string, id: string, text: string): RunRecord | undefined {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.log.warn({ job, runId: id, problem: "is not JSON" }, "run record in Redis cannot be used; skipped");
      return undefined;
    }
    const parsed = runRecordShape.safeParse(value);
    if (parsed.success && parsed.data.job === job && parsed.data.id === id) return parsed.data;
    const problem = parsed.success
      ? `is a record of ${parsed.data.job}/${parsed.data.id}`
      : parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ");
    this.log.warn({ job, runId: id, problem }, "run record in Redis cannot be used; skipped");
    return undefined;
  }
}
