import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatCompletionRequest, Fixture, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver, type ReceivedRequest, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Scenario 1 of the fault suite: the built daemon runs a three-iteration tool-using job over and
 * over while about 30 % of LLM requests fail. `COUNTD_FAULTS=full` runs it at full size.
 */

const FULL = process.env["COUNTD_FAULTS"] === "full";
const RUNS = FULL ? 100 : 15;
const JOBS = ["chaos-a", "chaos-b", "chaos-c"];
const ORDERS = "order 1041: shipped\norder 1042: shipped\norder 1043: held at customs\n";
const ANSWER = "Orders 1041 and 1042 have shipped; order 1043 is held at customs and needs a follow-up.";
const SLOW = { timeout: FULL ? 240_000 : 45_000, interval: 250 };

/*
 * aimock rolls its chaos rates one after another (drop, malformed, rate limit), each only if the
 * earlier ones missed, so these give about 7.5 % each; the mid-stream cut takes about 7.5 % of what
 * is left. A 429 carries `Retry-After: 1`. The cut waits between chunks: unpaced, aimock's writes
 * are still buffered when it destroys the socket, and the client sees a refused response instead.
 */
const CHAOS = { dropRate: 0.075, malformedRate: 0.081, rateLimitRate: 0.088 };
const CUT_RATE = 0.097;

/** The model's side of the job: list the workspace, read the orders, answer. */
function reply(request: ChatCompletionRequest): FixtureResponse {
  const toolResults = request.messages.filter((message) => message.role === "tool").length;
  if (toolResults === 0) return { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] };
  if (toolResults === 1) return { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "orders.txt" }) }] };
  return { content: ANSWER };
}

interface AuditLine {
  kind: string;
  session: string;
  status?: string;
  iterations?: number;
  toolCalls?: number;
  tool?: string;
  result?: string;
  error?: string;
}

interface Delivery {
  type: string;
  job: string;
  run: { id: string; status: string };
  result?: string;
  error?: string;
}

/** The run as a delivery describes it: the record's own fields. */
const described = (run: RunRecord) =>
  expect.objectContaining({ id: run.id, status: run.status, startedAt: run.startedAt, finishedAt: run.finishedAt, usage: run.usage });

/** Run ids are unique within a job: two jobs' runs started in the same second may share one. */
const runKey = (run: { job: string; id: string }): string => `${run.job}/${run.id}`;

/** The deliveries a receiver got, by the job and run they describe. */
function byRun(requests: ReceivedRequest[]): Map<string, Delivery[]> {
  const runs = new Map<string, Delivery[]>();
  for (const request of requests) {
    const body = JSON.parse(request.body) as Delivery;
    const key = runKey({ job: body.job, id: body.run.id });
    runs.set(key, [...(runs.get(key) ?? []), body]);
  }
  return runs;
}

describe("LLM chaos: 30 % of LLM requests fail", () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;
  const receivers: WebhookReceiver[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-llm-chaos-"));
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "workspace"));
    await writeFile(join(dir, "workspace", "orders.txt"), ORDERS);
    await writeFile(
      join(dir, "countd.yaml"),
      [
        "provider:",
        "  attempts: 2",
        // Nothing here should hang; if a request does, it fails well inside the job's timeout.
        "  timeout: 5s",
        "runner:",
        "  concurrency: 3",
        "  shutdown_grace: 1s",
        "tools:",
        "  exec:",
        "    sandbox: none",
        "",
      ].join("\n"),
    );
  });
  afterEach(async () => {
    if (daemon) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
      daemon = undefined;
    }
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
    await rm(dir, { recursive: true, force: true });
  });

  async function receiver(): Promise<WebhookReceiver> {
    const started = await startWebhookReceiver();
    receivers.push(started);
    return started;
  }

  const jobYaml = (enabled: boolean, answers: string, failures: string) =>
    [
      `enabled: ${enabled}`,
      'schedule: "* * * * * *"',
      "prompt: list the workspace, read orders.txt and tell me which orders need a follow-up",
      "tools: [list_dir, read_file]",
      "overlap: allow",
      "timeout: 20s",
      "deliver:",
      `  - webhook: { url: "${answers}" }`,
      "on_failure:",
      `  - webhook: { url: "${failures}" }`,
      // Every failure reported, not one an hour: each failed run's report is what is checked.
      "on_failure_repeat: 1ms",
      "",
    ].join("\n");

  async function auditLines(): Promise<AuditLine[]> {
    const folder = join(dir, "logs");
    const files = (await readdir(folder)).filter((name) => /^audit-.*\.jsonl$/.test(name));
    const texts = await Promise.all(files.map((name) => readFile(join(folder, name), "utf8")));
    return texts.flatMap((text) =>
      text
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as AuditLine),
    );
  }

  it(
    `every one of ${RUNS}+ runs ends ok or error, and its record, audit lines and delivery agree`,
    async () => {
      const cut: Fixture = {
        match: { predicate: () => Math.random() < CUT_RATE },
        response: reply,
        truncateAfterChunks: 3,
        chunkSize: 8,
        latency: 20,
      };
      mock.addFixture(cut);
      mock.addFixture({ match: { predicate: () => true }, response: reply, chunkSize: 8 });
      mock.setChaos(CHAOS);
      const answers = await receiver();
      const failures = await receiver();
      for (const job of JOBS) await writeFile(join(dir, "jobs", `${job}.yaml`), jobYaml(true, answers.url, failures.url));

      const started = Date.now();
      daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-chaos-test-key" });
      const state = join(dir, "state");
      await vi.waitFor(async () => expect((await allRuns(state)).length).toBeGreaterThanOrEqual(RUNS), SLOW);
      for (const job of JOBS) await writeFile(join(dir, "jobs", `${job}.yaml`), jobYaml(false, answers.url, failures.url));

      // Once the jobs are disabled, fires stop; every run already queued or running must still end.
      let runs: RunRecord[] = [];
      await vi.waitFor(async () => {
        const before = (await allRuns(state)).length;
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        runs = await allRuns(state);
        expect(runs.length).toBe(before);
        expect(runs.filter((run) => run.status === "running")).toEqual([]);
      }, SLOW);
      const ok = runs.filter((run) => run.status === "ok");
      const failed = runs.filter((run) => run.status === "error");
      await vi.waitFor(() => {
        expect(answers.requests.length).toBeGreaterThanOrEqual(ok.length);
        expect(failures.requests.length).toBeGreaterThanOrEqual(failed.length);
      }, SLOW);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);

      expect(daemon.child.exitCode).toBeNull();
      expect(runs.length).toBeGreaterThanOrEqual(RUNS);
      expect(runs.map((run) => run.status).filter((status) => status !== "ok" && status !== "error")).toEqual([]);
      expect(ok.length).toBeGreaterThan(0);

      // The chaos really hit: faulted requests were answered, and retried.
      const journal = mock.getRequests();
      const faults = {
        drop: journal.filter((entry) => entry.response.chaosAction === "drop").length,
        malformed: journal.filter((entry) => entry.response.chaosAction === "malformed").length,
        rateLimit: journal.filter((entry) => entry.response.chaosAction === "rateLimit").length,
        cut: journal.filter((entry) => entry.response.fixture === cut && entry.response.chaosAction === undefined).length,
      };
      expect(Object.values(faults).reduce((sum, n) => sum + n, 0)).toBeGreaterThan(0);

      const audit = await auditLines();
      const answersByRun = byRun(answers.requests);
      const failuresByRun = byRun(failures.requests);
      for (const run of runs) {
        const lines = audit.filter((line) => line.session === run.sessionId);
        const messages = lines.filter((line) => line.kind === "message");
        const tools = lines.filter((line) => line.kind === "tool");
        const llm = lines.filter((line) => line.kind === "llm");
        const context = `run ${run.id} of ${run.job} (${run.status}${run.error ? `: ${run.error}` : ""})`;

        expect(messages, context).toHaveLength(1);
        expect(messages[0], context).toMatchObject({ status: run.status, iterations: run.iterations, toolCalls: run.toolCalls });
        expect(tools, context).toHaveLength(run.toolCalls);
        expect(llm, context).toHaveLength(run.iterations);
        expect(
          llm.filter((line) => line.error !== undefined),
          context,
        ).toHaveLength(run.status === "error" ? 1 : 0);
        expect(
          tools.every((line) => line.status === "ok"),
          context,
        ).toBe(true);

        if (run.status === "ok") {
          expect(run, context).toMatchObject({ iterations: 3, toolCalls: 2, resultExcerpt: ANSWER });
          expect(
            tools.map((line) => line.tool),
            context,
          ).toEqual(["list_dir", "read_file"]);
          expect(tools[1]!.result, context).toContain("held at customs");
          expect(answersByRun.get(runKey(run)), context).toEqual([
            expect.objectContaining({ type: "run.completed", job: run.job, run: described(run), result: ANSWER }),
          ]);
          // The first success after failures tells on_failure the job recovered; nothing else goes there.
          const recovered = failuresByRun.get(runKey(run));
          if (recovered)
            expect(recovered, context).toEqual([expect.objectContaining({ type: "run.recovered", job: run.job, run: described(run) })]);
        } else {
          // What failed, and where: the fault as the provider saw it, and the endpoint.
          expect(run.error, context).toContain(`(openai at ${mock.url}/v1, model `);
          expect(messages[0]!.error, context).toBe(run.error);
          expect(llm.at(-1)!.error, context).toBe(run.error);
          expect(failuresByRun.get(runKey(run)), context).toEqual([
            expect.objectContaining({
              type: "run.failed",
              job: run.job,
              run: described(run),
              error: run.error,
              lastToolCalls: tools.map((line) => expect.objectContaining({ name: line.tool, status: "ok" })),
            }),
          ]);
          expect(answersByRun.get(runKey(run)), context).toBeUndefined();
        }
      }
      // Nothing was delivered for a run the records do not know.
      expect(answers.requests).toHaveLength(ok.length);
      const recoveries = ok.filter((run) => failuresByRun.has(runKey(run))).length;
      expect(recoveries).toBeLessThanOrEqual(failed.length);
      expect(failures.requests).toHaveLength(failed.length + recoveries);
      expect(new Set(answers.acknowledgedIds()).size).toBe(ok.length);
      expect(new Set(failures.acknowledgedIds()).size).toBe(failed.length + recoveries);

      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      console.info(
        `llm-chaos: ${runs.length} runs (${ok.length} ok, ${failed.length} error) in ${seconds}s; ` +
          `${journal.length} LLM requests, faults ${JSON.stringify(faults)}`,
      );
    },
    FULL ? 600_000 : 60_000,
  );
});
