import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { describe, expect, it } from "vitest";
import { Breaker, breakerFor, canonical, DEFAULT_BREAKER } from "../../src/agent/breaker.js";
import type { AgentLoopOptions } from "../../src/agent/loop.js";
import { SubagentManager } from "../../src/agent/subagents.js";
import { spawnTool } from "../../src/agent/spawn.js";
import { fileTools } from "../../src/tools/filesystem.js";
import { PathGuard } from "../../src/tools/paths.js";
import { ToolRegistry } from "../../src/tools/registry.js";
import { frameUntrusted } from "../../src/tools/untrusted.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";

/*
 * The breaker for runs that repeat themselves: the pure counts, then real loops with the real
 * file tools against an LLM server on loopback whose model keeps calling tools.
 */

describe("Breaker", () => {
  it("trips on the third identical call, comparing arguments with their keys sorted", () => {
    const breaker = new Breaker(DEFAULT_BREAKER);
    expect(breaker.call("read_file", { path: "x", start_line: 1 })).toBeUndefined();
    expect(breaker.call("read_file", { start_line: 1, path: "x" })).toBeUndefined();
    expect(breaker.call("read_file", { path: "y" })).toBeUndefined();
    expect(breaker.call("list_dir", { start_line: 1, path: "x" })).toBeUndefined();
    expect(breaker.call("read_file", { start_line: 1, path: "x" })).toBe(
      'runaway: read_file {"path":"x","start_line":1} called 3 times with the same arguments',
    );
    expect(canonical({ b: { d: 1, c: [{ f: 2, e: 3 }] }, a: null })).toBe('{"a":null,"b":{"c":[{"e":3,"f":2}],"d":1}}');
  });

  it("counts tool errors in a row, a success starting the count again", () => {
    const breaker = new Breaker({ ...DEFAULT_BREAKER, errorsInARow: 2 });
    breaker.call("exec", { command: "a" });
    expect(breaker.result("exec", "Error: refused a", true)).toBeUndefined();
    breaker.call("exec", { command: "b" });
    expect(breaker.result("exec", "fine", false)).toBeUndefined();
    breaker.call("exec", { command: "c" });
    expect(breaker.result("exec", "Error: refused c", true)).toBeUndefined();
    breaker.call("exec", { command: "d" });
    expect(breaker.result("exec", "Error: refused d", true)).toBe('runaway: 2 tool errors in a row, the last of exec {"command":"d"}');
  });

  it("counts iterations in a row that brought no result not seen before", () => {
    const breaker = new Breaker({ ...DEFAULT_BREAKER, idleIterations: 2 });
    const iterate = (result: string) => {
      breaker.call("web_fetch", { url: result });
      breaker.result("web_fetch", result, false);
      return breaker.iteration();
    };
    expect(iterate("a")).toBeUndefined();
    expect(iterate("a")).toBeUndefined();
    expect(iterate("b")).toBeUndefined();
    expect(iterate("a")).toBeUndefined();
    expect(iterate("b")).toBe('runaway: 2 LLM iterations in a row brought no new tool result, the last calling web_fetch {"url":"b"}');
  });

  it("reads the same content in two frames, each with its own boundary, as the same result", () => {
    const breaker = new Breaker({ ...DEFAULT_BREAKER, idleIterations: 1 });
    const first = frameUntrusted("the read_file tool", "the same notes");
    const second = frameUntrusted("the read_file tool", "the same notes");
    expect(second).not.toBe(first);
    breaker.call("read_file", { path: "notes.md" });
    breaker.result("read_file", first, false);
    expect(breaker.iteration()).toBeUndefined();
    breaker.call("read_file", { path: "./notes.md" });
    breaker.result("read_file", second, false);
    expect(breaker.iteration()).toMatch(/^runaway: 1 LLM iteration in a row brought no new tool result/);
  });

  it("lays a job's limits over countd.yaml's, and false turns it off", () => {
    const yaml = { sameCall: 4, errorsInARow: 6, idleIterations: 9 };
    expect(breakerFor(undefined, yaml)).toEqual(yaml);
    expect(breakerFor(false, yaml)).toBe(false);
    expect(breakerFor({ sameCall: 10 }, yaml)).toEqual({ ...yaml, sameCall: 10 });
    expect(breakerFor({}, false)).toEqual(DEFAULT_BREAKER);
    expect(breakerFor(undefined, false)).toBe(false);
  });
});

type Call = { name: string; arguments: Record<string, unknown> };

/** A model that makes the calls `script` gives for the number of tool results so far, and answers when it gives none. */
function model(script: (results: number) => Call | undefined): (request: ChatCompletionRequest) => FixtureResponse {
  return (request) => {
    const call = script(request.messages.filter((message) => message.role === "tool").length);
    return call ? { toolCalls: [{ name: call.name, arguments: JSON.stringify(call.arguments) }] } : { content: "done" };
  };
}

describe("a loop that repeats itself", () => {
  const mock = useAimock();

  async function agent(options: Partial<AgentLoopOptions> = {}) {
    const registry = new ToolRegistry();
    const made = await makeAgent("openai", mock, registry, options);
    await mkdir(made.workspace, { recursive: true });
    await writeFile(join(made.workspace, "notes.md"), "the same notes\n");
    registry.register(...fileTools({ guard: new PathGuard({ workspace: made.workspace, restrictToWorkspace: true, readOnlyRoots: [] }) }));
    return made;
  }

  it("ends with error when the model makes the same call a third time, and does not make it", async () => {
    // The keys come in another order each time: still the same arguments.
    mock.onMessage(
      "read my notes",
      model((results) =>
        results < 10
          ? { name: "read_file", arguments: results % 2 ? { start_line: 1, path: "notes.md" } : { path: "notes.md", start_line: 1 } }
          : undefined,
      ),
    );
    const { loop } = await agent();
    const { report, failure } = await loop.settle("read my notes", "same-call");
    expect(report.status).toBe("error");
    expect(report.error).toBe('runaway: read_file {"path":"notes.md","start_line":1} called 3 times with the same arguments');
    expect(String(failure)).toContain("runaway: read_file");
    expect(report.calls).toHaveLength(2);
    expect(report.iterations).toBe(3);
  });

  it("ends with error after five tool errors in a row", async () => {
    mock.onMessage(
      "read the missing files",
      model((results) => (results < 10 ? { name: "read_file", arguments: { path: `missing-${results + 1}.md` } } : undefined)),
    );
    const { loop } = await agent();
    const { report } = await loop.settle("read the missing files", "errors");
    expect(report.status).toBe("error");
    expect(report.error).toBe('runaway: 5 tool errors in a row, the last of read_file {"path":"missing-5.md"}');
    expect(report.calls.map((call) => call.isError)).toEqual([true, true, true, true, true]);
  });

  it("lets the model answer without tools, but ends a run whose tool results stop being new after 8 iterations", async () => {
    mock.onMessage("just say hello", { content: "hello" });
    // Each path is new, but names the same file: the same text each time.
    mock.onMessage(
      "keep reading",
      model((results) => (results < 20 ? { name: "read_file", arguments: { path: `${"./".repeat(results)}notes.md` } } : undefined)),
    );
    const { loop } = await agent();
    expect((await loop.settle("just say hello", "answer")).report).toMatchObject({ status: "ok", iterations: 1 });
    const { report } = await loop.settle("keep reading", "idle");
    expect(report.status).toBe("error");
    expect(report.error).toBe(
      `runaway: 8 LLM iterations in a row brought no new tool result, the last calling read_file {"path":"${"./".repeat(8)}notes.md"}`,
    );
    expect(report.iterations).toBe(9);
  });

  it("with breaker false, lets the same call run three times", async () => {
    mock.onMessage(
      "read my notes thrice",
      model((results) => (results < 3 ? { name: "read_file", arguments: { path: "notes.md" } } : undefined)),
    );
    const { loop } = await agent({ breaker: false });
    const { answer, report } = await loop.settle("read my notes thrice", "off");
    expect(report.status).toBe("ok");
    expect(answer).toBe("done");
    expect(report.calls).toHaveLength(3);
    for (const call of report.calls)
      expect(call).toMatchObject({ name: "read_file", isError: false, result: expect.stringContaining("the same notes") });
  });

  it("counts a subagent's calls toward its own loop, whose runaway is one tool error for the parent, not tried again", async () => {
    const subagentRequests = () => mock.getRequests().filter((r) => JSON.stringify(r.body).includes("Channel: subagent")).length;
    mock.addFixture({
      match: { predicate: (req) => JSON.stringify(req).includes("Channel: subagent") },
      response: { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "notes.md" }) }] },
    });
    mock.onMessage(
      "delegate the notes",
      model((results) => (results === 0 ? { name: "spawn", arguments: { task: "Read notes.md until it changes." } } : undefined)),
    );
    const sub = await agent();
    const parentTools = new ToolRegistry().register(spawnTool(new SubagentManager({ maxConcurrent: 1, timeoutMs: 10_000 }), sub.loop));
    const parent = await makeAgent("openai", mock, parentTools);
    const { answer, report } = await parent.loop.settle("delegate the notes", "parent");
    expect(report.status).toBe("ok");
    expect(answer).toBe("done");
    expect(report.calls).toEqual([
      expect.objectContaining({
        name: "spawn",
        isError: true,
        result: 'Error: runaway: read_file {"path":"notes.md"} called 3 times with the same arguments',
      }),
    ]);
    expect(subagentRequests()).toBe(3);
  });
});
