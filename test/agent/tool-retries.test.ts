import { createServer } from "node:http";
import { mkdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileTools } from "../../src/tools/filesystem.js";
import { PathGuard } from "../../src/tools/paths.js";
import { ToolRegistry } from "../../src/tools/registry.js";
import { webFetchTool } from "../../src/tools/web.js";
import { makeAgent } from "../support/agent.js";
import { useAimock } from "../support/aimock.js";
import { closeServer, listenLoopback } from "../support/loopback.js";

/*
 * Which tool errors the loop tries again, with the real tools: an error that cannot change (a
 * missing file, a bad URL) reaches the LLM after one attempt; a passing one (a timeout, a 503)
 * is tried again.
 */

type WireRequest = { messages: Array<{ role: string; content: unknown }> };
const lastText = (req: unknown): string => {
  const content = (req as WireRequest).messages.at(-1)!.content;
  return typeof content === "string" ? content : JSON.stringify(content);
};

const requests = new Map<string, number>();
const server = createServer((req, res) => {
  const path = req.url ?? "/";
  const seen = (requests.get(path) ?? 0) + 1;
  requests.set(path, seen);
  if (path === "/hang") return;
  if (path === "/busy-twice" && seen <= 2) {
    res.writeHead(503, { "content-type": "text/plain" }).end("overloaded, try later");
    return;
  }
  res.writeHead(200, { "content-type": "text/plain" }).end(`served ${path}`);
});
let base: string;
beforeAll(async () => {
  base = `http://127.0.0.1:${await listenLoopback(server)}`;
});
afterAll(async () => {
  await closeServer(server);
});

describe("tool retries", () => {
  const mock = useAimock();

  async function agent() {
    const registry = new ToolRegistry();
    const made = await makeAgent("openai", mock, registry, { maxRetries: 3 });
    await mkdir(made.workspace, { recursive: true });
    const guard = new PathGuard({ workspace: made.workspace, restrictToWorkspace: true, readOnlyRoots: [] });
    registry.register(...fileTools({ guard }), webFetchTool({ allowHosts: ["127.0.0.1"], timeoutMs: 200 }));
    const finished: Array<{ name: string; attempts: number; error?: string }> = [];
    made.loop.events.on("tool.finished", (e) => finished.push(e));
    return { ...made, finished };
  }

  function script(prompt: string, name: string, args: Record<string, unknown>) {
    mock.addFixture({
      match: { userMessage: prompt, hasToolResult: false },
      response: { toolCalls: [{ name, arguments: JSON.stringify(args) }] },
    });
    mock.addFixture({ match: { userMessage: prompt, hasToolResult: true }, response: (req) => ({ content: `got ${lastText(req)}` }) });
  }

  it("hands a missing file's error to the LLM after one read_file attempt", async () => {
    script("read the missing notes", "read_file", { path: "notes/missing.md" });
    const { loop, finished } = await agent();
    const { answer } = await loop.processDirect("read the missing notes", "r1");
    expect(answer).toBe('got Error: "notes/missing.md" does not exist');
    expect(finished).toEqual([
      expect.objectContaining({ name: "read_file", attempts: 1, error: 'Error: "notes/missing.md" does not exist' }),
    ]);
  });

  it("tries a folder given to read_file, and a path outside the workspace, once", async () => {
    script("read a folder", "read_file", { path: "." });
    script("read outside", "read_file", { path: "/etc/hostname" });
    const { loop, workspace, finished } = await agent();
    await mkdir(`${workspace}/sub`);
    await loop.processDirect("read a folder", "r2");
    await loop.processDirect("read outside", "r3");
    expect(finished).toEqual([
      expect.objectContaining({ attempts: 1, error: expect.stringMatching(/^Error: "\." is a folder, not a file/) }),
      expect.objectContaining({ attempts: 1, error: expect.stringMatching(/^Error: refused: "\/etc\/hostname" is outside the workspace/) }),
    ]);
  });

  it("tries a URL that is not valid once", async () => {
    script("fetch garbage", "web_fetch", { url: "not a url" });
    const { loop, finished } = await agent();
    await loop.processDirect("fetch garbage", "r4");
    expect(finished).toEqual([expect.objectContaining({ attempts: 1, error: 'Error: "not a url" is not a valid URL' })]);
  });

  it("tries a fetch that timed out again, up to the attempts allowed", async () => {
    script("fetch the slow page", "web_fetch", { url: `${base}/hang` });
    const { loop, finished } = await agent();
    await loop.processDirect("fetch the slow page", "r5");
    expect(requests.get("/hang")).toBe(3);
    expect(finished).toEqual([expect.objectContaining({ attempts: 3, error: `Error: web_fetch of ${base}/hang timed out after 0.2 s` })]);
  });

  it("tries a page that answered 503 again, and hands the LLM the page once it is served", async () => {
    script("fetch the busy page", "web_fetch", { url: `${base}/busy-twice` });
    const { loop, finished } = await agent();
    const { answer } = await loop.processDirect("fetch the busy page", "r6");
    expect(requests.get("/busy-twice")).toBe(3);
    expect(answer).toContain("served /busy-twice");
    expect(finished).toEqual([expect.objectContaining({ attempts: 3 })]);
    expect(finished[0]!.error).toBeUndefined();
  });
});
