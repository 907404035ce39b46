import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { vi } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { Logger } from "../../src/log.js";
import { openRuntime, type Runtime } from "../../src/runtime.js";

/** The MCP server the suite writes with the SDK's server classes (see the file for its tools and flags). */
export const FIXTURE = resolve(import.meta.dirname, "fixtures/server.mjs");

/** The MCP server that attacks its client (see the file for its tools). */
export const HOSTILE = resolve(import.meta.dirname, "fixtures/hostile.mjs");

/** A published server, run unmodified: its own bin file under node_modules, never fetched. */
export const FILESYSTEM_SERVER = (() => {
  const require = createRequire(import.meta.url);
  const manifest = require.resolve("@modelcontextprotocol/server-filesystem/package.json");
  const { bin } = require(manifest) as { bin: Record<string, string> };
  return join(dirname(manifest), bin["mcp-server-filesystem"]!);
})();

/** A stdio server entry running the fixture with `flags`; `more`: other keys of the entry. */
export const fixtureServer = (flags: string[] = [], more: Record<string, unknown> = {}) => ({
  command: process.execPath,
  args: [FIXTURE, ...flags],
  ...more,
});

/** A countd folder whose countd.yaml has these MCP servers (and exec unsandboxed, which these tests do not use). */
export async function mcpFolder(servers: Record<string, unknown>, extra = ""): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "countd-mcp-"));
  await writeFile(join(dir, "countd.yaml"), `tools:\n  exec:\n    sandbox: none\nmcp_servers: ${JSON.stringify(servers)}\n${extra}`);
  await mkdir(join(dir, "jobs"));
  return dir;
}

/** The environment a run gets: both wire formats at the LLM simulator, with keys the servers must never see. */
export const llmEnv = (llmUrl: string): Record<string, string> => ({
  PATH: process.env["PATH"] ?? "",
  OPENAI_BASE_URL: `${llmUrl}/v1`,
  OPENAI_API_KEY: "sk-mcp-test-provider-key",
  ANTHROPIC_BASE_URL: llmUrl,
  ANTHROPIC_API_KEY: "sk-ant-mcp-test-provider-key",
});

/** The runtime of the folder's countd.yaml, as `countd ask` and the daemon open it. */
export async function runtimeIn(dir: string, env: Record<string, string>, log?: Logger): Promise<Runtime> {
  const config = await loadConfig({ cwd: dir, env });
  return openRuntime(config, env, undefined, log);
}

export interface HttpFixture {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

/** A fixture (`script`) over streamable HTTP on a loopback port (a free one unless given), in a process of its own. */
export async function startHttpFixture(port = 0, script = FIXTURE, env: Record<string, string> = {}): Promise<HttpFixture> {
  const child = spawn(process.execPath, [script, "--http", `--port=${port}`], {
    env: { PATH: process.env["PATH"] ?? "", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const listening = await new Promise<string>((found, failed) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const match = /listening (\d+)/.exec(out);
      if (match) found(match[1]!);
    });
    child.on("exit", (code) => failed(new Error(`the HTTP fixture exited ${code}`)));
  });
  const exited = new Promise<void>((done) => child.on("exit", () => done()));
  return {
    url: `http://127.0.0.1:${listening}/mcp`,
    child,
    close: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** Lines in the fixture's COUNT_FILE: how many times its counted tools were called. */
export async function calls(file: string): Promise<string[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text.split("\n").filter(Boolean);
}

/** Until the runtime's server `name` is connected again. */
export async function connected(runtime: Runtime, name: string): Promise<void> {
  await vi.waitFor(
    () => {
      const state = runtime.mcp?.reports().find((server) => server.name === name)?.state.status;
      if (state !== "connected") throw new Error(`${name} is ${state}`);
    },
    { timeout: 15_000, interval: 50 },
  );
}
