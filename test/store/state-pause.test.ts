import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-pause-"));
});

const stateOnDisk = async () => JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as Record<string, unknown>;
const quarantined = async () =>
  (await readFile(join(dir, "quarantine.jsonl"), "utf8").catch(() => "")).split("\n").filter((line) => line !== "");

describe("StateStore: pause", () => {
  it("keeps a paused job paused across a reopen, with the time it was first paused", async () => {
    const state = await StateStore.open(dir);
    await state.pause("report", new Date("2026-12-01T09:00:00Z"));
    await state.pause("report", new Date("2026-12-01T10:00:00Z"));
    expect(state.isPaused("report")).toBe(true);
    expect(state.isPaused("digest")).toBe(false);

    const reopened = await StateStore.open(dir);
    expect(reopened.isPaused("report")).toBe(true);
    expect(reopened.job("report")).toEqual({ pausedAt: "2026-12-01T09:00:00.000Z" });
    expect(reopened.isPaused("digest")).toBe(false);
  });

  it("keeps the job's other state when it is paused and resumed, and leaves no trace of a job that was only paused", async () => {
    const state = await StateStore.open(dir);
    await state.update((data) => void (data.jobs["report"] = { lastScheduledAt: "2026-12-01T08:00:00.000Z" }));
    await state.pause("report");
    await state.pause("digest");
    await state.resume("report");
    await state.resume("digest");

    expect(state.isPaused("report")).toBe(false);
    expect((await stateOnDisk())["jobs"]).toEqual({ report: { lastScheduledAt: "2026-12-01T08:00:00.000Z" } });
  });

  it("pausing all pauses every job, also across a reopen; resuming one job then leaves it paused by the switch", async () => {
    const state = await StateStore.open(dir);
    await state.pause("report", new Date("2026-12-01T09:00:00Z"));
    await state.pause(null, new Date("2026-12-01T09:30:00Z"));
    expect(state.isPaused("never-seen")).toBe(true);

    await state.resume("report");
    const reopened = await StateStore.open(dir);
    expect(reopened.pausedAll()).toBe("2026-12-01T09:30:00.000Z");
    expect(reopened.job("report").pausedAt).toBeUndefined();
    expect(reopened.isPaused("report")).toBe(true);
    expect(reopened.isPaused("digest")).toBe(true);
  });

  it("resuming all clears the switch and every job's own pause", async () => {
    const state = await StateStore.open(dir);
    await state.pause("report");
    await state.pause("digest");
    await state.pause(null);
    await state.resume(null);

    const reopened = await StateStore.open(dir);
    expect(reopened.pausedAll()).toBeUndefined();
    expect(reopened.isPaused("report")).toBe(false);
    expect(reopened.isPaused("digest")).toBe(false);
    expect(await stateOnDisk()).toEqual({ jobs: {}, running: {} });
  });

  it("reads a state.json written before pausing existed, and moves aside pause times that are no time", async () => {
    await writeFile(
      join(dir, "state.json"),
      JSON.stringify({ jobs: { report: { lastScheduledAt: "2026-12-01T08:00:00.000Z" } }, running: {} }),
    );
    const before = await StateStore.open(dir);
    expect(before.isPaused("report")).toBe(false);
    expect(await quarantined()).toEqual([]);

    await writeFile(join(dir, "state.json"), JSON.stringify({ jobs: { report: { pausedAt: "yesterday" } }, pausedAllAt: 7 }));
    const after = await StateStore.open(dir);
    expect(after.isPaused("report")).toBe(false);
    expect((await quarantined()).map((line) => (JSON.parse(line) as { where: string }).where)).toEqual(["jobs.report", "pausedAllAt"]);
  });
});
