import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EventBus } from "../../src/events.js";
import type { Job } from "../../src/jobs/types.js";
import { fireFromTrigger } from "../../src/runner/requests.js";
import { Runner } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import type { FireRequest } from "../../src/runner/types.js";
import { StateStore } from "../../src/store/state.js";
import { WatchTrigger } from "../../src/triggers/watch.js";
import { heldExecutor } from "../support/held-executor.js";
import { probeJob, watchJob } from "../support/watch-jobs.js";

/*
 * What happens to file changes that arrive while their job runs is the runner's overlap rule,
 * not the watch trigger's: these tests wire a real WatchTrigger on real files into a real Runner.
 */

const WAIT = { timeout: 15_000, interval: 20 };

let dir: string;
let stateDir: string;
let fired: FireRequest[];
let trigger: WatchTrigger;
let runner: Runner;
let state: StateStore;
let held: ReturnType<typeof heldExecutor>;

/** Starts the trigger and runner over these jobs; every fire is kept, then handed to the runner. */
async function start(jobs: Job[]): Promise<void> {
  const byName = new Map(jobs.map((job) => [job.name, job]));
  state = await StateStore.open(stateDir);
  runner = new Runner({ job: (name) => byName.get(name), records: new RunSaver(state), execute: held.execute, concurrency: 4 });
  const submit = fireFromTrigger(runner);
  trigger = new WatchTrigger({
    fire: (req) => {
      fired.push(req);
      submit(req);
    },
    events: new EventBus(),
    stabilityMs: 100,
  });
  await trigger.set(jobs);
}

const runsOf = (job: string) => held.calls.filter((call) => call.job.name === job);
const filesOf = (job: string) => fired.filter((req) => req.job === job).flatMap((req) => req.files ?? []);
const probe = (debounceMs?: number, name?: string) => probeJob(dir, debounceMs, name);

beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "countd-watch-fires-")));
  stateDir = await mkdtemp(join(tmpdir(), "countd-watch-state-"));
  await mkdir(join(dir, "inbox"));
  fired = [];
  held = heldExecutor();
});

afterEach(async () => {
  await trigger.close();
  for (const call of held.calls) call.finish();
  await runner.shutdown(0);
  await state.close();
  await rm(dir, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
});

describe("watch fires while their job runs", () => {
  it("keeps events that arrive during a run for the next run, started after the run finishes (overlap: skip)", async () => {
    await start([watchJob("csv", [join(dir, "inbox/*.csv")], 300), probe()]);
    const a = join(dir, "inbox", "a.csv");
    await writeFile(a, "a");
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(1), WAIT);

    const b = join(dir, "inbox", "b.csv");
    const c = join(dir, "inbox", "c.csv");
    await writeFile(b, "b");
    await writeFile(c, "c");
    await vi.waitFor(() => expect(filesOf("probe")).toEqual(expect.arrayContaining([b, c])), WAIT);
    expect(runsOf("csv")).toHaveLength(1);

    runsOf("csv")[0]!.finish();
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(2), WAIT);
    expect(runsOf("csv")[1]!.run.request.files).toEqual([b, c]);
    expect((await (await StateStore.open(stateDir)).runs("csv")).map((r) => r.status)).not.toContain("skipped");
  });

  it("holds a waiting batch while a run of the job that started meanwhile (say, a scheduled one) goes on", async () => {
    await start([watchJob("csv", [join(dir, "inbox/*.csv")], 1_000), probe(50, "fast"), probe(2_500, "slow")]);
    const a = join(dir, "inbox", "a.csv");
    await writeFile(a, "a");
    await vi.waitFor(() => expect(filesOf("fast")).toContain(a), WAIT);
    runner.request({ job: "csv", reason: "schedule", scheduledAt: new Date() });
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(1), WAIT);
    await vi.waitFor(() => expect(filesOf("slow")).toContain(a), WAIT);
    expect(runsOf("csv").map((call) => call.run.request.reason)).toEqual(["schedule"]);

    runsOf("csv")[0]!.finish();
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(2), WAIT);
    expect(runsOf("csv")[1]!.run.request).toMatchObject({ reason: "watch", files: [a] });
  });

  it("replace: a change during a run cancels it, and the next run lists the new file", async () => {
    await start([watchJob("csv", [join(dir, "inbox/*.csv")], 300, { overlap: "replace" })]);
    const a = join(dir, "inbox", "a.csv");
    await writeFile(a, "a");
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(1), WAIT);

    const b = join(dir, "inbox", "b.csv");
    await writeFile(b, "b");
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(2), WAIT);
    expect(runsOf("csv")[0]!.run.cancel.signal.aborted).toBe(true);
    expect(runsOf("csv")[1]!.run.request.files).toEqual([b]);
  });

  it("allow: a change during a run starts a second run beside it", async () => {
    await start([watchJob("csv", [join(dir, "inbox/*.csv")], 300, { overlap: "allow" })]);
    await writeFile(join(dir, "inbox", "a.csv"), "a");
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(1), WAIT);

    await writeFile(join(dir, "inbox", "b.csv"), "b");
    await vi.waitFor(() => expect(runsOf("csv")).toHaveLength(2), WAIT);
    expect(held.stats.maxInFlight).toBe(2);
  });
});
