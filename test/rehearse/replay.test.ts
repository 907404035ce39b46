import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { checkInFixtures, HEARTBEAT_LINES, journalFixtures, MCP_LINE, WORK_JOB, writeNotes } from "../support/journal-runs.js";

/*
 * `countd replay` of runs recorded by `countd run` against the LLM server: every answer and
 * delivery comes back byte for byte, with no request reaching the server and no tool running. A
 * command the runs call appends a line to a file outside the workspace: the counting tool.
 */

describe("countd replay", { timeout: 120_000 }, () => {
  const mock = useAimock();
  let dir: string;
  let receiver: WebhookReceiver;
  const count = () => join(dir, "count.log");
  const counted = async () => (await readFile(count(), "utf8").catch(() => "")).split("\n").filter(Boolean).length;
  const countd = (args: string[]) =>
    runCountd(args, {
      cwd: dir,
      env: { PATH: process.env["PATH"] ?? "", OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-replay-test" },
    });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-replay-"));
    receiver = await startWebhookReceiver();
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), `tools:\n  exec:\n    sandbox: none\n${HEARTBEAT_LINES.join("\n")}\n${MCP_LINE}\n`);
    await writeNotes(join(dir, "workspace"));
  });
  afterEach(async () => {
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("reproduces runs with tools, a subagent, MCP tools, a retried call and a check-in, with no request and no tool run", async () => {
    journalFixtures(mock);
    checkInFixtures(mock);
    // The counting tool: each run of the command adds a line to a file outside the workspace, which no copy of it holds.
    await writeFile(
      join(dir, "workspace", "counter.mjs"),
      `import { appendFileSync } from "node:fs";\nappendFileSync(${JSON.stringify(count())}, "run\\n");\nprocess.exit(process.argv[2] === "fail" ? 3 : 0);\n`,
    );
    const counter = (arg: string) => ({ name: "exec", arguments: JSON.stringify({ command: `node counter.mjs ${arg}`.trim() }) });
    mock.on({ userMessage: "Count twice", sequenceIndex: 0 }, { toolCalls: [counter("fail")] });
    mock.on({ userMessage: "Count twice", sequenceIndex: 1 }, { toolCalls: [counter("")] });
    mock.on({ userMessage: "Count twice", sequenceIndex: 2 }, { content: "Counted on the second try." });
    await writeFile(
      join(dir, "jobs", "work.yaml"),
      `${WORK_JOB}deliver:\n  - email: { to: [team@example.com] }\n  - webhook: { url: "${receiver.url}" }\n`,
    );
    await writeFile(
      join(dir, "jobs", "count.yaml"),
      `prompt: Count twice\ntools: [exec]\ndeliver:\n  - webhook: { url: "${receiver.url}" }\n`,
    );
    for (const job of ["work", "count", "@heartbeat"]) expect((await countd(["run", job])).code).toBe(0);
    expect(await counted()).toBe(2);
    const requests = mock.getRequests().length;
    const delivered = receiver.requests.length;
    const state = await StateStore.open(join(dir, "state"));
    const ids = [...(await state.runs("work")), ...(await state.runs("count")), ...(await state.runs("@heartbeat"))].map((r) => r.id);
    await state.close();

    for (const id of ids) {
      const replayed = await countd(["replay", id]);
      expect(replayed).toMatchObject({ code: 0, stderr: "", stdout: expect.stringMatching(/^Replay of run .*\nidentical\n/) });
    }
    expect(mock.getRequests().length).toBe(requests);
    expect(await counted()).toBe(2);
    expect(receiver.requests.length).toBe(delivered);
  });
});
