import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { emptyUsage } from "../../src/providers/types.js";
import { nodeTag, runId } from "../../src/runner/run-ids.js";
import { Runner } from "../../src/runner/runner.js";
import { RunSaver } from "../../src/store/run-saver.js";
import { StateStore } from "../../src/store/state.js";
import { finalRecord, fire, makeJob } from "../support/runner-jobs.js";

const SECOND = new Date("2026-11-30T09:00:00.250Z");

/*
 * A run id names the run's record in the cluster's shared history, its deliveries
 * (`<job>.<run id>.<target>`) and its session: two runs of one job with one id, on two nodes,
 * would leave one record where `countd history` should list two, and one delivery for both.
 */

it("never gives runs of one job started in the same second on two cluster nodes the same id", () => {
  const made = (node: string) => new Set(Array.from({ length: 5_000 }, () => runId(SECOND, node)));
  const n1 = made("n1");
  const n2 = made("n2");
  expect(nodeTag("n1")).not.toBe(nodeTag("n2"));
  expect([...n1].filter((id) => n2.has(id))).toEqual([]);
});

it("keeps ids short, sorted by start second and in the form countd always used: a daemon alone's unchanged, a node's with its tag", () => {
  expect(runId(SECOND)).toMatch(/^20261130T090000Z-[0-9a-f]{4}$/);
  expect(runId(SECOND, "web-1.example.com")).toMatch(new RegExp(`^20261130T090000Z-${nodeTag("web-1.example.com")}[0-9a-f]{4}$`));
});

it("names a cluster node's runs with its tag", async () => {
  const state = await StateStore.open(join(await mkdtemp(join(tmpdir(), "countd-run-ids-")), "state"));
  const runner = new Runner({
    job: (name) => makeJob(name),
    records: new RunSaver(state),
    concurrency: 1,
    node: "n1",
    now: () => SECOND,
    execute: async () => ({ answer: "done", status: "ok", iterations: 1, toolCalls: 0, usage: emptyUsage() }),
  });
  const run = await finalRecord(runner, fire("report"));
  expect(run).toMatchObject({
    status: "ok",
    node: "n1",
    id: expect.stringMatching(new RegExp(`^20261130T090000Z-${nodeTag("n1")}[0-9a-f]{4}$`)),
  });
  await runner.shutdown(0);
  await state.close();
});
