import { appendFile, copyFile, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { emptyUsage } from "../../src/providers/types.js";
import { DELIVERED_KEPT_MS, OutboxStore, type OutboxEntry } from "../../src/store/outbox-store.js";
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
      run: { id: "run-1", reason: "schedule", status: "ok", startedAt: T0.toISOString(), finishedAt: T0.toISOString(), durationMs: 0, usage: emptyUsage() },
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
const deliveredLog = () => join(dir, "outbox-delivered.jsonl");

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-outbox-store-"));
});

describe("OutboxStore", () => {
  it("keeps pending entries and disabled targets across a reopen", async () => {
    const store = await OutboxStore.open(dir, T0);
    await store.update((data) => {
      data.entries["run-1:a"] = entry("run-1:a");
      data.disabledTargets["webhook-x"] = { at: T0.toISOString(), reason: "target disabled after HTTP 410" };
    });
    const reopened = await OutboxStore.open(dir, T0);
    expect(reopened.data).toEqual({
      entries: { "run-1:a": entry("run-1:a") },
      disabledTargets: { "webhook-x": { at: T0.toISOString(), reason: "target disabled after HTTP 410" } },
    });
  });

  it("names the file when outbox.json is not valid JSON", async () => {
    await writeFile(join(dir, "outbox.json"), "{ entries: ");
    await expect(OutboxStore.open(dir, T0)).rejects.toThrow(`the outbox file ${join(dir, "outbox.json")} is not valid JSON`);
  });

  it("moves entries that do not fit aside, with a warning, and keeps every entry that does", async () => {
    const shapes: Array<[unknown, string[], string[]]> = [
      [{ entries: { x: null, "run-1:a": entry("run-1:a") } }, ["entries.x"], ["run-1:a"]],
      [{ entries: { "run-1:a": entry("run-1:a"), y: { id: "y" }, "run-2:a": entry("run-3:a") } }, ["entries.y", "entries.run-2:a"], ["run-1:a"]],
      [{ entries: { "run-1:a": { ...entry("run-1:a"), nextAttemptAt: "soon" } } }, ["entries.run-1:a"], []],
      [{ entries: [entry("run-1:a")] }, ["entries"], []],
      [{ entries: {}, disabledTargets: { "webhook-x": 5 }, extra: 1 }, ["disabledTargets.webhook-x", "extra"], []],
      ["str", ["the whole file"], []],
      [null, ["the whole file"], []],
    ];
    for (const [shape, where, kept] of shapes) {
      dir = await mkdtemp(join(tmpdir(), "countd-outbox-store-"));
      await writeFile(join(dir, "outbox.json"), JSON.stringify(shape));
      const { log, lines } = captureLog();
      const store = await OutboxStore.open(dir, T0, log);
      const warnings = lines.filter((line) => line.level === "warn");
      const quarantined = (await readFile(join(dir, "quarantine.jsonl"), "utf8")).trim().split("\n").map((line) => JSON.parse(line) as { where: string });
      expect(quarantined.map((q) => q.where), JSON.stringify(shape)).toEqual(where);
      expect(warnings).toHaveLength(where.length);
      expect(warnings[0]).toMatchObject({ fields: { component: "outbox-store", file: join(dir, "outbox.json"), where: where[0] } });
      expect(Object.keys(store.data.entries)).toEqual(kept);
      expect(JSON.parse(await readFile(join(dir, "outbox.json"), "utf8"))).toEqual(store.data);
    }
  });

  it("moves a delivered-log line that is no acknowledgement aside, and keeps the ids around it", async () => {
    const store = await OutboxStore.open(dir, T0);
    await store.markDelivered("run-1:a", T0);
    await appendFile(deliveredLog(), `[1, 2]\n{"id": "run-2:a"}\n`);
    await store.markDelivered("run-3:a", T0);
    const reopened = await OutboxStore.open(dir, T0);
    expect(["run-1:a", "run-2:a", "run-3:a"].map((id) => reopened.deliveredAt(id) !== undefined)).toEqual([true, false, true]);
    const quarantined = (await readFile(join(dir, "quarantine.jsonl"), "utf8")).trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(quarantined).toEqual([
      expect.objectContaining({ file: deliveredLog(), where: "line 2", value: "[1, 2]" }),
      expect.objectContaining({ file: deliveredLog(), where: "line 3", value: '{"id": "run-2:a"}' }),
    ]);
    expect((await readFile(deliveredLog(), "utf8")).trim().split("\n")).toHaveLength(2);
  });

  it("moves an acknowledged entry out of outbox.json and remembers its id across a reopen", async () => {
    const store = await OutboxStore.open(dir, T0);
    await store.update((data) => {
      data.entries["run-1:a"] = entry("run-1:a");
      data.entries["run-2:a"] = entry("run-2:a");
    });
    await store.markDelivered("run-1:a", later(1_000));

    const reopened = await OutboxStore.open(dir, later(2_000));
    expect(Object.keys(reopened.data.entries)).toEqual(["run-2:a"]);
    expect(reopened.deliveredAt("run-1:a")).toEqual(later(1_000));
    expect(JSON.parse(await readFile(join(dir, "outbox.json"), "utf8")).entries).not.toHaveProperty("run-1:a");
  });

  it("drops an entry left in outbox.json by a crash right after its acknowledgement was logged", async () => {
    const store = await OutboxStore.open(dir, T0);
    await store.update((data) => void (data.entries["run-1:a"] = entry("run-1:a")));
    await copyFile(join(dir, "outbox.json"), join(dir, "before.json"));
    await store.markDelivered("run-1:a", T0);
    // The crash: the delivered log has the id, outbox.json was never rewritten.
    await copyFile(join(dir, "before.json"), join(dir, "outbox.json"));

    const reopened = await OutboxStore.open(dir, T0);
    expect(reopened.data.entries).toEqual({});
    expect(JSON.parse(await readFile(join(dir, "outbox.json"), "utf8")).entries).toEqual({});
  });

  it("survives a delivered-log line cut short by a crash, and the next acknowledgement is not swallowed by it", async () => {
    const store = await OutboxStore.open(dir, T0);
    await store.markDelivered("run-1:a", T0);
    await appendFile(deliveredLog(), '{"id":"run-2:a","at":"2026-03-');

    const reopened = await OutboxStore.open(dir, T0);
    await reopened.markDelivered("run-3:a", T0);
    const third = await OutboxStore.open(dir, T0);
    expect(["run-1:a", "run-2:a", "run-3:a"].map((id) => third.deliveredAt(id) !== undefined)).toEqual([true, false, true]);
  });

  it("keeps the delivered log to the last 7 days: older ids are forgotten and the file shrinks", async () => {
    const store = await OutboxStore.open(dir, T0);
    for (let i = 0; i < 100; i++) await store.markDelivered(`run-${i}:a`, T0);
    expect((await readFile(deliveredLog(), "utf8")).trim().split("\n")).toHaveLength(100);

    await store.markDelivered("run-late:a", later(DELIVERED_KEPT_MS + 1));
    expect(store.deliveredAt("run-0:a")).toBeUndefined();
    expect(store.deliveredAt("run-late:a")).toEqual(later(DELIVERED_KEPT_MS + 1));
    expect((await readFile(deliveredLog(), "utf8")).trim().split("\n")).toEqual([
      JSON.stringify({ id: "run-late:a", at: later(DELIVERED_KEPT_MS + 1).toISOString() }),
    ]);
  });
});
