import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { OutboxStore } from "../../src/store/outbox-store.js";
import { StateStore } from "../../src/store/state.js";
import { ensureWritableDir } from "../../src/store/writable-dir.js";
import { captureLog, type LogLine } from "../support/log-capture.js";

let root: string;
let log: ReturnType<typeof captureLog>["log"];
let logged: LogLine[];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "countd-writable-"));
  ({ log, lines: logged } = captureLog());
});

describe("ensureWritableDir", () => {
  it("creates a missing directory", async () => {
    await ensureWritableDir(join(root, "a", "state"), "state");
    await writeFile(join(root, "a", "state", "x"), "");
  });

  it("names the path when a file stands where the directory should be", async () => {
    await writeFile(join(root, "state"), "");
    await expect(ensureWritableDir(join(root, "state"), "state")).rejects.toThrow(
      `the state directory ${join(root, "state")} is not a directory (a file is in its place)`,
    );
  });

  it("names the path when a parent is a file", async () => {
    await writeFile(join(root, "var"), "");
    await expect(ensureWritableDir(join(root, "var", "logs"), "logs")).rejects.toThrow(
      `the logs directory ${join(root, "var", "logs")} is not a directory`,
    );
  });
});

describe("a state directory removed while countd runs", () => {
  it("StateStore writes state.json again in a recreated folder, and logs the removal", async () => {
    const dir = join(root, "state");
    const state = await StateStore.open(dir, { log });
    await state.update((data) => (data.jobs["report"] = { lastScheduledAt: "2026-11-30T09:00:00.000Z" }));
    await rm(dir, { recursive: true });
    await state.update((data) => (data.jobs["report"] = { lastScheduledAt: "2026-11-30T10:00:00.000Z" }));
    expect(JSON.parse(await readFile(join(dir, "state.json"), "utf8")).jobs.report.lastScheduledAt).toBe("2026-11-30T10:00:00.000Z");
    expect(logged).toMatchObject([
      { level: "error", msg: "the folder was removed while countd was running; created it again", fields: { component: "state", dir } },
    ]);
  });

  it("StateStore still fails, without recreating anything, when a file stands in the folder's place", async () => {
    const dir = join(root, "state");
    const state = await StateStore.open(dir, { log });
    await rm(dir, { recursive: true });
    await writeFile(dir, "");
    await expect(state.update((data) => (data.jobs["report"] = {}))).rejects.toThrow(dir);
    expect(logged).toEqual([]);
  });

  it("OutboxStore keeps queueing and acknowledging in a recreated folder", async () => {
    const dir = join(root, "state");
    const outbox = await OutboxStore.open(dir, new Date(), log);
    await rm(dir, { recursive: true });
    await outbox.record({ op: "disabled", target: "webhook:x", at: "2026-11-30T09:00:00.000Z", reason: "HTTP 410" });
    await rm(dir, { recursive: true });
    await outbox.record({ op: "delivered", id: "run-1.webhook", at: new Date().toISOString() });
    const reopened = await OutboxStore.open(dir, new Date());
    expect(reopened.deliveredAt("run-1.webhook")).toBeInstanceOf(Date);
    expect(reopened.data.disabledTargets["webhook:x"]?.reason).toBe("HTTP 410");
    expect(logged.length).toBeGreaterThanOrEqual(2);
  });
});
