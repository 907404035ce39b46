import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { FixtureResponse } from "@copilotkit/aimock";
import { getMetricsFromIterator } from "prom2javascript";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, endedRun, SLOW, startConsoleDaemon, writeJob } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/* A real daemon (in this process) whose model reads the same file over and over: the breaker ends the run, on_failure and /metrics hear of it. */

/** Reads notes.md again after every result, never answering. */
function readForever(): FixtureResponse {
  return { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "notes.md" }) }] };
}

describe("a runaway run in the daemon", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let alerts: WebhookReceiver | undefined;
  afterEach(async () => {
    await daemons.cleanup();
    await alerts?.close();
  });

  it(
    "ends with status error, reports runaway: … to on_failure and counts it in countd_runs_total",
    async () => {
      alerts = await startWebhookReceiver();
      const dir = await consoleFolder();
      await writeFile(join(dir, "workspace", "notes.md"), "nothing new\n");
      await writeJob(dir, "poller", `prompt: check my notes\nretry:\n  attempts: 1\non_failure:\n  - webhook: { url: "${alerts.url}" }\n`);
      mock.onMessage("check my notes", readForever);
      const console = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-runaway-test" });
      daemons.started.push(console);

      const { body } = await console.post(`/api/jobs/poller/run`);
      const run = await endedRun(console, body.run_id, "poller");
      const reason = 'runaway: read_file {"path":"notes.md"} called 3 times with the same arguments';
      expect(run).toMatchObject({ status: "error", error: reason, iterations: 3, toolCalls: 2 });

      await alerts.waitFor(1);
      expect(JSON.parse(alerts.requests[0]!.body)).toMatchObject({
        type: "run.failed",
        job: "poller",
        run: { id: run.id, status: "error" },
        error: reason,
        lastToolCalls: [
          { name: "read_file", status: "ok" },
          { name: "read_file", status: "ok" },
        ],
      });

      const runsCounted = async () => {
        const text = await (await console.api("/metrics")).text();
        const metrics = await getMetricsFromIterator(
          text
            .split("\n")
            .filter((line) => !/ Nan$/.test(line))
            [Symbol.iterator](),
        );
        const runs = (metrics["countd_runs_total"]?.data ?? []) as unknown as Array<{ labels: Record<string, string>; value: number }>;
        return runs.map(({ labels, value }) => ({ labels, value }));
      };
      await vi.waitFor(
        async () => expect(await runsCounted()).toEqual([{ labels: { job_name: "poller", status: "error", reason: "manual" }, value: 1 }]),
        SLOW,
      );
    },
    SLOW.timeout,
  );
});
