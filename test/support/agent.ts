import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentLoop, type AgentLoopOptions } from "../../src/agent/loop.js";
import { ContextBuilder } from "../../src/agent/context.js";
import { MemoryStore } from "../../src/memory/store.js";
import { SkillsLoader } from "../../src/skills/loader.js";
import { SessionStore } from "../../src/sessions/store.js";
import { OpenAIProvider } from "../../src/providers/openai.js";
import { AnthropicProvider } from "../../src/providers/anthropic.js";
import { withRetry } from "../../src/providers/retry.js";
import type { LLMProvider } from "../../src/providers/types.js";
import { ToolRegistry } from "../../src/tools/registry.js";

/** Stand-ins for real keys: the audit tests check these never reach a log. */
export const TEST_KEYS = { openai: "sk-test-openai-0123456789", anthropic: "sk-ant-test-0123456789" } as const;

export type WireFormat = "openai" | "anthropic";
export const WIRE_FORMATS: WireFormat[] = ["openai", "anthropic"];

/** The real SDK client for the wire format, retried by countd's one retry layer. */
export function providerFor(format: WireFormat, server: { url: string }, attempts = 3): LLMProvider {
  const raw =
    format === "openai"
      ? new OpenAIProvider({ name: "openai", baseURL: `${server.url}/v1`, apiKey: TEST_KEYS.openai })
      : new AnthropicProvider({ baseURL: server.url, apiKey: TEST_KEYS.anthropic });
  return withRetry(raw, { attempts, baseDelayMs: 5, maxDelayMs: 200 });
}

export interface TestAgent {
  loop: AgentLoop;
  workspace: string;
  stateDir: string;
  sessions: SessionStore;
  memory: MemoryStore;
}

export async function makeAgent(
  format: WireFormat,
  server: { url: string },
  tools: ToolRegistry,
  overrides: Partial<AgentLoopOptions> & { attempts?: number } = {},
): Promise<TestAgent> {
  const root = await mkdtemp(join(tmpdir(), "countd-loop-"));
  const workspace = join(root, "workspace");
  const stateDir = join(root, "state");
  const memory = new MemoryStore(workspace);
  const sessions = new SessionStore(stateDir);
  const contextBuilder = new ContextBuilder({
    workspace,
    memory,
    skills: new SkillsLoader(workspace),
    persona: { name: "countd", personality: "gentle", locale: overrides.locale ?? "en" },
    timezone: "UTC",
  });
  const { attempts, ...rest } = overrides;
  const loop = new AgentLoop({
    provider: providerFor(format, server, attempts),
    workspace,
    tools,
    contextBuilder,
    sessions,
    memory,
    model: format === "openai" ? "gpt-4o-mini" : "claude-sonnet-5",
    retryDelayMs: 5,
    ...rest,
  });
  return { loop, workspace, stateDir, sessions, memory };
}
