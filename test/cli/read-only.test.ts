import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";

/** The shipped unit's layout: secrets come from an EnvironmentFile that the `countd` user's shell does not have. */
const CONFIG = [
  "provider:",
  "  api_key: ${OPENAI_API_KEY}",
  "smtp:",
  "  host: ${SMTP_HOST}",
  "  user: countd@example.com",
  "  password: ${SMTP_PASSWORD}",
  "  from: countd@example.com",
  "heartbeat:",
  "  deliver:",
  "    - webhook: { url: '${HEARTBEAT_HOOK}' }",
  "job_env: [REPORT_HOOK]",
  "tools:",
  "  exec:",
  "    sandbox: none",
  "",
].join("\n");

const JOB = "prompt: Report\ndeliver:\n  - webhook: { url: '${REPORT_HOOK}' }\n";

describe("commands without the unit's EnvironmentFile", () => {
  const mock = useAimock();
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-read-only-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), CONFIG);
    await writeFile(join(dir, "jobs", "report.yaml"), JOB);
  });

  const countd = (args: string[], env: Record<string, string> = {}) => runCountd(args, { cwd: dir, env });

  // status exits 3 when no daemon runs (as systemctl status does), not 78: the configuration was read.
  it.each([
    ["history", 0],
    ["outbox", 0],
    ["status", 3],
  ])("countd %s works, since it uses none of the unset variables", async (command, code) => {
    const result = await countd([command]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(code);
  });

  // The job's delivery variable is a job's, not countd.yaml's: start would refuse it, and the two commands that check jobs say so.
  it("countd jobs marks the job whose delivery variable is unset not loaded, as start would refuse it; validate warns and counts it valid", async () => {
    const jobs = await countd(["jobs"]);
    expect(jobs.code).toBe(1);
    expect(jobs.stdout).toMatch(
      /^report\s+-\s+-\s+-\s+-\s+not loaded: deliver\[0\]\.webhook\.url: environment variable REPORT_HOOK is not set$/m,
    );
    expect(jobs.stderr).toBe("jobs/report.yaml:3:22: deliver[0].webhook.url: environment variable REPORT_HOOK is not set\n");
    const validate = await countd(["validate"]);
    expect(validate.code).toBe(0);
    expect(validate.stdout).toBe("1 job valid in jobs/ (1 warning)\n");
    expect(validate.stderr).toMatch(
      /^jobs\/report\.yaml:3:22: warning: deliver\[0\]\.webhook\.url: environment variable REPORT_HOOK is not set here/,
    );
  });

  it("countd start and countd run still refuse to start, naming each variable at file:line:col", async () => {
    for (const args of [["start"], ["run", "report"]]) {
      const result = await countd(args);
      expect(result.code, args.join(" ")).toBe(78);
      expect(result.stderr.split("\n").filter(Boolean)).toEqual([
        "countd.yaml:2:12: provider.api_key: environment variable OPENAI_API_KEY is not set",
        "countd.yaml:4:9: smtp.host: environment variable SMTP_HOST is not set",
        "countd.yaml:6:13: smtp.password: environment variable SMTP_PASSWORD is not set",
        "countd.yaml:10:24: heartbeat.deliver[0].webhook.url: environment variable HEARTBEAT_HOOK is not set",
      ]);
    }
  });

  it("countd ask needs the provider key only, not the SMTP settings", async () => {
    const refused = await countd(["ask", "hello"]);
    expect(refused.code).toBe(78);
    expect(refused.stderr).toBe("countd.yaml:2:12: provider.api_key: environment variable OPENAI_API_KEY is not set\n");

    mock.onMessage("hello", { content: "hi there" });
    const answered = await countd(["ask", "hello"], { OPENAI_API_KEY: "sk-read-only-test", OPENAI_BASE_URL: `${mock.url}/v1` });
    expect(answered.code).toBe(0);
    expect(answered.stdout).toBe("hi there\n");
  });
});
