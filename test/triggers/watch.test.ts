import { mkdir, mkdtemp, realpath, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EventBus } from "../../src/events.js";
import type { FireRequest } from "../../src/runner/types.js";
import { WatchTrigger } from "../../src/triggers/watch.js";
import { probeJob, watchJob } from "../support/watch-jobs.js";

const WAIT = { timeout: 15_000, interval: 20 };

let dir: string;
let bus: EventBus;
let fired: FireRequest[];
let trigger: WatchTrigger;

const runsOf = (job: string) => fired.filter((req) => req.job === job);
const filesOf = (job: string) => runsOf(job).flatMap((req) => req.files ?? []);
const probe = (debounceMs?: number, name?: string) => probeJob(dir, debounceMs, name);

beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "countd-watch-")));
  await mkdir(join(dir, "inbox"));
  bus = new EventBus();
  fired = [];
  trigger = new WatchTrigger({ fire: (req) => fired.push(req), events: bus, stabilityMs: 100 });
});

afterEach(async () => {
  await trigger.close();
  await rm(dir, { recursive: true, force: true });
});

describe("WatchTrigger", () => {
  it("fires one watch run listing a new file's absolute path", async () => {
    await trigger.set([watchJob("csv", [join(dir, "inbox/**/*.csv")], 200)]);
    const first = join(dir, "inbox", "a.csv");
    await writeFile(first, "1,2\n");
    await vi.waitFor(() => expect(fired).toHaveLength(1), WAIT);
    expect(fired[0]).toMatchObject({ job: "csv", reason: "watch", files: [first] });
    expect(fired[0]!.scheduledAt).toBeInstanceOf(Date);

    // The next file is a run of its own, and nothing fired for the first one in between.
    const second = join(dir, "inbox", "b.csv");
    await writeFile(second, "3,4\n");
    await vi.waitFor(() => expect(fired).toHaveLength(2), WAIT);
    expect(fired[1]!.files).toEqual([second]);
  });

  it("turns events inside the debounce window into one run with the files sorted", async () => {
    await trigger.set([watchJob("csv", [join(dir, "inbox/*.csv")], 1_500)]);
    const names = ["c.csv", "a.csv", "b.csv"];
    for (const name of names) await writeFile(join(dir, "inbox", name), name);
    await vi.waitFor(() => expect(fired).toHaveLength(1), WAIT);
    expect(fired[0]!.files).toEqual(["a.csv", "b.csv", "c.csv"].map((n) => join(dir, "inbox", n)));
  });

  it("turns a burst of 500 files into one run that lists every one of them", async () => {
    await trigger.set([watchJob("burst", [join(dir, "inbox/*.csv")], 2_000)]);
    const paths = Array.from({ length: 500 }, (_, i) => join(dir, "inbox", `f${String(i).padStart(3, "0")}.csv`));
    await Promise.all(paths.map((path) => writeFile(path, "x\n")));
    await vi.waitFor(() => expect(filesOf("burst")).toHaveLength(500), { ...WAIT, timeout: 30_000 });
    expect(fired).toHaveLength(1);
    expect(fired[0]!.files).toHaveLength(500);
    expect(fired[0]!.files).toEqual(paths);
  }, 40_000);

  it("caps the wait, so a trickle that never pauses for a whole debounce still runs", async () => {
    await trigger.set([watchJob("trickle", [join(dir, "inbox/*.log")], 500)]);
    let written = 0;
    // Without the cap (10 debounces) this job would wait until the trickle stops after 25 s.
    while (fired.length === 0 && written < 500) {
      await writeFile(join(dir, "inbox", `${written++}.log`), "line\n");
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(fired).toHaveLength(1);
    expect(written).toBeLessThan(500);
    expect(fired[0]!.files!.length).toBeGreaterThan(1);
  }, 40_000);

  it("ignores the files a job's own run wrote, but not a later change by someone else", async () => {
    await trigger.set([watchJob("tidy", [join(dir, "inbox/*.csv")], 300), probe()]);
    const isolated = join(dir, "inbox", "isolated.csv");
    const shared = join(dir, "inbox", "shared.csv");
    bus.emit("file.written", { sessionId: "cron:tidy:r1", path: isolated });
    await writeFile(isolated, "from the run");
    bus.emit("file.written", { sessionId: "cron:tidy", path: shared });
    await writeFile(shared, "from the shared session");
    await vi.waitFor(() => expect(filesOf("probe")).toEqual(expect.arrayContaining([isolated, shared])), WAIT);
    expect(runsOf("tidy")).toHaveLength(0);

    await writeFile(isolated, "edited by a person");
    await vi.waitFor(() => expect(runsOf("tidy")).toHaveLength(1), WAIT);
    expect(runsOf("tidy")[0]!.files).toEqual([isolated]);
  });

  it("fires for a file another job's run wrote, so jobs can form a pipeline", async () => {
    await trigger.set([watchJob("tidy", [join(dir, "inbox/*.csv")], 300)]);
    const path = join(dir, "inbox", "from-fetch.csv");
    bus.emit("file.written", { sessionId: "cron:fetch:r7", path });
    await writeFile(path, "fetched");
    await vi.waitFor(() => expect(runsOf("tidy")).toHaveLength(1), WAIT);
    expect(runsOf("tidy")[0]!.files).toEqual([path]);
  });

  it("reports removed files only to jobs that subscribed to unlink", async () => {
    const doomed = join(dir, "inbox", "old.csv");
    await writeFile(doomed, "old");
    await trigger.set([
      watchJob("adds", [join(dir, "inbox/*.csv")], 200),
      watchJob("removals", [join(dir, "inbox/*.csv")], 800, { events: ["unlink"] }),
    ]);
    await unlink(doomed);
    await vi.waitFor(() => expect(runsOf("removals")).toHaveLength(1), WAIT);
    expect(runsOf("removals")[0]!.files).toEqual([doomed]);
    expect(runsOf("adds")).toHaveLength(0);

    const fresh = join(dir, "inbox", "new.csv");
    await writeFile(fresh, "new");
    await vi.waitFor(() => expect(runsOf("adds")).toHaveLength(1), WAIT);
    expect(runsOf("adds")[0]!.files).toEqual([fresh]);
    expect(runsOf("removals")).toHaveLength(1);
  });

  it("fires only for files the glob matches", async () => {
    await mkdir(join(dir, "inbox", "sub"));
    await trigger.set([watchJob("csv", [join(dir, "inbox/*.csv")], 200), probe()]);
    const wanted = join(dir, "inbox", "b.csv");
    const others = [join(dir, "inbox", "a.txt"), join(dir, "inbox", "sub", "c.csv"), join(dir, "inbox", ".hidden.csv")];
    for (const path of [...others, wanted]) await writeFile(path, "x");
    await vi.waitFor(() => expect(filesOf("probe")).toEqual(expect.arrayContaining([...others.slice(0, 2), wanted])), WAIT);
    expect(runsOf("csv")).toHaveLength(1);
    expect(runsOf("csv")[0]!.files).toEqual([wanted]);
  });

  it("follows set(): a changed glob takes effect and a removed job stops firing", async () => {
    await trigger.set([watchJob("notes", [join(dir, "inbox/*.csv")], 200), probe()]);
    await trigger.set([watchJob("notes", [join(dir, "inbox/*.txt")], 200), probe()]);
    const csv = join(dir, "inbox", "x.csv");
    const txt = join(dir, "inbox", "y.txt");
    await writeFile(csv, "x");
    await writeFile(txt, "y");
    await vi.waitFor(() => expect(filesOf("probe")).toEqual(expect.arrayContaining([csv, txt])), WAIT);
    expect(runsOf("notes")).toHaveLength(1);
    expect(runsOf("notes")[0]!.files).toEqual([txt]);

    await trigger.set([probe()]);
    const later = join(dir, "inbox", "z.txt");
    await writeFile(later, "z");
    await vi.waitFor(() => expect(filesOf("probe")).toContain(later), WAIT);
    expect(runsOf("notes")).toHaveLength(1);
  });

  it("watches a folder that does not exist yet and fires once files appear in it", async () => {
    await trigger.set([watchJob("later", [join(dir, "later/**/*.csv")], 200)]);
    await mkdir(join(dir, "later", "deep"), { recursive: true });
    const path = join(dir, "later", "deep", "a.csv");
    await writeFile(path, "x");
    await vi.waitFor(() => expect(fired).toHaveLength(1), WAIT);
    expect(fired[0]!.files).toEqual([path]);
  });
});
