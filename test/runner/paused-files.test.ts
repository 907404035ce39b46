import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EventBus } from "../../src/events.js";
import { PausedFiles } from "../../src/runner/held-files.js";
import { fireFromTrigger } from "../../src/runner/requests.js";
import { Runner } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import { StateStore } from "../../src/store/state.js";
import { WatchTrigger } from "../../src/triggers/watch.js";
import { heldExecutor } from "../support/held-executor.js";
import { watchJob } from "../support/watch-jobs.js";

/*
 * A real watcher on real files, into a real runner whose job is paused: what the paused fires
 * carried is kept in the job's state, bounded, and run as one batch once the job is resumed.
 */

const WAIT = { timeout: 15_000, interval: 50 };

let dir: string;
let stateDir: string;
let state: StateStore;
let runner: Runner;
let trigger: WatchTrigger;
let pausedFiles: PausedFiles;
let held: ReturnType<typeof heldExecutor>;

beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "countd-paused-files-")));
  stateDir = await mkdtemp(join(tmpdir(), "countd-paused-state-"));
  await mkdir(join(dir, "inbox"));
  held = heldExecutor();
  const job = watchJob("inbox", [join(dir, "inbox/*.txt")], 300);
  const events = new EventBus();
  state = await StateStore.open(stateDir);
  runner = new Runner({
    job: (name) => (name === job.name ? job : undefined),
    records: new RunSaver(state),
    execute: held.execute,
    concurrency: 2,
    events,
    paused: (name) => state.isPaused(name),
  });
  const fire = fireFromTrigger(runner);
  pausedFiles = new PausedFiles({ state, events, fire });
  trigger = new WatchTrigger({ fire, events, stabilityMs: 100 });
  await trigger.set([job]);
});

afterEach(async () => {
  await trigger.close();
  pausedFiles.close();
  for (const call of held.calls) call.finish();
  await runner.shutdown(0);
  await state.close();
  await rm(dir, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
});

describe("files a paused watch job's fires carried", () => {
  it("keeps at most 100, counts the rest, and runs the kept ones once, as one batch, at resume", async () => {
    await state.pause("inbox");
    const names = Array.from({ length: 130 }, (_, i) => join(dir, "inbox", `f${String(i).padStart(3, "0")}.txt`));
    for (const name of names) await writeFile(name, "x");
    await vi.waitFor(() => {
      const kept = state.job("inbox").held;
      expect((kept?.files.length ?? 0) + (kept?.overflow ?? 0)).toBe(130);
    }, WAIT);
    expect(state.job("inbox").held).toMatchObject({ overflow: 30 });
    expect(state.job("inbox").held!.files).toHaveLength(100);
    const skipped = (await state.runs("inbox")).filter((run) => run.status === "skipped");
    expect(skipped.flatMap((run) => run.files ?? []).length + skipped.reduce((n, run) => n + (run.moreFiles ?? 0), 0)).toBe(130);
    expect(held.calls).toEqual([]);

    // Released only once the job is no longer paused.
    await pausedFiles.release();
    expect(held.calls).toEqual([]);
    await state.resume("inbox");
    await pausedFiles.release();
    await vi.waitFor(() => expect(held.calls).toHaveLength(1), WAIT);
    const run = held.calls[0]!.run;
    expect(run.request).toMatchObject({ job: "inbox", reason: "watch" });
    expect(new Set(run.request.files).size).toBe(100);
    expect(names).toEqual(expect.arrayContaining(run.request.files!));
    expect(state.job("inbox").held).toBeUndefined();

    await pausedFiles.release();
    expect(held.calls).toHaveLength(1);
  });
});
