import { estimatedUsage, requestTokens, textTokens } from "../cost/estimate.js";
import { renderPrompt } from "../jobs/template.js";
import { nextFires } from "../jobs/schedule.js";
import { hasSeconds, triggerLabel } from "../jobs/trigger-label.js";
import { watchLabel } from "../jobs/watch-label.js";
import type { Job } from "../jobs/types.js";
import type { ChatMessage } from "../providers/types.js";
import { framedPayload } from "../runner/execute.js";
import type { Runtime } from "../runtime.js";
import { usd } from "../text.js";
import { shownTime } from "../time.js";

/** What `countd rehearse` shows of a job before anything runs. */
export interface RehearsalPreview {
  job: string;
  timezone: string;
  trigger: string;
  /** The next five fire instants (ISO), from `at`; empty for a job only a watch or a webhook fires. */
  fires: string[];
  /** What fires a job that has no schedule. */
  firesNote?: string;
  prompt: string;
  tools: Array<{ name: string; server?: string }>;
  /** Estimated (cost/estimate.ts: one token per 4 bytes of UTF-8), not a tokenizer's count. */
  tokens: { system: number; prompt: number; tools: number };
  model: string;
  /** USD; null when the model has no price. */
  price: { low: number; high: number } | null;
  limits: { maxIterations: number; maxTokens: number };
}

const FIRES = 5;

/** The answer of the cheapest run: one call that answers at once, in about a paragraph. */
const SHORT_ANSWER_TOKENS = 256;

/**
 * The preview of a run of `job` at `opts.at`: its next fires in its zone (a disabled job's too),
 * its prompt rendered as the run renders it (the watch job's `files`, the webhook's framed
 * `payload`), the tools its loop offers and the model's first request sized.
 *
 * `tokens` are estimates (cost/estimate.ts, one token per 4 bytes): `system` is the system
 * messages of the first request (countd's system prompt and the runtime facts), `prompt` the
 * rendered prompt, `tools` the tool definitions as sent.
 *
 * `price`, with R the whole first request (messages and tool definitions, estimated as above),
 * N the job's max_iterations and M its max_tokens:
 *   low  = one call: R in, min(256, M) out;
 *   high = N calls, call i (0-based) sending R + i × M (every earlier answer comes back as input)
 *          and receiving M.
 * Tool results, subagents and a shared session's history are not counted: their size is not known
 * before the run.
 */
export async function previewRehearsal(
  runtime: Runtime,
  job: Job,
  opts: { at: Date; files?: string[]; payload?: string; runId?: string; prompt?: string },
): Promise<RehearsalPreview> {
  const clock = { at: opts.at, timeZone: job.timezone };
  // A run that brings its own prompt (the heartbeat's) is shown with it.
  const prompt =
    opts.prompt ??
    renderPrompt(job.prompt, {
      clock,
      job,
      runId: opts.runId ?? "rehearsal",
      ...(opts.files ? { files: opts.files } : {}),
      ...(opts.payload !== undefined ? { payload: framedPayload(opts.payload) } : {}),
    });
  const loop = runtime.loop({ toolNames: job.tools, overrides: job.overrides });
  // The channel a job's run is given (runner/execute.ts runAgent).
  const offered = await loop.offered(prompt, { channel: "cron", clock });
  const system = offered.messages.filter((message) => message.role === "system").map(textOf);
  const limits = { maxIterations: loop.maxIterations, maxTokens: loop.maxTokens };
  const fires = job.schedule ? nextFires(job.schedule, job.timezone, opts.at, FIRES) : [];
  const note = firesNote(job, runtime.config.paths.workspace);
  return {
    job: job.name,
    timezone: job.timezone,
    trigger: triggerLabel(job, hasSeconds(fires), runtime.config.paths.workspace),
    fires: fires.map((date) => date.toISOString()),
    ...(note ? { firesNote: note } : {}),
    prompt,
    tools: offered.tools,
    tokens: {
      system: system.reduce((sum, text) => sum + textTokens(text), 0),
      prompt: textTokens(prompt),
      tools: textTokens(JSON.stringify(offered.definitions)),
    },
    model: loop.model,
    price: priceRange(runtime.price(job.overrides), requestTokens(offered.messages, offered.definitions), limits),
    limits,
  };
}

function priceRange(
  cost: ReturnType<Runtime["price"]>,
  request: number,
  { maxIterations, maxTokens }: RehearsalPreview["limits"],
): RehearsalPreview["price"] {
  const low = cost(estimatedUsage(request, Math.min(SHORT_ANSWER_TOKENS, maxTokens)));
  if (low === null) return null;
  let high = 0;
  for (let call = 0; call < maxIterations; call++) high += cost(estimatedUsage(request + call * maxTokens, maxTokens)) ?? 0;
  return { low, high };
}

function firesNote(job: Job, workspace: string): string | undefined {
  if (job.schedule) return undefined;
  const by = [
    ...(job.watch ? [`changes (${job.watch.events.join(", ")}) to ${watchLabel(job.watch.paths, workspace).slice("watch ".length)}`] : []),
    ...(job.webhook ? [`a signed POST to /hooks/${job.name}`] : []),
  ];
  return by.length > 0 ? `no schedule: fired by ${by.join(" and by ")}` : "no schedule: fired only by hand (countd run, the console)";
}

function textOf(message: ChatMessage): string {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

/** The preview as `countd rehearse` prints it before the run. */
export function formatPreview(p: RehearsalPreview): string {
  const seconds = hasSeconds(p.fires.map((fire) => new Date(fire)));
  const fires = p.fires.length > 0 ? p.fires.map((fire) => `  ${shownTime(fire, p.timezone, seconds)}`) : [`  ${p.firesNote ?? "none"}`];
  const tools = p.tools.map((tool) => `  ${tool.name}${tool.server !== undefined ? ` (MCP server ${tool.server})` : ""}`);
  const { system, prompt, tools: definitions } = p.tokens;
  const { maxIterations, maxTokens } = p.limits;
  const price = p.price
    ? `  ${usd(p.price.low)} (one call, a short answer) to ${usd(p.price.high)} (${maxIterations} calls of up to ${maxTokens} tokens out)`
    : `  unpriced: ${p.model} has no known price`;
  return [
    `Job ${p.job} (${p.trigger})`,
    `Next fires (${p.timezone}):`,
    ...fires,
    "Prompt:",
    ...p.prompt.split("\n").map((line) => `  ${line}`),
    `Tools (${p.tools.length}):`,
    ...(tools.length > 0 ? tools : ["  none"]),
    `Size (estimated tokens): system ${system}, prompt ${prompt}, tools ${definitions}, total ${system + prompt + definitions}`,
    `Price (${p.model}, estimated):`,
    price,
    "",
  ].join("\n");
}
