import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CONCURRENCY } from "../../src/delivery/outbox.js";
import { readJournal } from "../../src/store/journal.js";
import { OUTBOX_FILE, type OutboxRecord } from "../../src/store/outbox-store.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const run = promisify(execFile);
const straceWorks = await hasSystemPackage("strace", import.meta.filename);
const DIST = resolve(import.meta.dirname, "../../dist");
const DELIVERIES = 40;

let dir: string;
let hooks: WebhookReceiver;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-syncs-"));
  hooks = await startWebhookReceiver();
});
afterEach(async () => {
  await hooks.close();
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!straceWorks)("the outbox's synced writes", () => {
  it("writes each attempt's start in the same synced write as the outcome of the attempt before it in its slot", async () => {
    // Queued first, then sent: a burst, as when the daemon starts with deliveries waiting.
    const script = `const { Outbox } = await import(${JSON.stringify(`${DIST}/delivery/outbox.js`)});
      const { sendWebhook } = await import(${JSON.stringify(`${DIST}/delivery/webhook.js`)});
      const target = { kind: "webhook", url: ${JSON.stringify(hooks.url)}, format: "json", headers: {} };
      const outbox = await Outbox.open({ stateDir: ${JSON.stringify(dir)}, send: (entry) => sendWebhook(entry.target, entry.message, entry.id).then(() => {}) });
      const at = new Date().toISOString();
      const ids = (await Promise.all(Array.from({ length: ${DELIVERIES} }, (_, i) => {
        const run = { id: "run-" + i, reason: "schedule", status: "ok", startedAt: at, finishedAt: at, durationMs: 1, usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 } };
        return outbox.enqueue("report." + run.id, [target], { kind: "run.completed", job: "report", run, result: "ok" }, ${JSON.stringify(dir)});
      }))).flat();
      outbox.start();
      const settled = await outbox.settled(ids);
      if (settled.some((s) => !s.delivered)) throw new Error("not delivered: " + JSON.stringify(settled));
      await outbox.close();`;
    const out = join(dir, "strace.out");
    await run("strace", [
      "-f",
      "-y",
      "-qq",
      "-s",
      "1000000",
      "-e",
      "trace=write,writev,pwrite64,pwritev",
      "-o",
      out,
      process.execPath,
      "--input-type=module",
      "-e",
      script,
    ]);
    const writes = (await readFile(out, "utf8"))
      .split("\n")
      .filter((line) => /\b(write|writev|pwrite64|pwritev)\(\d+<[^>]*outbox\.jsonl>/.test(line) && !line.includes("resumed>"))
      .map((line) => ({
        queued: line.split('\\"op\\":\\"queued\\"').length - 1,
        attempts: line.split('\\"op\\":\\"attempt\\"').length - 1,
        outcomes: line.split('\\"op\\":\\"delivered\\"').length - 1,
      }));
    const shown = JSON.stringify(writes);
    expect(
      writes.reduce((sum, w) => sum + w.queued, 0),
      shown,
    ).toBe(DELIVERIES);
    expect(
      writes.reduce((sum, w) => sum + w.attempts, 0),
      shown,
    ).toBe(DELIVERIES);
    expect(
      writes.reduce((sum, w) => sum + w.outcomes, 0),
      shown,
    ).toBe(DELIVERIES);
    // Only the first attempts, one per slot, start without an outcome to share their write with.
    const sent = writes.filter((w) => w.attempts > 0 || w.outcomes > 0);
    expect(
      sent.filter((w) => w.outcomes === 0),
      shown,
    ).toEqual([{ queued: 0, attempts: CONCURRENCY, outcomes: 0 }]);
    expect(sent.length, shown).toBeLessThanOrEqual(DELIVERIES + 1);

    // Each delivery's records are on disk in the order they happened.
    const ops = new Map<string, string[]>();
    for (const line of (await readJournal(join(dir, OUTBOX_FILE))).lines) {
      const record = (line as { value: OutboxRecord }).value;
      const id = record.op === "queued" ? record.entry.id : "id" in record ? record.id : "";
      ops.set(id, [...(ops.get(id) ?? []), record.op]);
    }
    expect(ops.size).toBe(DELIVERIES);
    for (const [id, done] of ops) expect(done, id).toEqual(["queued", "attempt", "delivered"]);
    expect(new Set(hooks.acknowledgedIds()).size).toBe(DELIVERIES);
  });
});
