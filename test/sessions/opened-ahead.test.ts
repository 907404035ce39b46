import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { approvalGate } from "../../src/approvals/gate.js";
import { approveSchema } from "../../src/approvals/rules.js";
import { defineTool, ToolRegistry } from "../../src/tools/registry.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";

/** Waits up to 5 s for `path` to exist: whether it was there while the run went on. */
async function appears(path: string): Promise<boolean> {
  for (let waited = 0; waited < 5_000; waited += 10) {
    if (existsSync(path)) return true;
    await sleep(10);
  }
  return false;
}

describe("an isolated run's session file", () => {
  const mock = useAimock();

  function scriptedTurns() {
    mock.on({}, (req) =>
      req.messages.some((m) => m.role === "tool")
        ? { content: "Checked: the disk is at 61 %." }
        : { toolCalls: [{ id: "call_1", name: "check", arguments: "{}" }] },
    );
  }

  it("is created while the run goes on, and holds the run's messages once it ends", async () => {
    scriptedTurns();
    let sawFile: boolean | undefined;
    const sessionId = "cron:disk:20261205T090000Z";
    const check = defineTool({
      name: "check",
      description: "Checks the disk.",
      parameters: z.object({}),
      execute: async () => {
        sawFile = await appears(agent.sessions.fileOf(sessionId));
        return "disk 61 %";
      },
    });
    const agent = await makeAgent("openai", mock, new ToolRegistry().register(check));
    const { answer } = await agent.loop.processDirect("How full is the disk?", sessionId, { runId: "20261205T090000Z" });
    expect(answer).toBe("Checked: the disk is at 61 %.");
    // Created beside the first LLM call, not after the last: the run's end waits for the write alone.
    expect(sawFile).toBe(true);
    const lines = (await readFile(agent.sessions.fileOf(sessionId), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines.map((line) => line.role ?? `run ${line.run}`)).toEqual(["run 20261205T090000Z", "user", "assistant", "tool", "assistant"]);
  });

  it("is not left empty by a run that waits for a person's yes, and gets the whole run once it goes on", async () => {
    scriptedTurns();
    const check = defineTool({
      name: "check",
      description: "Checks the disk.",
      parameters: z.object({}),
      execute: async () => "disk 61 %",
    });
    const agent = await makeAgent("openai", mock, new ToolRegistry().register(check), {
      approvals: approvalGate(approveSchema.parse({ rules: [{ tool: "check" }] })),
    });
    const sessionId = "cron:disk:20261205T100000Z";
    const waiting = await agent.loop.settle("How full is the disk?", sessionId, { canWait: true });
    expect(waiting.report.status).toBe("waiting");
    expect(existsSync(agent.sessions.fileOf(sessionId))).toBe(false);

    const { answer, report } = await agent.loop.settle("", sessionId, {
      canWait: true,
      resume: { from: waiting.report.suspended!, decision: { approved: true } },
    });
    expect(report.status).toBe("ok");
    expect(answer).toBe("Checked: the disk is at 61 %.");
    expect(await agent.sessions.load(sessionId)).toMatchObject([
      { role: "user", content: "How full is the disk?" },
      { role: "assistant" },
      { role: "tool", content: "disk 61 %" },
      { role: "assistant", content: "Checked: the disk is at 61 %." },
    ]);
  });
});
