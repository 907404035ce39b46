import type { Redis } from "ioredis";
import * as z from "zod";
import { silentLogger, type Logger } from "../log.js";
import { isoTime } from "../store/quarantine.js";
import { jobStateShape, type AdoptingStateStore, type CheckInState, type JobState, type SharedState } from "../store/state.js";
import { errorText } from "../text.js";

/** Job states by job name (a hash of JSON; the heartbeat's check-ins are `@heartbeat`'s), the kill switch (an ISO time). */
const JOBS_KEY = "countd:state:jobs";
const PAUSED_ALL_KEY = "countd:state:paused-all";
/** Counts the changes: raised by every change, so a change made on an older copy is refused. */
const VERSION_KEY = "countd:state:version";
/** Told each change's version, so every daemon reads the state again at once. */
export const STATE_CHANNEL = "countd:state";

/** A change made by a busy cluster is refused and tried again on a fresh read this many times at most. */
const TRIES = 100;

/**
 * Writes a change only if the state is still at the version it was made on (a compare-and-set),
 * then raises the version and tells the other daemons.
 * KEYS: version, jobs, paused-all; ARGV: the version, the change as JSON
 * ({ jobs: { name: JSON or false }, pausedAll?: time or false }), the channel.
 */
const WRITE = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return false end
local change = cjson.decode(ARGV[2])
for name, value in pairs(change.jobs) do
  if value == false then redis.call('HDEL', KEYS[2], name) else redis.call('HSET', KEYS[2], name, value) end
end
if change.pausedAll == false then redis.call('DEL', KEYS[3]) elseif change.pausedAll ~= nil then redis.call('SET', KEYS[3], change.pausedAll) end
local version = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[3], version)
return version
`;

/**
 * The whole state at one version, or nil when the version is still ARGV[1] (the copy is current).
 * KEYS: version, jobs, paused-all.
 */
const READ = `
local version = redis.call('GET', KEYS[1])
if (version or '0') == ARGV[1] then return nil end
return {version, redis.call('HGETALL', KEYS[2]), redis.call('GET', KEYS[3])}
`;

interface Snapshot {
  version: string;
  data: SharedState;
}

/**
 * The cluster's shared state in Redis: every daemon sees the same pauses, catch-up slots,
 * one-shots done, failing streaks and the heartbeat's check-ins. Each daemon keeps a copy for the
 * synchronous reads (StateStore.isPaused, job()), read again whenever another daemon's change is
 * published on STATE_CHANNEL and after a reconnection. A change is made on the copy and written
 * only if nobody changed the state meanwhile; otherwise it is made again on a fresh read, so
 * concurrent changes from any daemons are never lost. What does not fit when read is logged and
 * left out of the copy.
 *
 * `redis`: a `records` connection, so a change while Redis is away fails at once (its caller
 * reports it: a fire not recorded, a pause refused); `subscriber`: a connection of its own, as
 * Redis allows nothing else on a subscribed one.
 */
export class RedisSharedState implements AdoptingStateStore {
  private copy: Snapshot = { version: "0", data: { jobs: {} } };
  /** Reads and changes one at a time, so the copy only ever moves forward. */
  private queue: Promise<unknown> = Promise.resolve();
  private reread: Promise<void> | undefined;
  private refreshing: Promise<void> | undefined;
  private readonly log: Logger;

  private constructor(
    private readonly redis: Redis,
    log: Logger,
  ) {
    this.log = log.child({ component: "shared-state" });
  }

  /**
   * Reads the state; with `subscriber`, follows its changes from then on (a daemon does; a command
   * that reads or changes it once need not).
   */
  static async open(redis: Redis, opts: { subscriber?: Redis; log?: Logger } = {}): Promise<RedisSharedState> {
    const state = new RedisSharedState(redis, opts.log ?? silentLogger);
    const { subscriber } = opts;
    if (subscriber) {
      subscriber.on("message", (channel: string, version: string) => {
        if (channel === STATE_CHANNEL && version !== state.copy.version) state.follow();
      });
      // ioredis subscribes again after a reconnection; what changed while away is read then.
      subscriber.on("ready", () => state.follow());
      await subscriber.subscribe(STATE_CHANNEL);
    }
    state.copy = await state.read();
    return state;
  }

  get data(): Readonly<SharedState> {
    return this.copy.data;
  }

  /**
   * A node that ran alone before it joined: its pauses, the slots last fired, the one-shots done and
   * the heartbeat's check-ins go into the cluster's state. What the cluster has already stays: a
   * pause keeps its first time, the later slot wins. Failing streaks start anew.
   */
  async adopt(held: SharedState): Promise<{ jobs: number; paused: string[] }> {
    const { jobs, pausedAllAt } = held;
    const carried = Object.entries(jobs).filter(
      ([, job]) => job.pausedAt !== undefined || job.done || job.lastScheduledAt !== undefined || job.checkIns !== undefined,
    );
    await this.update((data) => {
      for (const [name, job] of carried) {
        const into = (data.jobs[name] ??= {});
        if (job.pausedAt !== undefined) into.pausedAt ??= job.pausedAt;
        if (job.done) into.done = true;
        if (isLater(job.lastScheduledAt, into.lastScheduledAt)) into.lastScheduledAt = job.lastScheduledAt;
        if (job.checkIns) into.checkIns = mergeCheckIns(into.checkIns ?? { delivered: [] }, job.checkIns);
      }
      if (pausedAllAt !== undefined) data.pausedAllAt ??= pausedAllAt;
    });
    return { jobs: carried.length, paused: carried.filter(([, job]) => job.pausedAt !== undefined).map(([name]) => name) };
  }

  update(change: (data: SharedState) => void): Promise<void> {
    return this.serially(async () => {
      let base = this.copy;
      for (let tries = 0; tries < TRIES; tries++) {
        const next = structuredClone(base.data);
        change(next);
        const changed = diff(base.data, next);
        if (unchanged(changed)) {
          // Already so (each daemon records the same slot fired): nothing to write, nobody to tell, if the copy is current.
          if (((await this.redis.get(VERSION_KEY)) ?? "0") === base.version) return;
        } else {
          const written = await this.redis.eval(
            WRITE,
            3,
            VERSION_KEY,
            JOBS_KEY,
            PAUSED_ALL_KEY,
            base.version,
            JSON.stringify(changed),
            STATE_CHANNEL,
          );
          if (written !== null) {
            this.copy = { version: String(written), data: next };
            return;
          }
        }
        base = this.copy = await this.read();
      }
      throw new Error(`the cluster's state changed ${TRIES} times while this change was made; not saved`);
    });
  }

  /**
   * Calls made before the version is looked at share the look: every run start refreshes, and a
   * thousand runs starting in one second would otherwise wait for a thousand reads one after
   * another. The look does not wait behind the changes and reads queued before it (a burst of
   * fires queues several while each daemon records the same slots): a copy already at the version
   * it finds is current, as each version is written once; only a copy behind it waits its turn
   * for a read.
   */
  refresh(): Promise<void> {
    this.refreshing ??= Promise.resolve().then(async () => {
      this.refreshing = undefined;
      const version = (await this.redis.get(VERSION_KEY)) ?? "0";
      if (version !== this.copy.version) await this.serially(() => this.catchUp());
    });
    return this.refreshing;
  }

  /** Reads the state again once a change is published; changes published meanwhile are read with it. */
  private follow(): void {
    this.reread ??= this.serially(async () => {
      this.reread = undefined;
      await this.catchUp();
    }).catch((err: unknown) =>
      this.log.warn({ error: errorText(err) }, "could not read the cluster's state; reading it again at its next change"),
    );
  }

  /** In the queue: the copy made current, read whole only when a change came since (the burst's rereads mostly find none). */
  private async catchUp(): Promise<void> {
    const read = await this.read(this.copy.version);
    if (read) this.copy = read;
  }

  private serially<T>(step: () => Promise<T>): Promise<T> {
    const done = this.queue.then(step);
    this.queue = done.catch(() => {});
    return done;
  }

  /** The whole state at one version (one script, so atomic), checked piece by piece; undefined when still at `unless`. */
  private read(): Promise<Snapshot>;
  private read(unless: string): Promise<Snapshot | undefined>;
  private async read(unless?: string): Promise<Snapshot | undefined> {
    // A key Redis does not have comes back null; "" never matches a version, so the whole is read.
    const reply = (await this.redis.eval(READ, 3, VERSION_KEY, JOBS_KEY, PAUSED_ALL_KEY, unless ?? "")) as
      [string | null, string[], string | null] | null;
    if (reply === null) return undefined;
    const [version, pairs, pausedAll] = reply;
    const jobs: Record<string, string> = {};
    for (let i = 0; i + 1 < pairs.length; i += 2) jobs[pairs[i]!] = pairs[i + 1]!;
    const data: SharedState = { jobs: {} };
    for (const [name, text] of Object.entries(jobs)) {
      const state = this.parse(jobStateShape, text, `${JOBS_KEY} ${name}`);
      if (state) data.jobs[name] = state;
    }
    if (pausedAll !== null) {
      const at = isoTime.safeParse(pausedAll);
      if (at.success) data.pausedAllAt = at.data;
      else this.log.warn({ key: PAUSED_ALL_KEY, value: pausedAll }, "shared state in Redis does not fit; left out");
    }
    return { version: version ?? "0", data };
  }

  private parse<T>(shape: z.ZodType<T>, text: string, key: string): T | undefined {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.log.warn({ key, problem: "is not JSON" }, "shared state in Redis does not fit; left out");
      return undefined;
    }
    const parsed = shape.safeParse(value);
    if (parsed.success) return parsed.data;
    this.log.warn(
      { key, problem: parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ") },
      "shared state in Redis does not fit; left out",
    );
    return undefined;
  }
}

type Diff = ReturnType<typeof diff>;

const unchanged = (changed: Diff): boolean => Object.keys(changed.jobs).length === 0 && changed.pausedAll === undefined;

/** What WRITE writes: the jobs whose state changed (false: gone), and the kill switch if it changed. */
function diff(before: SharedState, after: SharedState): { jobs: Record<string, string | false>; pausedAll?: string | false } {
  const jobs: Record<string, string | false> = {};
  for (const name of new Set([...Object.keys(before.jobs), ...Object.keys(after.jobs)])) {
    const was = before.jobs[name];
    const now: JobState | undefined = after.jobs[name];
    if (now === undefined) {
      if (was !== undefined) jobs[name] = false;
    } else if (JSON.stringify(now) !== JSON.stringify(was)) {
      jobs[name] = JSON.stringify(now);
    }
  }
  return {
    jobs,
    ...(after.pausedAllAt !== before.pausedAllAt ? { pausedAll: after.pausedAllAt ?? false } : {}),
  };
}

/** The check-ins of both, each once, oldest first, and the later contact. */
function mergeCheckIns(into: CheckInState, held: CheckInState): CheckInState {
  const known = new Set(into.delivered.map((check) => `${check.at} ${check.hash}`));
  const added = held.delivered.filter((check) => !known.has(`${check.at} ${check.hash}`));
  const delivered = [...into.delivered, ...added].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const lastContactAt = isLater(held.lastContactAt, into.lastContactAt) ? held.lastContactAt : into.lastContactAt;
  return { delivered, ...(lastContactAt !== undefined ? { lastContactAt } : {}) };
}

/** Whether ISO time `a` is set and later than `b`, or `b` is not set. */
function isLater(a: string | undefined, b: string | undefined): a is string {
  return a !== undefined && !(Date.parse(b ?? "") >= Date.parse(a));
}
