/**
 * (a) Fire lateness: 10,000 cron jobs due in the same second (issue 12), each fire's actual time minus its
 *     slot, through the real CronTrigger and a real state store in a temp dir.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jobDefaults } from "../src/jobs/defaults.js";
import type { Job } from "../src/jobs/types.js";
import { StateStore } from "../src/store/state.js";
import { CronTrigger } from "../src/triggers/cron.js";
import { percentile } from "./stats.js";

export interface FireLatenessResult {
  p50Ms: number;
  p99Ms: number;
  jobs: number;
}

const JOBS = 10_000;

/** Sub-millisecond wall-clock time, to compare with a slot on the wall clock. */
const wallNow = () => performance.timeOrigin + performance.now();

export async function benchFireLateness(): Promise<FireLatenessResult> {
  const stateDir = await mkdtemp(join(tmpdir(), "countd-bench-scheduler-"));
  const state = await StateStore.open(stateDir);
  const lateness: number[] = [];
  let allFired!: () => void;
  const done = new Promise<void>((resolve) => (allFired = resolve));
  const trigger = new CronTrigger({
    state,
    fire: (req) => {
      lateness.push(wallNow() - req.scheduledAt.getTime());
      if (lateness.length === JOBS) allFired();
    },
  });
  try {
    // A slot two to three seconds ahead, written as one fixed second of the day so each job fires once.
    const slot = new Date((Math.floor(Date.now() / 1_000) + 3) * 1_000);
    const expression = `${slot.getUTCSeconds()} ${slot.getUTCMinutes()} ${slot.getUTCHours()} * * *`;
    const jobs: Job[] = Array.from({ length: JOBS }, (_, i) => ({
      name: `job-${i}`,
      file: join(stateDir, `job-${i}.yaml`),
      timezone: "UTC",
      prompt: "Bench.",
      ...jobDefaults(),
      schedule: { kind: "cron", expression },
      overlap: "allow",
      catchUpMs: 0,
      retry: { attempts: 0, backoffMs: 0 },
    }));
    trigger.set(jobs);
    const timeout = setTimeout(() => allFired(), slot.getTime() - Date.now() + 10_000);
    await done;
    clearTimeout(timeout);
    if (lateness.length < JOBS) throw new Error(`only ${lateness.length} of ${JOBS} jobs fired within 10 s of their slot`);
    const sorted = [...lateness].sort((a, b) => a - b);
    return { p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), jobs: lateness.length };
  } finally {
    trigger.stop();
    await state.update(() => {}); // queued behind the trigger's own save, so that one is done
    await rm(stateDir, { recursive: true, force: true });
  }
}
