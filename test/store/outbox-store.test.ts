import { appendFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { emptyUsage } from "../../src/providers/types.js";
import { DELIVERED_KEPT_MS, OutboxStore, type OutboxEntry, type OutboxRecord } from "../../src/store/outbox-store.js";
import { captureLog } from "../support/log-capture.js";

const T0 = new Date("2026-03-02T08:00:00.000Z");
const later = (ms: number) => new Date(T0.getTime() + ms);

function entry(id: string): OutboxEntry {
  return {
    id,
    target: { kind: "webhook", url: "https://hooks.example.com/countd", format: "json", headers: {} },
    message: {
      kind: "run.completed",
      job: "daily-report",
      run: {
        id: "run-1",
        reason: "schedule",
        status: "ok",
        startedAt: T0.toISOString(),
        finishedAt: T0.toISOString(),
        durationMs: 0,
        usage: emptyUsage(),
        cost: 0,
      },
      result: "All green.",
    },
    workspace: "/srv/workspace",
    createdAt: T0.toISOString(),
    giveUpAt: later(86_400_000).toISOString(),
    attempts: 0,
    nextAttemptAt: T0.toISOString(),
    status: "pending",
  };
}

let dir: string;
const journal = () => join(dir, "outbox.jsonl");
const lines = async () => (await readFile(journal(), "utf8")).split("\n").filter((line) => line !== "");
const queued = (id: string): OutboxRecord => ({ op: "queued", entry: entry(id) });
const delivered = (id: string, at = T0): OutboxRecord => ({ op: "delivered", id, at: at.toISOString() });

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-store-"));
});

/** The stores a test opened, closed after it: a reopen stands for a restart, and the first one's journal must not be left to the garbage collector. */
const opened: OutboxStore[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()));
});

async function openStore(...args: Parameters<typeof OutboxStore.open>): Promise<OutboxStore> {
  const store = await OutboxStore.open(...args);
  opened.push(store);
  return store;
}

describe("OutboxStore", () => {
  it("keeps pending entries, their attempts and disabled targets across a reopen, one journal line per change", async () => {
    const store = await openStore(dir, T0);
    await store.record(queued("run-1:a"), {
      op: "disabled",
      target: "webhook-x",
      at: T0.toISOString(),
      reason: "target disabled after HTTP 410",
    });
    await store.record({ op: "attempt", id: "run-1:a", at: later(1_000).toISOString() });
    await store.record({ op: "failed", id: "run-1:a", error: "HTTP 500", retryAt: later(31_000).toISOString() });
    expect(await lines()).toHaveLength(4);
    const reopened = await openStore(dir, T0);
    expect(reopened.data).toEqual({
      entries: {
        "run-1:a": {
          ...entry("run-1:a"),
          attempts: 1,
          lastAttemptAt: later(1_000).toISOString(),
          lastError: "HTTP 500",
          nextAttemptAt: later(31_000).toISOString(),
        },
      },
      disabledTargets: { "webhook-x": { at: T0.toISOString(), reason: "target disabled after HTTP 410" } },
    });
  });

  it("drops an acknowledged entry and remembers its id across a reopen", async () => {
    const store = await openStore(dir, T0);
    await store.record(queued("run-1:a"), queued("run-2:a"));
    await store.record(delivered("run-1:a", later(1_000)));

    const reopened = await openStore(dir, later(2_000));
    expect(Object.keys(reopened.data.entries)).toEqual(["run-2:a"]);
    expect(reopened.deliveredAt("run-1:a")).toEqual(later(1_000));
  });

  it("drops a last record cut short by a crash, with a logged line, and the next record is not swallowed by it", async () => {
    const store = await openStore(dir, T0);
    await store.record(queued("run-1:a"), queued("run-2:a"));
    await store.record(delivered("run-1:a"));
    await appendFile(journal(), '{"op":"delivered","id":"run-2:a","at":"2026-03-');

    const { log, lines: logged } = captureLog();
    const reopened = await openStore(dir, T0, log);
    expect(logged.filter((line) => line.level === "warn")).toEqual([
      expect.objectContaining({
        msg: expect.stringMatching(/^dropped a record cut short by a crash/),
        fields: expect.objectContaining({ file: journal(), line: 4 }),
      }),
    ]);
    expect(Object.keys(reopened.data.entries)).toEqual(["run-2:a"]);
    await reopened.record(delivered("run-2:a"));
    const third = await openStore(dir, T0);
    expect(third.data.entries).toEqual({});
    expect(["run-1:a", "run-2:a"].map((id) => third.deliveredAt(id) !== undefined)).toEqual([true, true]);
    expect(await lines()).toHaveLength(4);
  });

  it("moves a line that is no record, or about a delivery it does not know, aside and keeps the records around it", async () => {
    const store = await openStore(dir, T0);
    await store.record(queued("run-1:a"));
    await appendFile(journal(), `[1, 2]\n{"op":"attempt","id":"run-9:a","at":"${T0.toISOString()}"}\n{"op":"attempt","id":"run-1:a"}\n`);
    await appendFile(journal(), `${JSON.stringify(delivered("run-3:a"))}\n`);

    const { log, lines: logged } = captureLog();
    const reopened = await openStore(dir, T0, log);
    expect(Object.keys(reopened.data.entries)).toEqual(["run-1:a"]);
    expect(reopened.data.entries["run-1:a"]!.attempts).toBe(0);
    expect(reopened.deliveredAt("run-3:a")).toEqual(T0);
    const quarantined = (await readFile(join(dir, "quarantine.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(quarantined.map(({ file, where }) => [file, where])).toEqual([
      [journal(), "line 2"],
      [journal(), "line 3"],
      [journal(), "line 4"],
    ]);
    expect(quarantined[1]).toMatchObject({ problem: 'is about delivery "run-9:a", which is not in the outbox' });
    expect(logged.filter((line) => line.level === "warn")).toHaveLength(3);
    // Rewritten without them, so they are not moved aside again at the next start.
    expect(await lines()).toHaveLength(2);
  });

  it("compacts the journal when superseded records outnumber the live ones and 10,000, keeping every delivery's state", async () => {
    const store = await openStore(dir, T0);
    const batch = (ids: string[], record: (id: string) => OutboxRecord) => Promise.all(ids.map((id) => store.record(record(id))));
    for (let from = 0; from < 9_000; from += 300) {
      const ids = Array.from({ length: 300 }, (_, k) => `run-${from + k}:a`);
      await batch(ids, queued);
      await batch(ids, (id) => ({ op: "attempt", id, at: T0.toISOString() }));
      await batch(
        ids.filter((_, k) => k % 3 > 0),
        (id) => delivered(id),
      );
    }
    const live = 3_000 + 6_000;
    const written = await lines();
    expect(written.length).toBeLessThan(9_000 + 9_000 + 6_000);
    expect(written.length).toBeLessThanOrEqual(live + 10_000 + 300);
    const reopened = await openStore(dir, T0);
    expect(Object.keys(reopened.data.entries)).toHaveLength(3_000);
    expect(reopened.data.entries["run-0:a"]).toMatchObject({ attempts: 1 });
    expect(reopened.deliveredAt("run-1:a")).toEqual(T0);
    expect((await readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });

  it("forgets acknowledgements older than 7 days, and a compaction leaves them out", async () => {
    const store = await openStore(dir, T0);
    await Promise.all(Array.from({ length: 10_100 }, (_, i) => store.record(delivered(`run-${i}:a`))));
    await store.record(delivered("run-late:a", later(DELIVERED_KEPT_MS + 1)));
    expect(store.deliveredAt("run-0:a")).toBeUndefined();
    expect(store.deliveredAt("run-late:a")).toEqual(later(DELIVERED_KEPT_MS + 1));
    expect(await lines()).toEqual([JSON.stringify(delivered("run-late:a", later(DELIVERED_KEPT_MS + 1)))]);
  });

  it("writes the whole outbox again when the state directory is removed while it runs", async () => {
    const { log, lines: logged } = captureLog();
    const store = await openStore(dir, T0, log);
    await store.record(queued("run-1:a"));
    await rm(dir, { recursive: true });
    await store.record(queued("run-2:a"));
    expect(Object.keys((await OutboxStore.read(dir, T0)).entries)).toEqual(["run-1:a", "run-2:a"]);
    expect(logged.some((line) => line.level === "error" && /folder was removed/.test(line.msg))).toBe(true);
    await store.record(delivered("run-1:a"));
    expect(Object.keys((await OutboxStore.read(dir, T0)).entries)).toEqual(["run-2:a"]);
  });
});
