import { getMetricsFromIterator, type PromMetrics } from "prom2javascript";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, endedRun, SLOW, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";

/* GET /metrics of a real daemon whose job's tool call waits for a person's yes, answered through the API. */

/** prom2javascript reads no NaN (the event loop's lag before its first sample): those lines are left out. */
const parse = (text: string): Promise<PromMetrics> =>
  getMetricsFromIterator(
    text
      .split("\n")
      .filter((line) => !/ Nan$/.test(line))
      [Symbol.iterator](),
  );

/** The series of `name` as label sets and values. */
const seriesOf = (metrics: PromMetrics, name: string) =>
  ((metrics[name]?.data ?? []) as unknown as Array<{ labels: Record<string, string>; value: number }>).map(({ labels, value }) => ({
    labels,
    value,
  }));

describe("GET /metrics with approvals", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let env: Record<string, string>;

  beforeEach(() => {
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-approval-metrics-key" };
  });
  afterEach(() => daemons.cleanup());

  async function scrape(console: ConsoleDaemon): Promise<PromMetrics> {
    const response = await console.api("/metrics");
    expect(response.status).toBe(200);
    return parse(await response.text());
  }

  it("counts the runs waiting for an answer by job, read from the approvals, and the answers given, approved and denied", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "tidy", 'prompt: list the files\napprove:\n  rules:\n    - tool: "list_dir"\n');
    await writeJob(dir, "quiet", "prompt: never asked\n");
    mock.addFixture({
      match: { userMessage: "list the files", hasToolResult: false },
      response: { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] },
    });
    mock.addFixture({ match: { userMessage: "list the files", hasToolResult: true }, response: { content: "two files" } });
    let console = await startConsoleDaemon(dir, env);
    daemons.started.push(console);

    const before = await scrape(console);
    expect(seriesOf(before, "countd_runs_waiting")).toEqual(
      expect.arrayContaining([
        { labels: { job_name: "tidy" }, value: 0 },
        { labels: { job_name: "quiet" }, value: 0 },
      ]),
    );
    expect(seriesOf(before, "countd_approvals_answered_total")).toEqual([]);

    const { body } = await console.post("/api/jobs/tidy/run");
    expect((await endedRun(console, body.run_id, "tidy")).status).toBe("waiting");
    const waiting = await scrape(console);
    expect(seriesOf(waiting, "countd_runs_waiting")).toEqual(
      expect.arrayContaining([
        { labels: { job_name: "tidy" }, value: 1 },
        { labels: { job_name: "quiet" }, value: 0 },
      ]),
    );

    // Read from the approvals kept, not counted from events: a restarted daemon still counts it.
    await console.stop();
    daemons.started.splice(0);
    console = await startConsoleDaemon(dir, env);
    daemons.started.push(console);
    expect(seriesOf(await scrape(console), "countd_runs_waiting")).toContainEqual({ labels: { job_name: "tidy" }, value: 1 });

    const { approvals } = await console.get<{ approvals: Array<{ id: string }> }>("/api/approvals");
    expect(approvals).toHaveLength(1);
    expect((await console.post(`/api/approvals/${approvals[0]!.id}/approve`)).status).toBe(200);
    await vi.waitFor(async () => expect((await endedRun(console, body.run_id, "tidy")).status).toBe("ok"), SLOW);

    const answered = await scrape(console);
    expect(seriesOf(answered, "countd_runs_waiting")).toContainEqual({ labels: { job_name: "tidy" }, value: 0 });
    expect(seriesOf(answered, "countd_approvals_answered_total")).toEqual([{ labels: { job_name: "tidy", answer: "approved" }, value: 1 }]);

    const second = await console.post("/api/jobs/tidy/run");
    expect((await endedRun(console, second.body.run_id, "tidy")).status).toBe("waiting");
    const [next] = (await console.get<{ approvals: Array<{ id: string; status: string }> }>("/api/approvals")).approvals.filter(
      (approval) => approval.status === "waiting",
    );
    expect((await console.post(`/api/approvals/${next!.id}/deny`)).status).toBe(200);
    await vi.waitFor(async () => expect((await endedRun(console, second.body.run_id, "tidy")).status).toBe("ok"), SLOW);
    const denied = await scrape(console);
    expect(seriesOf(denied, "countd_approvals_answered_total")).toEqual([
      { labels: { job_name: "tidy", answer: "approved" }, value: 1 },
      { labels: { job_name: "tidy", answer: "denied" }, value: 1 },
    ]);
  });
});
