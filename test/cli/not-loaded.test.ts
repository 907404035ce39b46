import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { logLines, runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

/** The daemon's and the commands' environment: REPORT_TO is not in it. */
const ENV = { OPENAI_API_KEY: "sk-not-loaded-test", OPENAI_BASE_URL: "http://127.0.0.1:9/v1" };

const REPORT = 'prompt: daily report\nschedule: "0 9 * * *"\ndeliver:\n  - email: { to: ["${REPORT_TO}"] }\n';
/** Where REPORT names the variable: line 4, the `$` of the reference. */
const UNSET = "jobs/report.yaml:4:20: deliver[0].email.to[0]: environment variable REPORT_TO is not set";

/** The cells of the row of `name` in the table countd jobs printed. */
const row = (stdout: string, name: string): string[] =>
  (stdout.split("\n").find((line) => line.split(/\s{2,}/)[0] === name) ?? "").split(/\s{2,}/);

describe("a job that names an unset variable is not armed, and says so everywhere", () => {
  let dir: string;
  let daemon: DaemonProcess | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-not-loaded-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "timezone: UTC\njob_env: [REPORT_TO]\ntools:\n  exec:\n    enabled: false\n");
    await writeFile(join(dir, "jobs", "daily.yaml"), 'prompt: daily\nschedule: "0 8 * * *"\n');
  });
  afterEach(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill("SIGTERM");
      await daemon.exited;
    }
    daemon = undefined;
  });
  const countd = (args: string[], env: Record<string, string> = ENV) => runCountd(args, { cwd: dir, env });

  it("countd start exits 78 naming each unset variable at file:line:col", async () => {
    await writeFile(join(dir, "jobs", "report.yaml"), REPORT);
    const run = await countd(["start"]);
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`${UNSET}\n`);
    expect(run.stdout).not.toContain("countd started");
  });

  it("countd validate warns at file:line:col about a variable unset in its own environment, and exits 0", async () => {
    await writeFile(join(dir, "jobs", "report.yaml"), REPORT);
    const run = await countd(["validate"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(
      "jobs/report.yaml:4:20: warning: deliver[0].email.to[0]: environment variable REPORT_TO is not set here: countd start and countd run refuse the job unless their environment sets it\n",
    );
    expect(run.stdout).toContain("2 jobs valid in jobs/ (1 warning)");
    const set = await countd(["validate"], { ...ENV, REPORT_TO: "ops@example.com" });
    expect(set.stderr).toBe("");
  });

  it("countd jobs and status with no daemon load the jobs as countd start would: the job is marked not loaded, with the reason, exit 1, and named", async () => {
    await writeFile(join(dir, "jobs", "report.yaml"), REPORT);
    const run = await countd(["jobs"]);
    expect(run.code).toBe(1);
    expect(row(run.stdout, "report")).toEqual([
      "report",
      "-",
      "-",
      "-",
      "-",
      "not loaded: deliver[0].email.to[0]: environment variable REPORT_TO is not set",
    ]);
    expect(row(run.stdout, "daily")[5]).toBeUndefined();
    expect(run.stderr).toContain(`${UNSET}\n`);

    const status = await countd(["status"]);
    expect(status.stdout).toContain(`jobs:    1 in ${join(dir, "jobs")} (1 problem(s) in report: see countd jobs)\n`);
  });

  it("beside a daemon: a job it did not arm is logged, listed by countd jobs and named by countd status as not loaded, with the reason", async () => {
    await writeFile(join(dir, "jobs", "broken.yaml"), 'prompt: broken\nschedule: "0 9 * * *"\ntimeout: soon\n');
    daemon = spawnDaemon(dir, ENV);
    await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), { timeout: 15_000, interval: 100 });
    await writeFile(join(dir, "jobs", "report.yaml"), REPORT);
    await vi.waitFor(() => expect(logLines(daemon!.output()).filter((line) => line["job"] === "report")).not.toEqual([]), {
      timeout: 15_000,
      interval: 100,
    });

    const notArmed = logLines(daemon.output()).filter((line) => line["job"] === "report" || line["job"] === "broken");
    expect(notArmed.map((line) => [line["component"], line["job"], line["msg"]])).toEqual([
      ["jobs", "broken", "job not armed: its file has problems"],
      ["jobs", "report", "job not armed: its file has problems"],
    ]);
    expect(notArmed[1]!["problem"]).toBe(UNSET);

    // The command's own environment sets the variable: what counts is what the daemon armed.
    const jobs = await countd(["jobs"], { ...ENV, REPORT_TO: "ops@example.com" });
    expect(jobs.code).toBe(1);
    expect(row(jobs.stdout, "report")).toEqual([
      "report",
      "-",
      "-",
      "-",
      "-",
      "not loaded: deliver[0].email.to[0]: environment variable REPORT_TO is not set",
    ]);
    expect(row(jobs.stdout, "broken")[5]).toMatch(/^not loaded: timeout: /);
    expect(row(jobs.stdout, "daily")[5]).toBeUndefined();
    expect(jobs.stderr).toContain(`${UNSET}\n`);

    // Changed to name the variable and reloaded: the job keeps its last good version, and is marked.
    await writeFile(
      join(dir, "jobs", "daily.yaml"),
      'prompt: daily\nschedule: "0 8 * * *"\ndeliver:\n  - email: { to: ["${REPORT_TO}"] }\n',
    );
    daemon.child.kill("SIGHUP");
    await vi.waitFor(
      () => expect(logLines(daemon!.output(), "job keeps running its last good version until the file is fixed")).not.toEqual([]),
      { timeout: 15_000, interval: 100 },
    );
    const kept = await countd(["jobs"]);
    expect(row(kept.stdout, "daily")[5]).toBe("invalid file (1 problem): its last good version fires");

    const status = await countd(["status"]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("loaded:  1 job, 3 invalid, 0 paused\n");
    expect(status.stdout).toMatch(/^invalid: broken not loaded: jobs\/broken\.yaml:3:10: timeout: /m);
    expect(status.stdout).toContain(
      "\n         daily keeps its last good version: jobs/daily.yaml:4:20: deliver[0].email.to[0]: environment variable REPORT_TO is not set\n",
    );
    expect(status.stdout).toContain(`\n         report not loaded: ${UNSET}\n`);
  });
});
