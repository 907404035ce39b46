import { mkdir, mkdtemp, readdir, readFile, readlink, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { JobContext } from "../../src/jobs/load.js";
import { JobRegistry } from "../../src/jobs/registry.js";
import type { Job } from "../../src/jobs/types.js";
import { captureLog, type LogLine } from "../support/log-capture.js";

/** The promise: an added, changed or removed job file takes effect within 2 s. */
const TAKES_EFFECT = { timeout: 2000, interval: 20 };

let root: string;
let jobsDir: string;
let ctx: JobContext;
let registry: JobRegistry | undefined;
let captured: ReturnType<typeof captureLog>;
let changes: Job[][];

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-registry-"));
  jobsDir = path.join(root, "jobs");
  await mkdir(jobsDir);
  ctx = { workspace: path.join(root, "workspace"), defaultTimezone: "UTC", jobEnv: [] };
  captured = captureLog();
  changes = [];
});

afterEach(async () => {
  await registry?.close();
  registry = undefined;
  await rm(root, { recursive: true, force: true });
});

async function start(dir = jobsDir): Promise<{ registry: JobRegistry; problems: string[] }> {
  registry = new JobRegistry({
    dir,
    ctx,
    onChange: (jobs) => changes.push(jobs),
    log: captured.log,
  });
  const { problems } = await registry.load();
  await registry.watch();
  return { registry, problems };
}

const write = (name: string, text: string) => writeFile(path.join(jobsDir, name), text);
const prompts = (jobs: readonly Job[]) => jobs.map((job) => `${job.name}=${job.prompt}`);
const line = (level: LogLine["level"], msg: string, fields: Record<string, unknown>): LogLine => ({
  level,
  msg,
  fields: { component: "jobs", ...fields },
});
const problem = (text: string) => line("error", "problem in the jobs folder", { problem: text });
const notArmed = (file: string, job: string, text: string) =>
  line("error", "job not armed: its file has problems", { file: path.join(jobsDir, file), job, problem: text });
const kept = (file: string, job: string) => line("warn", "job keeps running its last good version until the file is fixed", { file, job });
const VALID_AGAIN = "job file valid again; the job runs as the file now says";
const validAgain = (file: string, job: string) => line("info", VALID_AGAIN, { file, job });
const listChanged = (fields: Record<string, unknown>) => line("info", "job list changed", fields);

/** This process's inotify watches, as the kernel counts them against fs.inotify.max_user_watches. */
async function inotifyWatches(): Promise<number> {
  let watches = 0;
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => "");
    if (target !== "anon_inode:inotify") continue;
    const info = await readFile(`/proc/self/fdinfo/${fd}`, "utf8").catch(() => "");
    watches += info.split("\n").filter((line) => line.startsWith("inotify wd:")).length;
  }
  return watches;
}

describe("JobRegistry", () => {
  it("loads the folder, returns the problems and logs each with the job it leaves not armed", async () => {
    await write("a.yaml", "prompt: first\n");
    await write("b.yaml", "prompt: second\ntimeout: soon\n");
    const { registry, problems } = await start();
    expect(prompts(registry.all())).toEqual(["a=first"]);
    expect(registry.get("a")?.prompt).toBe("first");
    expect(registry.get("b")).toBeUndefined();
    expect(problems).toEqual([
      `${path.join(jobsDir, "b.yaml")}:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"`,
    ]);
    expect(captured.lines).toEqual([
      notArmed(
        "b.yaml",
        "b",
        `${path.join(jobsDir, "b.yaml")}:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"`,
      ),
    ]);
    expect(registry.notArmed().map((file) => [file.name, file.reason])).toEqual([
      ["b", 'timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"'],
    ]);
    expect(changes).toEqual([]);
  });

  it("follows added, changed, broken, fixed and removed files", async () => {
    await write("a.yaml", "prompt: first\n");
    const { registry } = await start();

    await write("b.yaml", "prompt: second\n");
    await vi.waitFor(() => expect(prompts(registry.all())).toEqual(["a=first", "b=second"]), TAKES_EFFECT);
    expect(prompts(changes.at(-1)!)).toEqual(["a=first", "b=second"]);
    expect(captured.lines).toContainEqual(listChanged({ added: ["b"], loaded: 2 }));

    await write("b.yaml", "prompt: second, revised\n");
    await vi.waitFor(() => expect(registry.get("b")?.prompt).toBe("second, revised"), TAKES_EFFECT);
    expect(prompts(changes.at(-1)!)).toEqual(["a=first", "b=second, revised"]);

    const changesBefore = changes.length;
    await write("b.yaml", "prompt: second, broken\nschedule: '99 * * * *'\n");
    const error = `${path.join(jobsDir, "b.yaml")}:2:11: schedule: invalid cron expression "99 * * * *": Invalid value for minute: 99`;
    await vi.waitFor(() => expect(captured.lines).toContainEqual(problem(error)), TAKES_EFFECT);
    expect(captured.lines).toContainEqual(kept(path.join(jobsDir, "b.yaml"), "b"));
    expect(registry.get("b")?.prompt).toBe("second, revised");
    expect(changes).toHaveLength(changesBefore);

    await write("b.yaml", "prompt: second, fixed\n");
    await vi.waitFor(() => expect(registry.get("b")?.prompt).toBe("second, fixed"), TAKES_EFFECT);

    await unlink(path.join(jobsDir, "a.yaml"));
    await vi.waitFor(() => expect(registry.get("a")).toBeUndefined(), TAKES_EFFECT);
    expect(prompts(changes.at(-1)!)).toEqual(["b=second, fixed"]);
    expect(captured.lines).toContainEqual(listChanged({ removed: ["a"], loaded: 1 }));
  });

  it("logs that a file is valid again, once, whether it kept its last good version or was skipped", async () => {
    await write("kept.yaml", "prompt: kept\n");
    await write("skipped.yaml", "prompt: skipped\nevery: often\n");
    const { registry } = await start();
    await write("kept.yaml", "prompt: kept\nevery: often\n");
    await vi.waitFor(() => expect(captured.lines).toContainEqual(kept(path.join(jobsDir, "kept.yaml"), "kept")), TAKES_EFFECT);

    await write("kept.yaml", "prompt: kept, fixed\n");
    await write("skipped.yaml", "prompt: skipped, fixed\n");
    await vi.waitFor(() => expect(registry.get("skipped")?.prompt).toBe("skipped, fixed"), TAKES_EFFECT);
    await vi.waitFor(() => expect(registry.get("kept")?.prompt).toBe("kept, fixed"), TAKES_EFFECT);
    const back = captured.lines.filter((l) => l.msg === VALID_AGAIN);
    expect(back).toEqual(
      expect.arrayContaining([
        validAgain(path.join(jobsDir, "kept.yaml"), "kept"),
        validAgain(path.join(jobsDir, "skipped.yaml"), "skipped"),
      ]),
    );
    expect(back).toHaveLength(2);

    await write("kept.yaml", "prompt: kept, changed\n");
    await vi.waitFor(() => expect(registry.get("kept")?.prompt).toBe("kept, changed"), TAKES_EFFECT);
    expect(captured.lines.filter((l) => l.msg === VALID_AGAIN)).toHaveLength(2);
  });

  it("skips a new file that is invalid from the start and logs its problem once", async () => {
    const { registry } = await start();
    await write("bad.yaml", "schedule: '0 9 * * *'\n");
    const error = `${path.join(jobsDir, "bad.yaml")}:1:1: prompt: required: the message the agent is given on each run`;
    await vi.waitFor(() => expect(captured.lines).toContainEqual(notArmed("bad.yaml", "bad", error)), TAKES_EFFECT);

    // Another file's change re-applies the folder; the problem that persists is not logged again.
    await write("good.yaml", "prompt: ok\n");
    await vi.waitFor(() => expect(registry.get("good")).toBeDefined(), TAKES_EFFECT);
    expect(captured.lines.filter((l) => l.fields["problem"] === error)).toHaveLength(1);
    expect(registry.get("bad")).toBeUndefined();
  });

  it("keeps the first of two jobs that take the same name and logs the clash", async () => {
    await write("a.yaml", "name: report\nprompt: first\n");
    const { registry } = await start();
    await write("b.yaml", "name: report\nprompt: second\n");
    await vi.waitFor(
      () =>
        expect(captured.lines).toContainEqual(
          notArmed(
            "b.yaml",
            "report",
            `${path.join(jobsDir, "b.yaml")}:1:7: name: "report" is already the name of the job in ${path.join(jobsDir, "a.yaml")}`,
          ),
        ),
      TAKES_EFFECT,
    );
    expect(prompts(registry.all())).toEqual(["report=first"]);
  });

  it("ignores files that are not job files", async () => {
    const { registry } = await start();
    await write("notes.txt", "prompt: not a job\n");
    await write(".b.yaml.swp", "editor swap");
    await write("c.yaml", "prompt: a job\n");
    await vi.waitFor(() => expect(prompts(registry.all())).toEqual(["c=a job"]), TAKES_EFFECT);
    expect(captured.lines.filter((l) => l.level !== "info")).toEqual([]);
  });

  it("follows a jobs folder that is created after start-up", async () => {
    const later = path.join(root, "later-jobs");
    const { registry, problems } = await start(later);
    expect(problems).toEqual([`${later}: no such folder`]);
    await mkdir(later);
    await writeFile(path.join(later, "a.yaml"), "prompt: arrived\n");
    await vi.waitFor(() => expect(registry.get("a")?.prompt).toBe("arrived"), TAKES_EFFECT);
  });

  it("follows a jobs folder that is removed and made again (a checkout), and one that is removed for good", async () => {
    await write("a.yaml", "prompt: before\n");
    const { registry } = await start();
    await rm(jobsDir, { recursive: true });
    await mkdir(jobsDir);
    await write("a.yaml", "prompt: after the checkout\n");
    await vi.waitFor(() => expect(registry.get("a")?.prompt).toBe("after the checkout"), TAKES_EFFECT);
    await write("b.yaml", "prompt: added later\n");
    await vi.waitFor(() => expect(registry.get("b")?.prompt).toBe("added later"), TAKES_EFFECT);

    await rm(jobsDir, { recursive: true });
    await vi.waitFor(() => expect(registry.all()).toEqual([]), TAKES_EFFECT);
    await mkdir(jobsDir);
    await write("c.yaml", "prompt: back\n");
    await vi.waitFor(() => expect(registry.all().map((job) => job.name)).toEqual(["c"]), TAKES_EFFECT);
  });

  it("puts one inotify watch on the jobs folder however many job files it holds", async () => {
    for (let i = 0; i < 300; i++) await write(`job-${i}.yaml`, `prompt: job ${i}\n`);
    const before = await inotifyWatches();
    const { registry } = await start();
    expect(registry.all()).toHaveLength(300);
    expect((await inotifyWatches()) - before).toBe(1);
    await write("job-0.yaml", "prompt: still seen\n");
    await vi.waitFor(() => expect(registry.get("job-0")?.prompt).toBe("still seen"), TAKES_EFFECT);
  });

  it("re-reads every file with the new settings on reload (SIGHUP)", async () => {
    await write("a.yaml", "prompt: first\n");
    await write("b.yaml", "prompt: second\ntimezone: Asia/Tokyo\n");
    const { registry } = await start();
    expect(registry.all().map((job) => job.timezone)).toEqual(["UTC", "Asia/Tokyo"]);

    await registry.reload({ ...ctx, defaultTimezone: "Europe/Berlin" });
    expect(registry.all().map((job) => job.timezone)).toEqual(["Europe/Berlin", "Asia/Tokyo"]);
    expect(changes.at(-1)?.map((job) => job.timezone)).toEqual(["Europe/Berlin", "Asia/Tokyo"]);
    expect(captured.lines).toContainEqual(listChanged({ changed: ["a"], loaded: 2 }));
  });
});
