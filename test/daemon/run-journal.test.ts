import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";
import type { RunView } from "../../src/console/protocol.js";
import { jobDefaults } from "../../src/jobs/defaults.js";
import type { Job } from "../../src/jobs/types.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { heartbeatJob } from "../../src/jobs/heartbeat.js";
import { openPipeline, type PipelineOptions } from "../../src/runner/pipeline.js";
import { openRuntime, type Runtime } from "../../src/runtime.js";
import { HEARTBEAT_JOB } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { CheckIns } from "../../src/triggers/check-ins.js";
import { useAimock } from "../support/aimock.js";
import { finalRecord } from "../support/runner-jobs.js";
import { CHROMIUM, hasSystemPackage } from "../support/system-package.js";
import { countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import {
  CHECK_IN_MESSAGE,
  checkInFixtures,
  expectWholeCancelled,
  expectWholeCheckIn,
  HEARTBEAT_LINES,
  expectWholeWork,
  journalFixtures,
  MCP_LINE,
  removeOtherRecords,
  SLOW,
  WORK,
  writeNotes,
} from "../support/journal-runs.js";

/*
 * Runs go through the agent loop as the daemon wires it (config → runtime → pipeline → runner)
 * against an LLM server and an MCP server on loopback: one with tools, an MCP tool, a failed tool
 * call and a subagent, one cancelled mid-command, and a heartbeat check-in. Then the session files,
 * the audit log and the tool history are removed, and `countd show` (read from the state directory,
 * and through a daemon's console API) and the console's run page in Chromium still have every step.
 */

const hasChromium = await hasSystemPackage("chromium", import.meta.filename);

/** The stores a daemon alone opens for its pipeline: its own spend ledger and outbox journal. */
const ownStores = (config: Config, runtime: Runtime): Pick<PipelineOptions, "spend" | "outbox"> => ({
  spend: (local) => local,
  outbox: (send) => Outbox.open({ stateDir: config.paths.state, send, events: runtime.events }),
});

describe("a run's journal", { timeout: 120_000 }, () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it("lets countd show and the console's API show every step of every run with nothing but the journal", async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-journal-"));
    await writeFile(
      join(dir, "countd.yaml"),
      `tools:\n  exec:\n    sandbox: none\nconsole: { listen: "127.0.0.1:0" }\n${HEARTBEAT_LINES.join("\n")}\n${MCP_LINE}\n`,
    );
    const env = { PATH: process.env["PATH"] ?? "", ...llmEnv(`${mock.url}/v1`) };
    const config = await loadConfig({ cwd: dir, env });
    await writeNotes(config.paths.workspace);
    journalFixtures(mock);
    checkInFixtures(mock);

    const runtime = await openRuntime(config, env);
    const state = await StateStore.open(config.paths.state);
    const job = (name: string, prompt: string, tools: string[]): Job => ({
      name,
      file: join(dir, "jobs", `${name}.yaml`),
      timezone: "UTC",
      prompt,
      ...jobDefaults(),
      tools,
    });
    const jobs = new Map<string, Job>([
      [
        "work",
        {
          ...job("work", WORK, ["read_file", "spawn", "mcp_notes_echo", "mcp_notes_fail"]),
          // No smtp settings: the mail is written as a file, and the journal lists its delivery.
          deliver: [{ kind: "email", to: ["boss@example.com"], cc: [], bcc: [], attach: [] }],
        },
      ],
      ["slow", job("slow", SLOW, ["exec"])],
      [HEARTBEAT_JOB, heartbeatJob(config)],
    ]);
    const checkIns: CheckIns = new CheckIns({
      config: () => config,
      state,
      memory: () => runtime.memory,
      outbox: () => pipeline.outbox,
      events: runtime.events,
      redactor: () => runtime.redactor,
    });
    const pipeline = await openPipeline({
      config,
      env,
      state,
      runtime: () => runtime,
      job: (name) => jobs.get(name),
      concurrency: 2,
      ...ownStores(config, runtime),
      wrap: (execute) => checkIns.executor(execute),
    });

    const work = await finalRecord(pipeline.runner, { job: "work", reason: "manual", scheduledAt: new Date() });
    expect(work).toMatchObject({ status: "ok", toolCalls: 5 });
    const slow = pipeline.runner.request({ job: "slow", reason: "manual", scheduledAt: new Date() });
    const slowRun = (await slow.started)!;
    const stop = runtime.events.on("tool.started", ({ name }) => {
      if (name === "exec") pipeline.runner.cancel(slowRun.id, "cancelled by the operator");
    });
    const cancelled = (await slow.ended).record;
    stop();
    expect(cancelled.status).toBe("cancelled");
    // The check-in asked for by hand, as `countd run @heartbeat` asks it: its answer is the check-in.
    const checkIn = await finalRecord(pipeline.runner, { job: HEARTBEAT_JOB, reason: "manual", scheduledAt: new Date() });
    expect(checkIn).toMatchObject({ status: "ok", resultExcerpt: CHECK_IN_MESSAGE });
    checkIns.close();

    await pipeline.runner.shutdown(0);
    await pipeline.close();
    await runtime.close();
    await state.close();
    await removeOtherRecords(dir);

    // The journal itself: the fire first, the end last, the delivery the end queued before it.
    const entries = (await readFile(join(dir, "state", "journal", "work", `${work.id}.jsonl`), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { v: number; kind: string });
    expect(entries.every((entry) => entry.v === 1)).toBe(true);
    expect(entries[0]).toMatchObject({ kind: "fire", job: "work", run: work.id, reason: "manual", session: work.sessionId });
    expect(entries.at(-2)).toEqual(
      expect.objectContaining({ kind: "delivery", ids: [expect.stringMatching(new RegExp(`^work\\.${work.id}\\.`))] }),
    );
    expect(entries.at(-1)).toMatchObject({ kind: "end", status: "ok", iterations: 3, tool_calls: 5, cost: work.cost });
    // The check-in is the heartbeat run's answer, queued as any job's answer is.
    const beat = (await readFile(join(dir, "state", "journal", HEARTBEAT_JOB, `${checkIn.id}.jsonl`), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { kind: string });
    expect(beat.at(-2)).toEqual(
      expect.objectContaining({ kind: "delivery", ids: [expect.stringMatching(new RegExp(`^@heartbeat\\.${checkIn.id}\\.`))] }),
    );
    const countd = countdIn(dir, env);
    const show = async (id: string): Promise<RunView> => {
      const shown = await countd(["show", id, "--json"]);
      expect(shown, shown.stderr).toMatchObject({ code: 0 });
      return JSON.parse(shown.stdout) as RunView;
    };
    const offline = { work: await show(work.id), slow: await show(cancelled.id), beat: await show(checkIn.id) };
    expectWholeWork(offline.work);
    expectWholeCancelled(offline.slow);
    expectWholeCheckIn(offline.beat);
    const text = await countd(["show", work.id]);
    expect(text.stdout).toContain("line 39 of the notes");
    expect(text.stdout).not.toContain("(incomplete");

    // The console's run page draws what GET /api/runs/<id> answers: the daemon reads the same journals.
    daemon = await startDaemon(dir, env);
    for (const [id, seen] of [
      [work.id, offline.work],
      [cancelled.id, offline.slow],
      [checkIn.id, offline.beat],
    ] as const) {
      const online = await show(id);
      // The console adds each text's Markdown as HTML for its page.
      const steps = online.transcript.steps.map((step) => (step.kind === "text" ? { ...step, html: undefined } : step));
      expect(JSON.parse(JSON.stringify(steps))).toEqual(seen.transcript.steps);
      expect(online.transcript.prompt).toBe(seen.transcript.prompt);
    }
    if (!hasChromium) return;

    // And the page itself, in Chromium: every call, the subagent and each whole result are drawn.
    const signIn = (await countd(["console"])).stdout.trim();
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
    try {
      const page = await browser.newPage();
      await page.goto(signIn);
      await page.locator("h1", { hasText: "Overview" }).waitFor();
      await page.goto(`${new URL(signIn).origin}/#/runs/work/${work.id}`);
      await page.locator("ol.steps li").first().waitFor();
      const labels = await page.locator("ol.steps .call-label").allTextContents();
      expect(labels).toEqual([
        "Call 1",
        "Call 2",
        expect.stringMatching(/^Subagent /),
        expect.stringMatching(/^subagent \S+ · Call 3$/),
        expect.stringMatching(/^subagent \S+ · Call 4$/),
        "Call 5",
      ]);
      const results = await page.locator("ol.steps details pre").allTextContents();
      expect(results.filter((text) => text.includes("line 100 of the notes"))).toHaveLength(2);
      expect(await page.locator("ol.steps .step-call .muted").allTextContents()).toContainEqual(expect.stringMatching(/\$\d/));
      expect(await page.locator(".notice-warn").count()).toBe(0);
    } finally {
      await browser.close();
    }
  });

  it("records the history summary a shared job's run makes before its own calls, priced like them", async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-journal-"));
    await writeFile(join(dir, "countd.yaml"), "agent:\n  max_history: 2\n");
    const env = { PATH: process.env["PATH"] ?? "", ...llmEnv(`${mock.url}/v1`) };
    const config = await loadConfig({ cwd: dir, env });
    await writeNotes(config.paths.workspace);
    mock.on({ userMessage: "Read the notes", sequenceIndex: 0 }, { toolCalls: [{ name: "read_file", arguments: '{"path":"notes.txt"}' }] });
    mock.on({ userMessage: "Read the notes", sequenceIndex: 1 }, { content: "Read them." });
    mock.on({ userMessage: "Summarise this transcript" }, { content: "The notes were read." });
    mock.on({ userMessage: "What next?" }, { content: "Nothing." });
    const runtime = await openRuntime(config, env);
    const state = await StateStore.open(config.paths.state);
    let prompt = "Read the notes";
    const diary = (): Job => ({
      name: "diary",
      file: join(dir, "jobs", "diary.yaml"),
      timezone: "UTC",
      prompt,
      ...jobDefaults(),
      session: "shared",
      tools: ["read_file"],
    });
    const pipeline = await openPipeline({
      config,
      env,
      state,
      runtime: () => runtime,
      job: () => diary(),
      concurrency: 1,
      ...ownStores(config, runtime),
    });
    await finalRecord(pipeline.runner, { job: "diary", reason: "manual", scheduledAt: new Date() });
    prompt = "What next?";
    const second = await finalRecord(pipeline.runner, { job: "diary", reason: "manual", scheduledAt: new Date() });
    await pipeline.runner.shutdown(0);
    await pipeline.close();
    await runtime.close();
    await state.close();
    await removeOtherRecords(dir);

    const shown = await countdIn(dir, env)(["show", second.id, "--json"]);
    const { transcript } = JSON.parse(shown.stdout) as RunView;
    expect(transcript.steps).toEqual([
      expect.objectContaining({ kind: "llm", purpose: "summary", cost: expect.any(Number), finish_reason: "stop" }),
      expect.objectContaining({ kind: "llm", cost: expect.any(Number) }),
      { kind: "text", text: "Nothing." },
    ]);
    const costs = transcript.steps.map((step) => (step.kind === "llm" ? step.cost! : 0));
    expect(costs[0]).toBeGreaterThan(0);
    expect(costs.reduce((sum, cost) => sum + cost, 0)).toBeCloseTo(second.cost!, 12);
  });
});
