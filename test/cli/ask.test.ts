import { mkdtemp, readFile, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { useAimock } from "../support/aimock.js";
import { runCountd as countd } from "../support/daemon-process.js";

/**
 * For tests of what ask prints that are not about exec: whether exec can run in a sandbox here
 * (and what countd says about it on stderr) depends on the machine, not on ask.
 */
const NO_EXEC = "tools:\n  exec:\n    enabled: false\n";

describe("countd ask", () => {
  const mock = useAimock();
  let cwd: string;
  let env: Record<string, string>;
  beforeEach(async () => {
    cwd = await mkdtemp(join(tmpdir(), "countd-cli-"));
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-cli-test-key-123456" };
  });

  it("streams the answer to stdout and exits 0", async () => {
    mock.onMessage("capital of France", { content: "The capital of France is Paris." });
    await writeFile(join(cwd, "countd.yaml"), NO_EXEC);
    const run = await countd(["ask", "What is the capital of France?"], { cwd, env });
    expect(run).toMatchObject({ code: 0, stdout: "The capital of France is Paris.\n", stderr: "" });
    const audit = await readdir(join(cwd, "logs"));
    expect(audit).toEqual([expect.stringMatching(/^audit-\d{4}-\d{2}-\d{2}\.jsonl$/)]);
    expect(await readFile(join(cwd, "logs", audit[0]!), "utf8")).not.toContain("sk-cli-test-key-123456");
    // The heartbeat keeps quiet for its idle threshold after an exchange.
    expect(await readFile(join(cwd, "state", "last-exchange"), "utf8")).toMatch(/^\d{4}-\d{2}-\d{2}T[\d:.]+Z\n$/);
  });

  it("continues a session given with --session", async () => {
    mock.onMessage("remember", { content: "Noted." });
    mock.onMessage("what did I say", { content: "You asked me to remember." });
    await countd(["ask", "remember the number 42", "--session", "notes"], { cwd, env });
    const run = await countd(["ask", "what did I say", "--session", "notes"], { cwd, env });
    expect(run.code).toBe(0);
    const sent = mock.getRequests().at(-1)!.body as { messages: Array<{ role: string; content: unknown }> };
    expect(sent.messages.filter((m) => m.role !== "system").map((m) => m.content)).toEqual([
      "remember the number 42",
      "Noted.",
      "what did I say",
    ]);
  });

  it("without an API key prints one line naming the variable and exits 78", async () => {
    const run = await countd(["ask", "hello"], { cwd, env: {} });
    expect(run.code).toBe(78);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe('no API key for provider "openai": set OPENAI_API_KEY (or provider.api_key in countd.yaml)\n');
    expect(await readdir(cwd)).toEqual([]);
  });

  it("on an LLM error prints one readable line, no stack trace, and exits 1", async () => {
    mock.onMessage("down", { error: { message: "upstream exploded", type: "server_error" }, status: 500 });
    await writeFile(join(cwd, "countd.yaml"), `provider:\n  attempts: 2\n${NO_EXEC}`);
    const run = await countd(["ask", "down"], { cwd, env });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^countd: LLM request failed after 2 attempts: HTTP 500: upstream exploded.*\n$/);
    expect(run.stderr.split("\n")).toHaveLength(2);
    expect(mock.getRequests()).toHaveLength(2);
  });

  it("names file, line and column of a bad config value and exits 78", async () => {
    await writeFile(join(cwd, "countd.yaml"), "agent:\n  max_iterations: lots\n");
    const run = await countd(["ask", "hello"], { cwd, env });
    expect(run.code).toBe(78);
    expect(run.stderr).toMatch(/^countd\.yaml:2:19: agent\.max_iterations: .*"lots"/);
  });

  it("on Ctrl-C cancels the run cleanly and exits 130", async () => {
    mock.onMessage("long", { content: "one two three four five six seven eight nine ten eleven twelve" }, { latency: 100 });
    let interrupted = false;
    const run = await countd(["ask", "a long answer please"], {
      cwd,
      env,
      onStdout: (_text, kill) => {
        if (!interrupted) {
          interrupted = true;
          kill();
        }
      },
    });
    expect(run.code).toBe(130);
    expect(run.stdout.length).toBeLessThan("one two three four five six seven eight nine ten eleven twelve".length);
    const session = await readFile(join(cwd, "state", "sessions", "cli.jsonl"), "utf8");
    expect(session).toContain("a long answer please");
  });

  it("reports each tool call on stderr while the answer streams to stdout", async () => {
    mock.addFixture({
      match: { userMessage: "write a note", hasToolResult: false },
      response: { toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "notes/today.md", content: "buy milk" }) }] },
    });
    mock.addFixture({ match: { userMessage: "write a note", hasToolResult: true }, response: { content: "Noted in notes/today.md." } });
    await writeFile(join(cwd, "countd.yaml"), NO_EXEC);
    const run = await countd(["ask", "write a note"], { cwd, env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Noted in notes/today.md.\n");
    expect(run.stderr).toMatch(/^\[tool\] write_file \{"path":"notes\/today\.md","content":"buy milk"\} ok \d+ms\n$/);
    expect(await readFile(join(cwd, "workspace", "notes", "today.md"), "utf8")).toBe("buy milk");
  });

  it("offers only the tools named with --tools", async () => {
    mock.onMessage("which tools", { content: "Only reading." });
    const run = await countd(["ask", "which tools", "--tools", "read_file,list_dir"], { cwd, env });
    expect(run.code).toBe(0);
    const sent = mock.getRequests().at(-1)!.body as { tools: Array<{ function: { name: string } }> };
    expect(sent.tools.map((t) => t.function.name)).toEqual(["read_file", "list_dir"]);
  });

  it("names an unknown tool and a switched-off exec in one line", async () => {
    const unknown = await countd(["ask", "hi", "--tools", "read_file,teleport"], { cwd, env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^countd: unknown tool\(s\): teleport \(known: read_file, .*spawn\)\n$/);
    await writeFile(join(cwd, "countd.yaml"), "tools:\n  exec:\n    enabled: false\n");
    const off = await countd(["ask", "hi", "--tools", "exec"], { cwd, env });
    expect(off.code).toBe(1);
    expect(off.stderr).toBe("countd: the exec tool is switched off in the configuration (tools.exec.enabled: false)\n");
  });
});
