import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, endedRun, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { runCountd } from "../support/daemon-process.js";

/*
 * Two jobs signed with one secret: the signature covers the id, the time and the body, not the
 * job, so a request one job took must not fire the other, also after a restart.
 */

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CONFIG = "job_env: [ORDERS_HOOK, REFUNDS_HOOK]\nsecrets: [ORDERS_HOOK, REFUNDS_HOOK]\n";
const hookJob = (prompt: string, variable = "ORDERS_HOOK") =>
  `webhook:\n  secret: \${${variable}}\nprompt: |\n  ${prompt}\n  {{payload}}\n`;

function signed(body: string, id = `msg_${randomUUID()}`): Record<string, string> {
  const at = new Date();
  return {
    "content-type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(SECRET).sign(id, at, body),
  };
}

const post = (console: ConsoleDaemon, job: string, body: string, headers: Record<string, string>) =>
  fetch(`${console.origin}/hooks/${job}`, { method: "POST", body, headers }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as any,
  }));

describe("a webhook request replayed to another job with the same secret", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  afterEach(() => daemons.cleanup());

  async function start(dir: string): Promise<ConsoleDaemon> {
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-test", ORDERS_HOOK: SECRET, REFUNDS_HOOK: SECRET };
    const started = await startConsoleDaemon(dir, env);
    daemons.started.push(started);
    return started;
  }

  it("is refused with 409 and runs nothing, also after a restart", async () => {
    const dir = await consoleFolder({ extra: CONFIG });
    await writeJob(dir, "orders", hookJob("handle the order"));
    await writeJob(dir, "refunds", hookJob("refund the order", "REFUNDS_HOOK"));
    let console = await start(dir);
    mock.onMessage("handle the order", { content: "handled" });
    mock.onMessage("refund the order", { content: "refunded" });

    const body = '{"order":7}';
    const headers = signed(body, "msg_shared_secret");
    const fired = await post(console, "orders", body, headers);
    expect(fired.status).toBe(202);
    await endedRun(console, fired.body.run_id, "orders");

    const replayed = await post(console, "refunds", body, headers);
    expect(replayed).toEqual({
      status: 409,
      body: { error: 'webhook-id "msg_shared_secret" already fired another job signed with this secret: nothing was run' },
    });

    await console.stop();
    console = await start(dir);
    const later = await post(console, "refunds", body, signed(body, "msg_shared_secret"));
    expect(later.status).toBe(409);
    // The sender's own retry to the job it fired is still a duplicate, not a refusal.
    expect(await post(console, "orders", body, signed(body, "msg_shared_secret"))).toMatchObject({
      status: 200,
      body: { status: "duplicate", run_id: fired.body.run_id },
    });
    expect((await console.get<{ runs: RunRecord[] }>("/api/runs?job=refunds")).runs).toEqual([]);
  });
});

describe("countd validate", () => {
  it("warns about each job using the webhook secret of an earlier one, at its secret, naming the first", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-validate-"));
    await mkdir(join(dir, "jobs"));
    const hooks = ["ORDERS_HOOK", "RETURNS_HOOK", "OTHER_HOOK"];
    await writeFile(join(dir, "countd.yaml"), `job_env: [${hooks}]\nsecrets: [${hooks}]\n`);
    await writeFile(join(dir, "jobs", "orders.yaml"), "prompt: x\nwebhook:\n  secret: ${ORDERS_HOOK}\n");
    // The same reference, and another variable holding the same value.
    await writeFile(join(dir, "jobs", "refunds.yaml"), "prompt: y\nwebhook:\n  rate: 10\n  secret: ${ORDERS_HOOK}\n");
    await writeFile(join(dir, "jobs", "returns.yaml"), "prompt: y\nwebhook:\n  secret: ${RETURNS_HOOK}\n");
    await writeFile(join(dir, "jobs", "stock.yaml"), "prompt: z\nwebhook:\n  secret: ${OTHER_HOOK}\n");
    const env = { ORDERS_HOOK: SECRET, RETURNS_HOOK: SECRET, OTHER_HOOK: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD" };
    const result = await runCountd(["validate"], { cwd: dir, env });
    expect(result.code).toBe(0);
    const warning = (file: string, line: number, job: string) =>
      `jobs/${file}.yaml:${line}:11: warning: webhook.secret: job "${job}" uses the same webhook secret as job "orders" (jobs/orders.yaml): a request signed for one is valid for the other; give each job its own secret`;
    expect(result.stderr.trim().split("\n")).toEqual([warning("refunds", 4, "refunds"), warning("returns", 3, "returns")]);
    expect(result.stdout).toContain("4 jobs valid in jobs/ (2 warnings)");
  });
});
