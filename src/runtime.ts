import { mkdir } from "node:fs/promises";
import { AgentLoop } from "./agent/loop.js";
import { ContextBuilder } from "./agent/context.js";
import { AuditLog } from "./audit/log.js";
import { Redactor } from "./audit/redact.js";
import { ToolHistory } from "./audit/tool-history.js";
import type { Config } from "./config/schema.js";
import { EventBus } from "./events.js";
import { MemoryStore } from "./memory/store.js";
import { createProvider } from "./providers/factory.js";
import { SessionStore } from "./sessions/store.js";
import { SkillsLoader } from "./skills/loader.js";
import { ToolRegistry } from "./tools/registry.js";

/** Everything one agent needs, wired from the config: the CLI's `ask` and the daemon share it. */
export interface Runtime {
  config: Config;
  loop: AgentLoop;
  events: EventBus;
  close(): Promise<void>;
}

export async function openRuntime(
  config: Config,
  opts: { tools?: ToolRegistry; env?: NodeJS.ProcessEnv } = {},
): Promise<Runtime> {
  const { paths } = config;
  const provider = createProvider(config.provider);
  await Promise.all([paths.workspace, paths.state, paths.logs].map((dir) => mkdir(dir, { recursive: true })));
  const events = new EventBus();
  const audit = new AuditLog({ dir: paths.logs, secrets: config.secrets });
  const detach = audit.attach(events);
  const memory = new MemoryStore(paths.workspace);
  const loop = new AgentLoop({
    provider,
    workspace: paths.workspace,
    tools: opts.tools ?? new ToolRegistry(),
    contextBuilder: new ContextBuilder({
      workspace: paths.workspace,
      memory,
      skills: new SkillsLoader(paths.workspace, opts.env),
      persona: config.persona,
      timezone: config.timezone,
    }),
    sessions: new SessionStore(paths.state),
    memory,
    toolHistory: new ToolHistory(paths.state, new Redactor(config.secrets)),
    events,
    model: config.provider.model,
    temperature: config.provider.temperature,
    maxTokens: config.provider.maxTokens,
    maxIterations: config.agent.maxIterations,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelayMs,
    maxHistory: config.agent.maxHistory,
    locale: config.persona.locale,
  });
  return {
    config,
    loop,
    events,
    async close() {
      detach();
      await audit.close();
    },
  };
}
