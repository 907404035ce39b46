import { mkdir } from "node:fs/promises";
import { ContextBuilder } from "./agent/context.js";
import { AgentLoop, type MessageBuilder, type RecordedCalls } from "./agent/loop.js";
import { breakerFor } from "./agent/breaker.js";
import { SubagentManager } from "./agent/subagents.js";
import { AuditLog } from "./audit/log.js";
import { Redactor } from "./audit/redact.js";
import { ToolHistory } from "./audit/tool-history.js";
import { providerForPreset } from "./config/load.js";
import type { Config, ProviderConfig } from "./config/schema.js";
import type { RunSpend } from "./cost/budget.js";
import { metered, priceOf } from "./cost/metered.js";
import { Pricer, type PriceRef } from "./cost/prices.js";
import { EventBus } from "./events.js";
import type { JobOverrides } from "./jobs/types.js";
import { MemoryStore } from "./memory/store.js";
import { createProvider } from "./providers/factory.js";
import { PRESET_NAMES, PRESETS, type PresetName } from "./providers/presets.js";
import { emptyUsage, type LLMProvider, type Usage } from "./providers/types.js";
import { silentLogger, type Logger } from "./log.js";
import { SessionStore, type SessionHistory } from "./sessions/store.js";
import { redactedSessions } from "./sessions/redacted.js";
import { SkillsLoader, skillsDir } from "./skills/loader.js";
import { builtinTools, selectTools, SUBAGENT_TOOLS } from "./tools/builtin.js";
import type { Tool } from "./tools/types.js";
import { detectSandbox } from "./tools/sandbox.js";
import { spawnTool } from "./agent/spawn.js";
import type { McpManager } from "./tools/mcp/manager.js";
import { approvalGate } from "./approvals/gate.js";
import type { ApproveSettings } from "./approvals/rules.js";

export interface LoopOptions {
  /** The only tools the run may use; undefined: every enabled tool. */
  toolNames?: readonly string[];
  /** A job's provider, model and limits instead of countd.yaml's. */
  overrides?: JobOverrides;
  /** Tools only this run has, such as the heartbeat's reply tool. */
  extraTools?: Tool[];
  /** The run's spending: every call is priced into it and checked against its budgets first. */
  spend?: RunSpend;
  /** Answers in place of the model's provider: a replay's, from its journal. */
  provider?: LLMProvider;
  /** A replay's or a fork's recorded tool results (agent/loop.ts RecordedCalls). */
  recorded?: RecordedCalls;
  /** The system prompt in place of the one built from the workspace: a fork's. */
  system?: string;
  /** The tool calls that wait for a person's yes: the job's `approve:`, or countd.yaml's. */
  approve?: ApproveSettings;
}

/** Everything an agent run needs, wired from the config once: `countd ask` and the daemon share it. */
export interface Runtime {
  config: Config;
  events: EventBus;
  memory: MemoryStore;
  /** The names of every tool a run may be given now (MCP servers' lists change). */
  readonly toolNames: string[];
  /** The MCP servers, when countd.yaml names any. */
  mcp: McpManager | undefined;
  /** A loop for one run; cheap to make, so each run gets its own with its tools and overrides. */
  loop(opts?: LoopOptions): AgentLoop;
  /** Whether a run with these overrides calls a model with a known price. */
  priced(overrides?: JobOverrides): boolean;
  /** USD for a call's usage by a run with these overrides, null when its model has no price. */
  price(overrides?: JobOverrides): (usage: Usage) => number | null;
  /** For the start-up log: safety settings weaker than asked, such as exec without a sandbox. */
  warnings: string[];
  /** The config's secrets, compiled once: what every store and sender of this runtime's runs redacts. */
  redactor: Redactor;
  close(): Promise<void>;
}

/** A subagent does one delegated task: fewer iterations than its parent. */
const SUBAGENT_MAX_ITERATIONS = 15;

/**
 * `events`: a reloaded runtime keeps the bus its listeners (the watch trigger, the CLI) are on.
 * `sessions`: where runs keep their conversations, when not in the state directory's files alone (a shared backend's).
 * Resolves once every MCP server connected or failed its first attempt (each within its connect_timeout).
 */
export async function openRuntime(
  config: Config,
  env: NodeJS.ProcessEnv = process.env,
  events: EventBus = new EventBus(),
  log: Logger = silentLogger,
  sessions: SessionHistory = new SessionStore(config.paths.state),
): Promise<Runtime> {
  const { paths } = config;
  type Endpoint = { provider: LLMProvider; model: string; ref: Omit<PriceRef, "model"> };
  const refOf = (resolved: ProviderConfig): Omit<PriceRef, "model"> => ({
    preset: resolved.preset,
    ...(resolved.baseURL !== undefined ? { baseURL: resolved.baseURL } : {}),
  });
  const endpoint = (resolved: ProviderConfig): Endpoint => ({
    provider: createProvider(resolved),
    model: resolved.model,
    ref: refOf(resolved),
  });
  const providers = new Map<PresetName, Endpoint>([[config.provider.preset, endpoint(config.provider)]]);
  const presetSettings = new Map<PresetName, ProviderConfig>();
  const pricer = new Pricer(config.prices);
  await Promise.all([paths.workspace, paths.state, paths.logs].map((dir) => mkdir(dir, { recursive: true })));
  const audit = new AuditLog({ dir: paths.logs, secrets: config.secrets });
  const detach = audit.attach(events);
  const memory = new MemoryStore(paths.workspace);
  const redactor = new Redactor(config.secrets);
  const toolHistory = new ToolHistory(paths.state, redactor);
  const sandbox = config.tools.exec.enabled ? await detectSandbox(config.tools.exec.sandbox) : undefined;
  const tools = builtinTools(config, memory, sandbox);
  const subagents = new SubagentManager({ maxConcurrent: config.tools.spawn.maxConcurrent, timeoutMs: config.tools.spawn.timeoutMs });
  const shared = {
    workspace: paths.workspace,
    contextBuilder: new ContextBuilder({
      workspace: paths.workspace,
      memory,
      skills: new SkillsLoader(paths.workspace, env),
      persona: config.persona,
      timezone: config.timezone,
    }),
    sessions: redactedSessions(sessions, redactor),
    toolHistory,
    events,
    maxRetries: config.agent.maxRetries,
    retryDelayMs: config.agent.retryDelayMs,
    locale: config.persona.locale,
  };

  /** A preset's settings: its endpoint and default model, read without making its client (which needs its key). */
  function settingsFor(preset: string | undefined): ProviderConfig {
    const name = (preset ?? config.provider.preset) as PresetName;
    if (!PRESET_NAMES.includes(name)) throw new Error(`unknown provider "${preset}" (known: ${PRESET_NAMES.join(", ")})`);
    if (name === config.provider.preset) return config.provider;
    let resolved = presetSettings.get(name);
    if (!resolved) presetSettings.set(name, (resolved = providerForPreset(name, config.provider, env)));
    return resolved;
  }

  /** The provider of a preset with its default model; a job's provider override is made on first use. */
  function providerFor(preset: string | undefined): Endpoint {
    const resolved = settingsFor(preset);
    let entry = providers.get(resolved.preset);
    if (!entry) providers.set(resolved.preset, (entry = endpoint(resolved)));
    return entry;
  }

  function priced(overrides: JobOverrides = {}): boolean {
    return price(overrides)(emptyUsage()) !== null;
  }

  function price(overrides: JobOverrides = {}): (usage: Usage) => number | null {
    const resolved = settingsFor(overrides.provider);
    const ref = { ...refOf(resolved), model: overrides.model ?? resolved.model };
    return (usage) => pricer.cost(ref, usage);
  }

  function loop({ toolNames, overrides = {}, extraTools = [], spend, recorded, system, approve, ...given }: LoopOptions = {}): AgentLoop {
    const { model, ref, ...endpoint } = providerFor(overrides.provider);
    const provider = given.provider ?? endpoint.provider;
    // Known before any call ends: a run on a model with no price is unpriced from its start, never $0.
    const unpriced = !pricer.priced({ ...ref, model: overrides.model ?? model });
    if (spend && unpriced) spend.markUnpriced();
    const price = priceOf(pricer, ref);
    const settings = {
      ...shared,
      provider: metered(provider, price, spend),
      ...(spend ? { budget: spend.checker(price) } : {}),
      model: overrides.model ?? model,
      unpriced,
      temperature: overrides.temperature ?? config.provider.temperature,
      maxTokens: overrides.maxTokens ?? config.provider.maxTokens,
      breaker: breakerFor(overrides.breaker, config.agent.breaker),
      structuredOutput: PRESETS[settingsFor(overrides.provider).preset].structuredOutput,
      ...(system !== undefined ? { contextBuilder: withSystemPrompt(shared.contextBuilder, system) } : {}),
      ...(recorded ? { recorded } : {}),
      // Subagents get the gate too: a call they cannot wait for is refused, never let through.
      ...(approve ? { approvals: approvalGate(approve) } : {}),
    };
    const all = mcp ? tools.with(mcp.tools()) : tools;
    const chosen = selectTools(all, toolNames ?? [...all.names, "spawn"], config, (name) => mcp?.unlistedReason(name));
    const selected = all.subset(chosen.filter((name) => name !== "spawn"));
    // A run limited to some tools cannot reach others through a subagent: it gets those of its
    // parent's that work on files, commands, the web and MCP servers.
    if (chosen.includes("spawn")) {
      const subagent = new AgentLoop({
        ...settings,
        tools: all.subset(chosen.filter((name) => SUBAGENT_TOOLS.includes(name) || all.get(name)?.server !== undefined)),
        maxIterations: SUBAGENT_MAX_ITERATIONS,
      });
      selected.register(spawnTool(subagents, subagent));
    }
    if (extraTools.length > 0) selected.register(...extraTools);
    return new AgentLoop({
      ...settings,
      tools: selected,
      memory,
      maxIterations: overrides.maxIterations ?? config.agent.maxIterations,
      maxHistory: config.agent.maxHistory,
    });
  }

  // The MCP SDK loads only where servers are configured: most daemons have none.
  const mcp =
    config.mcpServers.length > 0
      ? new (await import("./tools/mcp/manager.js")).McpManager(config.mcpServers, {
          env,
          workspace: paths.workspace,
          log,
          stateDir: paths.state,
        })
      : undefined;
  await mcp?.start();

  return {
    config,
    events,
    memory,
    get toolNames() {
      return [...tools.names, ...(mcp?.tools().map((tool) => tool.name) ?? []), "spawn"];
    },
    mcp,
    loop,
    priced,
    price,
    redactor,
    warnings: [
      ...(sandbox?.kind === "none" ? [sandbox.warning] : sandbox?.kind === "unavailable" ? [sandbox.reason] : []),
      ...(config.tools.writableSkills
        ? [
            `tools.writable_skills is true: the agent's tools may write ${skillsDir(config.paths.workspace)}, and a skill it writes becomes a standing instruction of every later run`,
          ]
        : []),
    ],
    /** Writes what is held in memory (tool history, audit lines); one failing does not keep the other in memory. */
    async close() {
      detach();
      const closed = await Promise.allSettled([toolHistory.close(), audit.close(), mcp?.close()]);
      for (const result of closed) if (result.status === "rejected") throw result.reason;
    },
  };
}

/** A builder whose messages open with `system` in place of the system prompt it builds (a fork's). */
function withSystemPrompt(builder: ContextBuilder, system: string): MessageBuilder {
  return {
    async buildMessages(history, message, opts) {
      const messages = await builder.buildMessages(history, message, opts);
      return messages[0]?.role === "system" ? [{ role: "system", content: system }, ...messages.slice(1)] : messages;
    },
    addAssistantMessage: (messages, text, calls, reasoning) => builder.addAssistantMessage(messages, text, calls, reasoning),
    addToolResult: (messages, call, content, isError) => builder.addToolResult(messages, call, content, isError),
  };
}
