import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
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

  it("renders with today's job file: a changed mail subject differs, shown as a diff of the Subject lines", async () => {
    mock.on({ userMessage: "Write the weekly mail" }, { content: "All quiet this week." });
    const job = (subject: string) =>
      `prompt: Write the weekly mail\ndeliver:\n  - email: { to: [team@example.com], subject: "${subject}" }\n`;
    await writeFile(join(dir, "jobs", "mail.yaml"), job("Weekly {{date}}"));
    expect((await countd(["run", "mail"])).code).toBe(0);
    const state = await StateStore.open(join(dir, "state"));
    const [run] = await state.runs("mail");
    await state.close();
    const date = run!.startedAt.slice(0, 10);
    expect((await countd(["replay", run!.id])).stdout).toMatch(/^identical$/m);

    await writeFile(join(dir, "jobs", "mail.yaml"), job("Weekly report {{date}}"));
    const replayed = await countd(["replay", run!.id]);

    expect(replayed.code).toBe(1);
    expect(replayed.stdout).toMatch(
      /^Replay of run .*\ndiffers\nanswer: identical\ndelivery email to team@example\.com:\n--- original\/.*\.eml\n\+\+\+ deliveries\/.*\.eml\n/,
    );
    expect(replayed.stdout).toContain(`\n-Subject: Weekly ${date}\n+Subject: Weekly report ${date}\n`);
    expect(mock.getRequests()).toHaveLength(1);
  });

  it("names a run id it has no journal of, and one that several jobs' journals hold", async () => {
    const unknown = await countd(["replay", "20260101T000000Z-dead"]);
    expect(unknown).toMatchObject({ code: 1, stdout: "" });
    expect(unknown.stderr).toContain('no journal of a run "20260101T000000Z-dead"');
    expect(unknown.stderr).toContain("(countd history lists the runs)");

    mock.on({ userMessage: "Say hello" }, { content: "Hello." });
    await writeFile(join(dir, "jobs", "hello.yaml"), "prompt: Say hello\n");
    expect((await countd(["run", "hello"])).code).toBe(0);
    const state = await StateStore.open(join(dir, "state"));
    const [run] = await state.runs("hello");
    await state.close();
    const journal = join(dir, "state", "journal");
    await mkdir(join(journal, "hello-copy"));
    await copyFile(join(journal, "hello", `${run!.id}.jsonl`), join(journal, "hello-copy", `${run!.id}.jsonl`));
    const twice = await countd(["replay", run!.id]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain(`run id "${run!.id}" is in several jobs (`);
    // The option `countd replay --help` lists for it.
    expect(twice.stderr).toContain("add --of <job>");
    expect((await countd(["replay", run!.id, "--of", "hello"])).stdout).toMatch(/^identical$/m);
  });
});
