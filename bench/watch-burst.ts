/**
 * A burst of files dropped at once into a watched folder: how many runs the watch trigger makes
 * of it, and how long after the last write the run that lists the last file starts. The job is
 * configured like the example (2 s debounce, chokidar's write stability at its 500 ms
 * default); each run is simulated as 200 ms of work between jobStarted and jobFinished.
 */
import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { EventBus } from "../src/events.js";
import type { Job } from "../src/jobs/types.js";
import type { FireRequest } from "../src/runner/types.js";
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
  const trigger: WatchTrigger = new WatchTrigger({
    events: new EventBus(),
    fire: (req: FireRequest) => {
      runs.push({ startedAt: performance.now(), files: req.files ?? [] });
      for (const file of req.files ?? []) listed.add(file);
      trigger.jobStarted(req.job);
      setTimeout(() => trigger.jobFinished(req.job), RUN_MS);
    },
  });
  try {
    await trigger.set([burstJob(join(inbox, "*.csv"))]);
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
    await rm(dir, { recursive: true, force: true });
  }
}

function burstJob(glob: string): Job {
  return {
    name: "burst",
    file: "bench/burst.yaml",
    enabled: true,
    watch: { paths: [glob], events: ["add", "change"], debounceMs: DEBOUNCE_MS },
    timezone: "UTC",
    prompt: "Import {{files}}",
    session: "isolated",
    overrides: {},
    timeoutMs: 60_000,
    overlap: "queue",
    catchUpMs: 0,
    retry: { attempts: 0, backoffMs: 0 },
    deliver: [],
    onFailure: [],
    deliverWhen: "always",
  };
}
