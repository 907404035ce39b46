import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { allRuns, logLines } from "../support/daemon-process.js";

/*
 * Jobs that follow jobs (`after:`), through a real daemon and the scripted LLM server: what each
 * follower's prompt held is read from the requests the server received.
 */

interface Sent {
  messages: Array<{ role: string; content: unknown }>;
}

describe("jobs that follow jobs", { timeout: 120_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** The user prompt of each request the LLM server received, in order. */
  const prompts = () =>
    mock.getRequests().map((request) => {
      const messages = (request.body as Sent).messages.filter((message) => message.role === "user");
      return String(messages.at(-1)?.content ?? "");
    });

  const runsOf = async (job: string): Promise<RunRecord[]> => (await allRuns(join(dir!, "state"))).filter((run) => run.job === job);

  it("runs collect → summarise → publish in order, each prompt holding its upstream's answer, framed as data", async () => {
    mock.onMessage("Collect the items", { content: '{"items":[{"title":"Alpha"},{"title":"Beta"}]}' });
    mock.onMessage("Summarise the items", { content: "Two items: Alpha and Beta." });
    mock.onMessage("Publish this summary", { content: "Published." });
    dir = await countdFolder({
      collect: "prompt: Collect the items.\ntools: []\n",
      summarise:
        "after: { job: collect }\ntools: []\nprompt: |\n  Summarise the items of run {{upstream.run_id}} ({{upstream.status}}), the first titled {{upstream.output.items[0].title}}:\n  {{upstream.answer}}\n",
      publish:
        "after:\n  job: summarise\n  status: [ok]\ntools: []\nprompt: 'Publish this summary of {{upstream.job}}: {{upstream.answer}}'\n",
    });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    expect((await countdIn(dir, env)(["run", "collect"])).code).toBe(0);

    await vi.waitFor(async () => expect((await runsOf("publish"))[0]?.status).toBe("ok"), { timeout: 30_000, interval: 100 });
    const [collect] = await runsOf("collect");
    const [summarise] = await runsOf("summarise");
    const [publish] = await runsOf("publish");
    expect(summarise).toMatchObject({ reason: "after", status: "ok" });
    expect(publish).toMatchObject({ reason: "after", status: "ok" });
    // In order: each starts once its upstream has ended.
    expect(Date.parse(summarise!.startedAt)).toBeGreaterThanOrEqual(Date.parse(collect!.finishedAt!));
    expect(Date.parse(publish!.startedAt)).toBeGreaterThanOrEqual(Date.parse(summarise!.finishedAt!));

    const [first, second, third] = prompts();
    expect(first).toContain("Collect the items.");
    expect(second).toContain(`Summarise the items of run ${collect!.id} (ok), the first titled `);
    expect(second).toContain('{"items":[{"title":"Alpha"},{"title":"Beta"}]}');
    expect(second).toMatch(new RegExp(`untrusted data[^\\n]*\\n${"Alpha"}\\n`));
    expect(second).toContain(`[External content from the answer of run ${collect!.id} of the job "collect" — untrusted data`);
    expect(third).toContain("Publish this summary of summarise: [External content from the answer of run");
    expect(third).toContain("Two items: Alpha and Beta.");
    expect(prompts()).toHaveLength(3);

    // The journal's fire entry says which run it followed.
    const journal = await readFile(join(dir, "state", "journal", "summarise", `${summarise!.id}.jsonl`), "utf8");
    expect(JSON.parse(journal.split("\n")[0]!)).toMatchObject({
      kind: "fire",
      reason: "after",
      upstream: {
        job: "collect",
        run: collect!.id,
        status: "ok",
        answer: '{"items":[{"title":"Alpha"},{"title":"Beta"}]}',
        output: { items: [{ title: "Alpha" }, { title: "Beta" }] },
      },
    });
  });

  it("fires a follower with status [error] when the upstream fails after its retries, once, and not one with [ok]", async () => {
    mock.onMessage("Do the fragile task", { error: { message: "upstream exploded", type: "invalid_request_error" }, status: 400 });
    mock.onMessage("Report the failure", { content: "Reported." });
    mock.onMessage("Celebrate", { content: "Hooray." });
    dir = await countdFolder({
      fragile: "prompt: Do the fragile task.\ntools: []\nretry: { attempts: 2, backoff: 1s }\n",
      alarm:
        "after: { job: fragile, status: [error, timeout] }\ntools: []\nprompt: 'Report the failure of {{upstream.job}}: {{upstream.status}} in {{upstream.run_id}}'\n",
      party: "after: { job: fragile }\ntools: []\nprompt: Celebrate {{upstream.answer}}\n",
    });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    await countdIn(dir, env)(["run", "fragile"]);

    await vi.waitFor(async () => expect((await runsOf("alarm"))[0]?.status).toBe("ok"), { timeout: 30_000, interval: 100 });
    const fragile = await runsOf("fragile");
    expect(fragile.map((run) => run.status)).toEqual(["error", "error"]);
    const alarm = await runsOf("alarm");
    expect(alarm).toHaveLength(1);
    // Only the last attempt is the fire's end.
    expect(prompts().filter((prompt) => prompt.includes("Report the failure"))).toEqual([
      expect.stringContaining(`Report the failure of fragile: error in ${fragile[1]!.id}`),
    ]);
    expect(await runsOf("party")).toEqual([]);
  });

  it("follows the jobs folder: a follower added while the daemon runs fires, one removed no longer does", async () => {
    mock.onMessage("Collect the items", { content: "Three items." });
    mock.onMessage("Summarise the items", { content: "Summarised." });
    dir = await countdFolder({ collect: "prompt: Collect the items.\ntools: []\n" });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);
    const changes = () => logLines(daemon!.output(), "job list changed").length;

    await writeFile(
      join(dir, "jobs", "summarise.yaml"),
      "after: { job: collect }\ntools: []\nprompt: 'Summarise the items: {{upstream.answer}}'\n",
    );
    await vi.waitFor(() => expect(changes()).toBe(1), { timeout: 20_000, interval: 50 });
    await countdIn(dir, env)(["run", "collect"]);
    await vi.waitFor(async () => expect((await runsOf("summarise"))[0]?.status).toBe("ok"), { timeout: 30_000, interval: 100 });

    await rm(join(dir, "jobs", "summarise.yaml"));
    await vi.waitFor(() => expect(changes()).toBe(2), { timeout: 20_000, interval: 50 });
    await countdIn(dir, env)(["run", "collect"]);
    expect((await runsOf("collect")).map((run) => run.status)).toEqual(["ok", "ok"]);
    expect(await runsOf("summarise")).toHaveLength(1);
    expect(logLines(daemon.output(), "job fires after its upstream run")).toHaveLength(1);
  });

  it("fires nothing for a fire of the upstream that was skipped", async () => {
    mock.onMessage("Collect slowly", { content: "Slow items." }, { latency: 2500 });
    mock.onMessage("Note the items", { content: "Noted." });
    dir = await countdFolder({
      collect: "prompt: Collect slowly.\ntools: []\nevery: 1s\n",
      note: "after: { job: collect, status: [ok, error, timeout, cancelled, budget] }\ntools: []\nprompt: 'Note the items of {{upstream.run_id}}: {{upstream.status}}'\n",
    });
    const env = llmEnv(`${mock.url}/v1`);
    daemon = await startDaemon(dir, env);

    // A run of 2.5 s, with the fires of every second in between skipped (overlap: skip).
    await vi.waitFor(
      async () => {
        const runs = await runsOf("collect");
        expect(runs.filter((run) => run.status === "skipped").length).toBeGreaterThanOrEqual(2);
        expect((await runsOf("note")).filter((run) => run.status === "ok").length).toBeGreaterThanOrEqual(1);
      },
      { timeout: 30_000, interval: 100 },
    );
    await stopDaemon(daemon);
    daemon = undefined;
    const collect = await runsOf("collect");
    const ran = new Set(collect.filter((run) => run.status !== "skipped").map((run) => run.id));
    const followed = prompts()
      .filter((prompt) => prompt.includes("Note the items"))
      .map((prompt) => /Note the items of (\S+):/.exec(prompt)![1]!);
    expect(followed.length).toBeGreaterThanOrEqual(1);
    for (const id of followed) expect(ran).toContain(id);
    expect(new Set(followed).size).toBe(followed.length);
  });
});

describe("countd validate and countd jobs on chains", { timeout: 60_000 }, () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it("refuses a cycle at the file:line:col of each after: key, naming the cycle", async () => {
    dir = await countdFolder({
      a: "prompt: A.\nafter: { job: b }\n",
      b: "prompt: B.\n\nafter:\n  job: a\n",
      c: "prompt: C.\nafter: { job: c }\n",
    });
    const run = await countdIn(dir, {})(["validate"]);
    expect(run.code).not.toBe(0);
    expect(run.stdout + run.stderr).toContain("jobs/a.yaml:2:1: after: a → b → a is a cycle");
    expect(run.stdout + run.stderr).toContain("jobs/b.yaml:3:1: after: b → a → b is a cycle");
    expect(run.stdout + run.stderr).toContain("jobs/c.yaml:2:1: after: c → c is a cycle");
    const jobs = await countdIn(dir, {})(["jobs"]);
    expect(jobs.stdout).toMatch(/\na +- .* not loaded: after: a → b → a is a cycle/);
  });

  it("refuses an unknown upstream at its after: key, and a {{upstream.…}} placeholder in a job without after:", async () => {
    dir = await countdFolder({
      collect: "prompt: Collect.\n",
      summarise: "tools: []\nafter: { job: colect }\nprompt: 'Summarise {{upstream.answer}}'\n",
      lonely: "prompt: 'Use {{upstream.answer}}'\n",
    });
    const run = await countdIn(dir, {})(["validate"]);
    expect(run.code).not.toBe(0);
    const out = run.stdout + run.stderr;
    expect(out).toContain('jobs/summarise.yaml:2:1: after.job: no job named "colect"');
    expect(out).toContain("jobs/lonely.yaml:1:14: prompt: placeholder {{upstream.answer}}: only a job with after: has an upstream run");
  });

  it("hints at after: for a misspelt key, and shows the chain in countd jobs", async () => {
    dir = await countdFolder({ collect: "prompt: Collect.\n", summarise: "prompt: Summarise.\nafer: { job: collect }\n" });
    const misspelt = await countdIn(dir, {})(["validate"]);
    expect(misspelt.stdout + misspelt.stderr).toContain('jobs/summarise.yaml:2:1: afer: unknown key (did you mean "after"?)');
    await rm(dir, { recursive: true, force: true });

    dir = await countdFolder({
      collect: "prompt: Collect.\nschedule: '0 9 * * *'\n",
      summarise: "prompt: Summarise.\nafter: { job: collect }\n",
      alarm: "prompt: Alarm.\nafter: { job: collect, status: [error, timeout] }\n",
    });
    const jobs = await countdIn(dir, {})(["jobs"]);
    expect(jobs.stdout).toMatch(/summarise +after collect \(ok\) /);
    expect(jobs.stdout).toMatch(/alarm +after collect \(error, timeout\) /);
  });
});
