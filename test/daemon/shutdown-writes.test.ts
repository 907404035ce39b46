import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sessionFileName } from "../../src/sessions/file-names.js";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

/** Each run lists the workspace, then answers: one tool call, two LLM calls. */
function reply(request: ChatCompletionRequest): FixtureResponse {
  const toolResults = request.messages.filter((message) => message.role === "tool").length;
  return toolResults === 0 ? { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] } : { content: "listed" };
}

interface AuditLine {
  kind: string;
  session: string;
  toolCalls?: number;
}

/*
 * The audit log is written off the main thread and tool history is kept in memory until a run's
 * message ends: what a run wrote before SIGTERM must be in the files once the daemon has exited.
 */
describe("countd start, stopped by SIGTERM while jobs run", () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-shutdown-writes-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    sandbox: none\n");
    // Slow enough that SIGTERM finds runs in the middle of their calls.
    mock.addFixture({ match: { predicate: () => true }, response: reply, latency: 150 });
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await rm(dir, { recursive: true, force: true, maxRetries: 5 });
  });

  it("leaves every audit line, tool call and transcript of the runs in their files", async () => {
    for (let i = 0; i < 3; i++)
      await writeFile(join(dir, "jobs", `lister-${i}.yaml`), 'schedule: "* * * * * *"\nprompt: list the workspace\n');
    daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-shutdown-test-key" });
    await vi.waitFor(
      async () => expect((await allRuns(join(dir, "state"))).filter((r) => r.status === "ok").length).toBeGreaterThanOrEqual(4),
      {
        timeout: 20_000,
        interval: 100,
      },
    );
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);

    const logs = join(dir, "logs");
    const texts = await Promise.all(
      (await readdir(logs)).filter((name) => name.startsWith("audit-")).map((name) => readFile(join(logs, name), "utf8")),
    );
    const audit = texts
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AuditLine);
    // Every run that reached the agent loop, finished or cut short at the end of the grace period.
    const started = (await allRuns(join(dir, "state"))).filter((run) => run.iterations > 0);
    expect(started.length).toBeGreaterThanOrEqual(4);
    for (const run of started) {
      const context = `run ${run.id} (${run.status})`;
      expect(
        audit.filter((line) => line.kind === "message" && line.session === run.sessionId),
        context,
      ).toEqual([expect.objectContaining({ toolCalls: run.toolCalls })]);
      expect(
        audit.filter((line) => line.kind === "tool" && line.session === run.sessionId),
        context,
      ).toHaveLength(run.toolCalls);
      expect(
        audit.filter((line) => line.kind === "llm" && line.session === run.sessionId),
        context,
      ).toHaveLength(run.iterations);
      // A run's tool calls are kept in its journal (the tool history keeps countd ask's).
      const journal = await readFile(join(dir, "state", "journal", run.job, `${run.id}.jsonl`), "utf8").catch(() => "");
      const entries = journal
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { kind: string });
      expect(
        entries.filter((entry) => entry.kind === "tool"),
        context,
      ).toHaveLength(run.toolCalls);
      expect(entries.at(-1), context).toMatchObject({ kind: "end", status: run.status, tool_calls: run.toolCalls });
      const [marker, ...messages] = (await readFile(join(dir, "state", "sessions", sessionFileName(run.sessionId)), "utf8"))
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { role?: string; run?: string });
      // The run's messages follow the line that marks them as this run's.
      expect(marker, context).toEqual({ run: run.id, at: expect.any(String) });
      const transcript = messages.map((message) => message.role);
      expect(transcript[0], context).toBe("user");
      expect(
        transcript.filter((role) => role === "tool"),
        context,
      ).toHaveLength(run.toolCalls);
    }
  }, 40_000);
});
