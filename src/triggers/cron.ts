import { silentLogger, type Logger } from "../log.js";
import type { Job, Schedule } from "../jobs/types.js";
import type { FireRequest } from "../runner/types.js";
import type { SharedState, StateStore } from "../store/state.js";
import { nextFires, previousFire } from "../jobs/schedule.js";
import { errorText } from "../text.js";

export interface CronTriggerOptions {
  fire: (req: FireRequest) => void;
  state: StateStore;
  now?: () => Date;
  log?: Logger;
}

/**
 * Timers run on the monotonic clock, which a suspended machine or a stepped wall clock leaves
 * behind; waking at least this often re-reads the wall clock (croner's own timers do the same).
 */
const MAX_SLEEP_MS = 30_000;

/**
 * A fire later than this was not held up by a busy event loop but missed while countd could not
 * run (machine asleep, clock stepped forward): it is treated as downtime, so `catch_up` decides.
 */
const MISSED_AFTER_MS = 2 * MAX_SLEEP_MS;

interface Armed {
  job: Job;
  schedule: Schedule;
  /** Timezone and schedule: a job whose key is unchanged keeps its slot across set() calls. */
  key: string;
  next: Date;
}

interface Fired {
  job: Job;
  req: FireRequest;
}

const keyOf = (job: Job) => `${job.timezone}\n${JSON.stringify(job.schedule)}`;

/** What a fire changes in the state: the slot it was for, and for a one-shot that it is done. */
function noteFire(data: SharedState, job: Job, scheduledAt: Date): void {
  data.jobs[job.name] = {
    ...data.jobs[job.name],
    lastScheduledAt: scheduledAt.toISOString(),
    ...(job.schedule?.kind === "at" ? { done: true } : {}),
  };
}

/** Saves a fire the way the trigger does; for the daemon's catch-up runs at start-up. */
export function recordFire(state: StateStore, job: Job, scheduledAt: Date): Promise<void> {
  return state.update((data) => noteFire(data, job, scheduledAt));
}

/**
 * Fires `cron`, `every` and `at` jobs on time. One timer serves every job (croner computes the
 * slots): with a croner timer per job, 1,000 jobs due in the same second were fired up to 170 ms
 * late, as each timer computed its job's next slot before the next timer could fire; here every
 * due job is handed on first and the next slots are computed after.
 */
export class CronTrigger {
  private readonly armed = new Map<string, Armed>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly fire: (req: FireRequest) => void;
  private readonly state: StateStore;
  private readonly now: () => Date;
  private readonly log: Logger;

  constructor(opts: CronTriggerOptions) {
    this.fire = opts.fire;
    this.state = opts.state;
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "cron" });
  }

  /**
   * The jobs to serve from now on, replacing the previous set: a job with the same schedule and
   * timezone keeps its next slot; a changed one is re-armed from now; a removed, disabled or done
   * one is dropped.
   */
  set(jobs: readonly Job[]): void {
    if (this.stopped) return;
    const now = this.now();
    const wanted = new Map<string, Job>();
    for (const job of jobs) if (this.shouldArm(job)) wanted.set(job.name, job);
    for (const name of this.armed.keys()) {
      if (wanted.has(name)) continue;
      this.armed.delete(name);
      this.log.debug({ job: name }, "schedule stopped");
    }
    for (const job of wanted.values()) {
      const armed = this.armed.get(job.name);
      if (armed?.key === keyOf(job)) armed.job = job;
      else this.arm(job, now);
    }
    this.sleepUntilNext();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armed.clear();
  }

  /** The job's next `n` fires as armed now; none for a job that is not armed. */
  nextFires(jobName: string, n: number): Date[] {
    const armed = this.armed.get(jobName);
    if (!armed || n <= 0) return [];
    return [armed.next, ...nextFires(armed.schedule, armed.job.timezone, armed.next, n - 1)];
  }

  private shouldArm(job: Job): boolean {
    if (!job.enabled || !job.schedule) return false;
    return !(job.schedule.kind === "at" && this.state.job(job.name).done);
  }

  private arm(job: Job, now: Date): void {
    const schedule = job.schedule!;
    let next: Date | undefined;
    try {
      next = nextFires(schedule, job.timezone, now, 1)[0];
    } catch (err) {
      this.armed.delete(job.name);
      this.log.error({ job: job.name, file: job.file, error: errorText(err) }, "cannot compute the job's next fire, not scheduled");
      return;
    }
    if (!next) {
      this.armed.delete(job.name);
      if (schedule.kind === "at")
        this.log.info({ job: job.name, at: schedule.date.toISOString() }, "the one-shot's time has passed, not scheduled");
      else this.log.warn({ job: job.name, after: now.toISOString() }, "the schedule has no fire after this time, not scheduled");
      return;
    }
    this.armed.set(job.name, { job, schedule, key: keyOf(job), next });
    this.log.debug({ job: job.name, next: next.toISOString() }, "next fire");
  }

  private sleepUntilNext(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.stopped || this.armed.size === 0) return;
    let earliest = Infinity;
    for (const { next } of this.armed.values()) earliest = Math.min(earliest, next.getTime());
    const delay = Math.min(Math.max(Math.ceil(earliest - this.now().getTime()), 0), MAX_SLEEP_MS);
    this.timer = setTimeout(() => this.wake(), delay);
  }

  private wake(): void {
    this.timer = undefined;
    const now = this.now();
    const due = [...this.armed.values()].filter((armed) => armed.next <= now);
    const fired: Fired[] = [];
    for (const armed of due) {
      const req = this.requestFor(armed, now);
      if (!req) continue;
      fired.push({ job: armed.job, req });
      // A one-shot is handed on only once its `done` is saved: it must never run twice.
      if (armed.schedule.kind !== "at") this.hand(req);
    }
    // Slots that passed while countd could not fire fold into the fire above, so count from now.
    for (const armed of due) {
      if (armed.schedule.kind === "at") this.armed.delete(armed.job.name);
      else this.arm(armed.job, now);
    }
    if (fired.length > 0) void this.record(fired);
    this.sleepUntilNext();
  }

  private requestFor(armed: Armed, now: Date): FireRequest | undefined {
    const { job, schedule, next } = armed;
    if (now.getTime() - next.getTime() <= MISSED_AFTER_MS) return { job: job.name, reason: "schedule", scheduledAt: next };
    const latest = previousFire(schedule, job.timezone, new Date(now.getTime() + 1)) ?? next;
    if (job.catchUpMs > 0 && now.getTime() - latest.getTime() <= job.catchUpMs) {
      return { job: job.name, reason: "catch-up", scheduledAt: latest };
    }
    this.log.warn(
      { job: job.name, slot: next.toISOString(), catchUpMs: job.catchUpMs, latest: latest.toISOString() },
      "slot missed while countd could not run (machine asleep or clock changed); catch_up does not reach back to the latest slot, not run",
    );
    return undefined;
  }

  private async record(fired: Fired[]): Promise<void> {
    try {
      await this.state.update((data) => {
        for (const { job, req } of fired) noteFire(data, job, req.scheduledAt);
      });
    } catch (err) {
      const oneShots = fired.filter(({ job }) => job.schedule?.kind === "at").map(({ job }) => job.name);
      const jobs = fired.map(({ job }) => job.name);
      if (oneShots.length === 0) {
        this.log.error({ jobs, error: errorText(err) }, "could not save the fires");
      } else {
        this.log.error(
          { jobs, oneShots, error: errorText(err) },
          "could not save the fires; the one-shots among them are not run, as they could not be marked done",
        );
      }
      return;
    }
    // Handed on even if stop() came meanwhile: the one-shot is saved as done, so now or never.
    for (const { job, req } of fired) if (job.schedule?.kind === "at") this.hand(req);
  }

  private hand(req: FireRequest): void {
    try {
      this.fire(req);
    } catch (err) {
      this.log.error(
        { job: req.job, reason: req.reason, scheduledAt: req.scheduledAt.toISOString(), error: errorText(err) },
        "handing on the fire failed",
      );
    }
  }
}
