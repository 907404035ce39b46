/**
 * A burst of files dropped at once into a watched folder: how many runs the watch trigger makes
 * of it, and how long after the last write the run that lists the last file starts. The job is
 * configured like the example (2 s debounce, chokidar's write stability at its 500 ms
 * default). The trigger fires into a real Runner whose executor stands in for the agent with
 * 200 ms of work, so what arrives during a run is queued and merged by the runner's overlap rule.
 */
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { EventBus } from "../src/events.js";
import { jobDefaults } from "../src/jobs/defaults.js";
import type { Job } from "../src/jobs/types.js";
import { fireFromTrigger } from "../src/runner/requests.js";
import { Runner } from "../src/runner/runner.js";
import { RunSaver } from "../src/store/run-saver.js";
import { emptyUsage } from "../src/providers/types.js";
import { StateStore } from "../src/store/state.js";
import { WatchTrigger } from "../src/triggers/watch.js";

const DEBOUNCE_MS = 2_000;
const RUN_MS = 200;
const WRITES_IN_FLIGHT = 256;
const GIVE_UP_MS = 180_000;

export async function benchWatchBurst(files = 10_000): Promise<{ files: number; runs: number; lastWriteToRunStartMs: number }> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), "countd-bench-watch-")));
  const inbox = join(dir, "inbox");
  await mkdir(inbox);
  const runs: { startedAt: number; files: string[] }[] = [];
  const listed = new Set<string>();
  const job = burstJob(join(inbox, "*.csv"));
  const runner = new Runner({
    job: () => job,
    records: new RunSaver(await StateStore.open(join(dir, "state"))),
    concurrency: 1,
    execute: async (_job, run) => {
      runs.push({ startedAt: performance.now(), files: run.request.files ?? [] });
      for (const file of run.request.files ?? []) listed.add(file);
      await new Promise((r) => setTimeout(r, RUN_MS));
      return { answer: "imported", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() };
    },
  });
  const trigger = new WatchTrigger({ events: new EventBus(), fire: fireFromTrigger(runner) });
  try {
    await trigger.set([job]);
    let lastPath = "";
    let lastWriteAt = 0;
    const paths = Array.from({ length: files }, (_, i) => join(inbox, `${i}.csv`));
    for (let i = 0; i < paths.length; i += WRITES_IN_FLIGHT) {
      await Promise.all(
        paths.slice(i, i + WRITES_IN_FLIGHT).map(async (path) => {
          await writeFile(path, "id,value\n1,2\n");
          lastPath = path;
          lastWriteAt = performance.now();
        }),
      );
    }
    const giveUpAt = performance.now() + GIVE_UP_MS;
    while (!listed.has(lastPath) || listed.size < files) {
      if (performance.now() > giveUpAt) {
        throw new Error(`bench/watch-burst: after ${GIVE_UP_MS / 1000} s the runs listed only ${listed.size} of ${files} files`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const lastRun = runs.find((run) => run.files.includes(lastPath))!;
    return { files: listed.size, runs: runs.length, lastWriteToRunStartMs: lastRun.startedAt - lastWriteAt };
  } finally {
    await trigger.close();
    await runner.shutdown(0);
    // The runner may still be saving the last run cut short by the shutdown: rm retries past it.
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  }
}

function burstJob(glob: string): Job {
  return {
    name: "burst",
    file: "bench/burst.yaml",
    timezone: "UTC",
    prompt: "Import {{files}}",
    ...jobDefaults(),
    watch: { paths: [glob], events: ["add", "change"], debounceMs: DEBOUNCE_MS },
    overlap: "queue",
    catchUpMs: 0,
    retry: { attempts: 0, backoffMs: 0 },
  };
}
