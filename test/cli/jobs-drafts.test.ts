import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { runCountd } from "../support/daemon-process.js";

const ENV = { OPENAI_API_KEY: "sk-jobs-drafts-key", OPENAI_BASE_URL: "http://127.0.0.1:9/v1" };

/** The cells of `name`'s row in the table countd jobs printed. */
const cells = (stdout: string, name: string): string[] =>
  (stdout.split("\n").find((line) => line.split(/\s{2,}/)[0]?.startsWith(name)) ?? "").split(/\s{2,}/);

describe("countd jobs --jobs DIR", { timeout: 60_000 }, () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-jobs-drafts-"));
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "drafts"));
    await writeFile(join(dir, "countd.yaml"), "timezone: UTC\ntools:\n  exec:\n    enabled: false\n");
    await writeFile(join(dir, "jobs", "live.yaml"), 'prompt: live\nschedule: "0 8 * * *"\n');
  });
  const countd = (args: string[]) => runCountd(args, { cwd: dir, env: ENV });

  it("lists the draft folder's jobs with their next fires, and not the jobs folder's", async () => {
    await writeFile(join(dir, "drafts", "digest.yaml"), 'prompt: digest\nschedule: "0 9 * * 1-5"\ntimezone: Europe/Berlin\n');
    const run = await countd(["jobs", "--jobs", "drafts"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const digest = cells(run.stdout, "digest");
    expect(digest.slice(0, 3)).toEqual(["digest", "cron 0 9 * * 1-5", "Europe/Berlin"]);
    expect(digest[3]!.split(", ")).toEqual(Array.from({ length: 3 }, () => expect.stringMatching(/ 09:00 \+0[12]:00$/)));
    expect(run.stdout).not.toContain("live");
    expect(run.stdout).not.toContain("@heartbeat");
  });

  it("shows a disabled job's next three fires, marked disabled", async () => {
    await writeFile(join(dir, "jobs", "paused-draft.yaml"), 'prompt: later\nschedule: "30 7 * * *"\nenabled: false\n');
    const run = await countd(["jobs"]);
    expect(run.code).toBe(0);
    const row = cells(run.stdout, "paused-draft");
    expect(row[0]).toBe("paused-draft (disabled)");
    expect(row[3]!.split(", ")).toEqual(Array.from({ length: 3 }, () => expect.stringMatching(/ 07:30 \+00:00$/)));
  });

  it("names a draft folder that does not exist", async () => {
    const run = await countd(["jobs", "--jobs", "nowhere"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${join(dir, "nowhere")}: no such folder`);
  });
});
