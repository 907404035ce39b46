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
import { SubagentManager } from "./agent/subagents.js";
import { builtinTools, selectTools, SUBAGENT_TOOLS } from "./tools/builtin.js";
import { detectSandbox } from "./tools/sandbox.js";
import { spawnTool } from "./tools/spawn.js";

/** Everything one agent needs, wired from the config: the CLI's `ask` and the daemon share it. */
export interface Runtime {
  config: Config;
  loop: AgentLoop;
  events: EventBus;
  /** For the start-up log: safety settings that are weaker than asked, such as exec without a sandbox. */
  warnings: string[];
  close(): Promise<void>;
}

/** A subagent gets fewer iterations than its parent: it does one delegated task. */
const SUBAGENT_MAX_ITERATIONS = 15;

export async function openRuntime(
  config: Config,
  opts: { toolNames?: readonly string[]; env?: NodeJS.ProcessEnv } = {},
): Promise<Runtime> {
  const { paths } = config;
  const provider = createProvider(config.provider);
  await Promise.all([paths.workspace, paths.state, paths.logs].map((dir) => mkdir(dir, { recursive: true })));
  const events = new EventBus();
  const audit = new AuditLog({ dir: paths.logs, secrets: config.secrets });
  const detach = audit.attach(events);
  const memory = new MemoryStore(paths.workspace);
  const shared = {
    provider,
    workspace: paths.workspace,
    contextBuilder: new ContextBuilder({
      workspace: paths.workspace,
      memory,
      skills: new SkillsLoader(paths.workspace, opts.env),
      persona: config.persona,
      timezone: config.timezone,
    }),
    sessions: new SessionStore(paths.state),
    toolHistory: new ToolHistory(paths.state, new Redactor(config.secrets)),
    events,
    model: config.provider.model,
    temperature: config.provider.temperature,
    maxTokens: config.provider.maxTokens,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelayMs,
    locale: config.persona.locale,
  };

  const tools = builtinTools(config, memory);
  // A run limited to some tools cannot reach others through a subagent.
  const wanted = opts.toolNames ?? [...tools.names, "spawn"];
  const subagents = new SubagentManager({
    loop: new AgentLoop({
      ...shared,
      tools: tools.subset(SUBAGENT_TOOLS.filter((name) => wanted.includes(name) && tools.get(name))),
      maxIterations: SUBAGENT_MAX_ITERATIONS,
    }),
    maxConcurrent: config.tools.spawn.maxConcurrent,
    timeoutMs: config.tools.spawn.timeoutMs,
  });
  tools.register(spawnTool(subagents));
  const selected = selectTools(tools, opts.toolNames, config);

  const loop = new AgentLoop({
    ...shared,
    tools: selected,
    memory,
    maxIterations: config.agent.maxIterations,
    maxHistory: config.agent.maxHistory,
  });
  const sandbox = selected.get("exec") ? await detectSandbox(config.tools.exec.sandbox) : undefined;
  return {
    config,
    loop,
    events,
    warnings: sandbox?.warning ? [sandbox.warning] : [],
    async close() {
      detach();
      await audit.close();
    },
  };
}
