import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadJobFile, type JobContext } from "../../src/jobs/load.js";
import { validateJobs } from "../../src/jobs/validate.js";

/* A job file's webhook: section as `countd validate` and the loaders read it. */

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

let root: string;
let jobsDir: string;
let ctx: JobContext;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-hook-jobs-"));
  jobsDir = path.join(root, "jobs");
  await mkdir(jobsDir);
  ctx = {
    workspace: root,
    defaultTimezone: "UTC",
    jobEnv: ["ORDERS_HOOK", "PLAIN"],
    secretNames: ["ORDERS_HOOK"],
    env: { ORDERS_HOOK: SECRET, PLAIN: SECRET },
  };
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function load(text: string) {
  const file = path.join(jobsDir, "orders.yaml");
  await writeFile(file, text);
  const { job, problems } = await loadJobFile(file, ctx);
  return { job, problems: problems.map((line) => line.replace(`${jobsDir}${path.sep}`, "")) };
}

describe("webhook: in a job file", () => {
  it("loads with the defaults, alone or beside a schedule, the secret kept as its reference", async () => {
    const alone = await load("webhook:\n  secret: ${ORDERS_HOOK}\nprompt: handle {{payload}}\n");
    expect(alone.problems).toEqual([]);
    expect(alone.job).toMatchObject({ webhook: { secret: "${ORDERS_HOOK}", maxBody: 1024 * 1024, rate: 60 } });
    expect(alone.job!.schedule).toBeUndefined();

    const beside = await load('schedule: "0 9 * * *"\nwebhook:\n  secret: ${ORDERS_HOOK}\n  max_body: 64KB\n  rate: 5\nprompt: go\n');
    expect(beside.job).toMatchObject({ schedule: { kind: "cron" }, webhook: { maxBody: 64 * 1024, rate: 5 } });
  });

  it("reports each bad value at its file:line:col", async () => {
    const { job, problems } = await load("webhook:\n  secret: ${ORDERS_HOOK}\n  max_body: lots\n  rate: 0\n  retries: 3\nprompt: go\n");
    expect(job).toBeUndefined();
    expect(problems).toEqual([
      'orders.yaml:3:13: webhook.max_body: expected a size like "10MB", "512KB" or a number of bytes, got "lots"',
      "orders.yaml:4:9: webhook.rate: expected a positive integer, got 0",
      "orders.yaml:5:3: webhook.retries: unknown key",
    ]);
  });

  it("refuses a secret variable not in job_env, not in secrets, unset, or not a Standard Webhooks secret", async () => {
    expect((await load("webhook:\n  secret: ${OTHER}\nprompt: go\n")).problems).toEqual([
      "orders.yaml:2:11: webhook.secret: environment variable OTHER is not listed in job_env (countd.yaml): a job file may refer only to the variables listed there",
    ]);
    expect((await load("webhook:\n  secret: ${PLAIN}\nprompt: go\n")).problems).toEqual([
      "orders.yaml:2:11: webhook.secret: environment variable PLAIN is not listed in secrets (countd.yaml): list it there, so that its value is redacted from logs and never reaches a tool",
    ]);
    ctx.env = {};
    expect((await load("webhook:\n  secret: ${ORDERS_HOOK}\nprompt: go\n")).problems).toEqual([
      "orders.yaml:2:11: webhook.secret: environment variable ORDERS_HOOK is not set",
    ]);
    ctx.env = { ORDERS_HOOK: "hunter2" };
    const wrong = (await load("webhook:\n  secret: ${ORDERS_HOOK}\nprompt: go\n")).problems;
    expect(wrong).toEqual([
      'orders.yaml:2:11: webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (filled in from ORDERS_HOOK; the value is not shown here)',
    ]);
    expect(wrong.join("\n")).not.toContain("hunter2");
  });

  it("takes a secret written in the file with a warning from countd validate, never quoting it", async () => {
    await writeFile(path.join(jobsDir, "orders.yaml"), `prompt: go\nwebhook:\n  secret: ${SECRET}\n`);
    const result = await validateJobs(jobsDir, { ...ctx, env: null });
    expect(result).toEqual({
      ok: true,
      lines: [
        `${path.join(jobsDir, "orders.yaml")}:3:11: warning: webhook.secret is written in the job file, where secrets do not belong: write \${VAR} and list VAR in job_env and secrets (countd.yaml)`,
      ],
      summary: `1 job valid in ${jobsDir}/ (1 warning)`,
    });
    expect((await load("prompt: go\nwebhook:\n  secret: hunter2\n")).problems).toEqual([
      'orders.yaml:3:11: webhook.secret: expected a Standard Webhooks secret: "whsec_" followed by the base64 key (the value is not shown here)',
    ]);
  });

  it("knows {{payload}} in the prompt", async () => {
    expect((await load("webhook:\n  secret: ${ORDERS_HOOK}\nprompt: |\n  {{payload}} {{payloads}}\n")).problems).toEqual([
      "orders.yaml:4:15: prompt: unknown placeholder {{payloads}} (known: {{date}}, {{time}}, {{datetime}}, {{job.name}}, {{job.description}}, {{run.id}}, {{files}}, {{payload}})",
    ]);
  });
});
