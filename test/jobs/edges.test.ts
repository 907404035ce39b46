import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { loadJobFile, type JobContext } from "../../src/jobs/load.js";

let root: string;
let ctx: JobContext;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-job-edges-"));
  ctx = { workspace: root, defaultTimezone: "UTC", jobEnv: ["REPORT_TO"], env: { REPORT_TO: "ops@example.com" } };
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The job of `text` and its problems, with the file's folder cut from them. */
async function load(text: string) {
  const file = path.join(root, "job.yaml");
  await writeFile(file, text);
  const { job, problems } = await loadJobFile(file, ctx);
  return { job, problems: problems.map((line) => line.replace(`${root}${path.sep}`, "")) };
}

const FIELDS = "expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)";

describe("the rough edges of a job file a new user meets", () => {
  it("says to quote an unquoted ${VAR} in a flow list, at its place, and still lists the file's other problems", async () => {
    const { job, problems } = await load("prompt: report\ntimeout: soon\ndeliver:\n  - email:\n      to: [${REPORT_TO}]\n");
    expect(job).toBeUndefined();
    expect(problems).toEqual([
      'job.yaml:2:10: timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
      'job.yaml:5:12: ${REPORT_TO} must be quoted here: YAML reads its "{" as the start of a mapping; write "${REPORT_TO}" (e.g. to: ["${REPORT_TO}"])',
    ]);
  });

  it("words a cron expression with the wrong number of fields one way, naming the count found and the counts taken", async () => {
    for (const [expression, count] of [
      ["0 9 * *", 4],
      ["0 0 9 * * * 2027", 7],
    ] as const) {
      const { problems } = await load(`prompt: x\nschedule: "${expression}"\n`);
      expect(problems).toEqual([`job.yaml:2:11: schedule: invalid cron expression "${expression}": it has ${count} fields; ${FIELDS}`]);
    }
  });

  it("suggests the time zone meant by a misspelt one, in a job and in countd.yaml", async () => {
    const { problems } = await load("prompt: x\ntimezone: Europe/Berln\n");
    expect(problems).toEqual([
      'job.yaml:2:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got "Europe/Berln" (did you mean "Europe/Berlin"?)',
    ]);
    await writeFile(path.join(root, "countd.yaml"), "timezone: america/new_yrok\n");
    await expect(loadConfig({ file: path.join(root, "countd.yaml"), needs: [] })).rejects.toThrow(
      'timezone: expected an IANA time zone name like "Asia/Shanghai", got "america/new_yrok" (did you mean "America/New_York"?)',
    );
  });

  it("takes a single address where a list of addresses is meant: email to, cc and bcc", async () => {
    const { job, problems } = await load(
      'prompt: x\ndeliver:\n  - email: { to: "${REPORT_TO}", cc: boss@example.com }\non_failure:\n  - email:\n      to: ops@example.com\n',
    );
    expect(problems).toEqual([]);
    expect(job?.deliver).toEqual([expect.objectContaining({ kind: "email", to: ["${REPORT_TO}"], cc: ["boss@example.com"], bcc: [] })]);
    expect(job?.onFailure).toEqual([expect.objectContaining({ kind: "email", to: ["ops@example.com"] })]);
    const wrong = await load("prompt: x\ndeliver:\n  - email: { to: [ops@example.com, not-an-address] }\n");
    expect(wrong.problems).toEqual([
      'job.yaml:3:36: deliver[0].email.to[1]: expected an email address like "ops@example.com", got "not-an-address"',
    ]);
  });
});
