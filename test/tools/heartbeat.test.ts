import { describe, expect, it } from "vitest";
import { heartbeatRespondTool } from "../../src/tools/heartbeat.js";
import { ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";
import { runTool } from "../support/sandbox.js";

type WireRequest = {
  messages: Array<{ role: string; content: unknown }>;
  tools?: Array<{ function: { name: string; parameters: { required?: string[] } } }>;
};

describe("heartbeat_respond", () => {
  it("holds nothing until called, then the decision it was given", async () => {
    const respond = heartbeatRespondTool();
    expect(respond.result()).toBeUndefined();
    expect(await runTool([respond.tool], "heartbeat_respond", { notify: true, message: "Rent is due tomorrow." })).toMatch(/will be sent/);
    expect(respond.result()).toEqual({ notify: true, message: "Rent is due tomorrow." });
  });

  it("lets a model that stays quiet leave the message out", async () => {
    const respond = heartbeatRespondTool();
    expect(await runTool([respond.tool], "heartbeat_respond", { notify: false })).toMatch(/nothing will be sent/);
    expect(respond.result()).toEqual({ notify: false, message: "" });
  });

  it("rejects arguments without a boolean notify", async () => {
    const respond = heartbeatRespondTool();
    await expect(runTool([respond.tool], "heartbeat_respond", { notify: "yes", message: "hi" })).rejects.toThrow(/notify/);
    expect(respond.result()).toBeUndefined();
  });

  it("gives each run its own tool: one run's answer does not leak into the next", async () => {
    const first = heartbeatRespondTool();
    await runTool([first.tool], "heartbeat_respond", { notify: true, message: "hello" });
    expect(heartbeatRespondTool().result()).toBeUndefined();
  });
});

describe("heartbeat_respond in a real agent loop", () => {
  const mock = useAimock();

  it("keeps the first decision when the model calls it twice in one turn", async () => {
    mock.addFixture({
      match: { userMessage: "check in", hasToolResult: false },
      response: {
        toolCalls: [
          { id: "call_quiet", name: "heartbeat_respond", arguments: JSON.stringify({ notify: false, message: "" }) },
          { id: "call_loud", name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: "Surprise!" }) },
        ],
      },
    });
    mock.addFixture({ match: { userMessage: "check in", hasToolResult: true }, response: { content: "HEARTBEAT_OK" } });
    const respond = heartbeatRespondTool();
    const { loop } = await makeAgent("openai", mock, new ToolRegistry().register(respond.tool));

    expect((await loop.processDirect("check in", "heartbeat")).answer).toBe("HEARTBEAT_OK");
    expect(respond.result()).toEqual({ notify: false, message: "" });
    const first = mock.getRequests()[0]!.body as WireRequest;
    expect(first.tools?.map((t) => t.function.name)).toEqual(["heartbeat_respond"]);
    expect(first.tools?.[0]!.function.parameters.required).toEqual(["notify"]);
    const second = mock.getRequests()[1]!.body as WireRequest;
    const results = second.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
    expect(results[0]).toMatch(/nothing will be sent/);
    expect(results[1]).toMatch(/^Ignored: this check-in was already recorded/);
  });
});
