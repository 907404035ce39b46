/**
 * A scripted LLM server on loopback that speaks both wire formats countd uses, OpenAI's
 * `/v1/chat/completions` and Anthropic's `/v1/messages` (streamed, as the official SDKs read
 * them), and reports usage the way a provider with a prompt cache does:
 *
 * - OpenAI: every request is cut into prefixes at message boundaries, the first being the model,
 *   the tools and the first message (countd's system prompt) together. A prefix that an earlier
 *   request had byte for byte is cached; the longest such prefix, in tokens (bytes / 4, rounded
 *   down), rounded down to 128-token blocks, is `prompt_tokens_details.cached_tokens`.
 * - Anthropic: a prefix ends at each block carrying `cache_control` (tools, then system blocks,
 *   then messages). The longest breakpoint prefix written by an earlier request is read
 *   (`cache_read_input_tokens`); the part up to the last breakpoint not read is written
 *   (`cache_creation_input_tokens`); `input_tokens` is the rest. Anthropic counts exactly, no blocks.
 *
 * So a request whose system prompt differs in one byte from every earlier one gets nothing
 * cached. There is no minimum cacheable length (real providers want 1,024 tokens or more).
 * A reply may instead fix the usage it reports (for tests that price exact figures).
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import { closeServer, listenLoopback } from "./loopback.js";

export type LlmFormat = "openai" | "anthropic";

/** Usage as countd reads it: `input` counts every input token, cached and cache-written ones included. */
export interface ReportedUsage {
  input: number;
  output: number;
  cached: number;
  cacheWrite: number;
}

export interface LlmTurn {
  text?: string;
  toolCalls?: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** Reported instead of what the cache simulation counts (cached and cacheWrite default to 0). */
  usage?: Partial<ReportedUsage> & { input: number; output: number };
}

export interface LlmRequest {
  format: LlmFormat;
  /** Its position among all requests, from 0. */
  index: number;
  model: string;
  body: Record<string, unknown>;
  /** What the response reported. */
  usage: ReportedUsage;
}

export interface CachingLlm {
  /** `http://127.0.0.1:<port>`: ANTHROPIC_BASE_URL as it is, OPENAI_BASE_URL with `/v1`. */
  url: string;
  requests: LlmRequest[];
  /** How the next requests are answered; by default with the text "done". */
  answer(script: (request: Omit<LlmRequest, "usage">) => LlmTurn): void;
  /** Forgets every prefix seen: the cache expired. */
  clearCache(): void;
  close(): Promise<void>;
}

/** Tokens as providers roughly count them: a token per 4 bytes. */
export const tokensOfBytes = (bytes: number): number => Math.floor(bytes / 4);
/** OpenAI caches in blocks of 128 tokens. */
export const CACHE_BLOCK = 128;

export async function startCachingLlm(): Promise<CachingLlm> {
  const requests: LlmRequest[] = [];
  const seen = { openai: new Set<string>(), anthropic: new Set<string>() };
  let script: (request: Omit<LlmRequest, "usage">) => LlmTurn = () => ({ text: "done" });

  const server = createServer(async (req, res) => {
    const format: LlmFormat | undefined =
      req.method === "POST" && req.url === "/v1/chat/completions"
        ? "openai"
        : req.method === "POST" && req.url === "/v1/messages"
          ? "anthropic"
          : undefined;
    const raw = await readBody(req);
    if (!format) {
      res
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: `no route for ${req.method} ${req.url}` } }));
      return;
    }
    const body = JSON.parse(raw) as Record<string, unknown>;
    const request = { format, index: requests.length, model: String(body.model), body };
    const turn = script(request);
    const usage = turn.usage
      ? { cached: 0, cacheWrite: 0, ...turn.usage }
      : format === "openai"
        ? openaiCache(body, seen.openai, turn)
        : anthropicCache(body, seen.anthropic, turn);
    requests.push({ ...request, usage });
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.end((format === "openai" ? openaiEvents(request.model, turn, usage) : anthropicEvents(request.model, turn, usage)).join(""));
  });
  const port = await listenLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answer: (next) => (script = next),
    clearCache: () => {
      seen.openai.clear();
      seen.anthropic.clear();
    },
    close: () => closeServer(server),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}

const hash = (text: string) => createHash("sha256").update(text).digest("hex");
const bytes = (text: string) => Buffer.byteLength(text, "utf8");

function outputTokens(turn: LlmTurn): number {
  const written = (turn.text ?? "") + (turn.toolCalls ?? []).map((call) => call.name + JSON.stringify(call.arguments)).join("");
  return Math.max(1, Math.ceil(bytes(written) / 4));
}

/** Cumulative serialised prefixes at the given cut points, as [bytes, hash]. */
function prefixes(parts: string[], cuts: number[]): Array<{ bytes: number; key: string }> {
  const out: Array<{ bytes: number; key: string }> = [];
  let text = "";
  parts.forEach((part, i) => {
    text += part;
    if (cuts.includes(i)) out.push({ bytes: bytes(text), key: hash(text) });
  });
  return out;
}

function openaiCache(body: Record<string, unknown>, seen: Set<string>, turn: LlmTurn): ReportedUsage {
  const messages = (body.messages as unknown[]) ?? [];
  const head = JSON.stringify({ model: body.model, tools: body.tools ?? [] });
  const parts = [head + JSON.stringify(messages[0] ?? null), ...messages.slice(1).map((m) => JSON.stringify(m))];
  const all = prefixes(
    parts,
    parts.map((_, i) => i),
  );
  const input = Math.ceil(all.at(-1)!.bytes / 4);
  let hit = 0;
  for (const prefix of all) if (seen.has(prefix.key)) hit = prefix.bytes;
  for (const prefix of all) seen.add(prefix.key);
  const cached = Math.floor(tokensOfBytes(hit) / CACHE_BLOCK) * CACHE_BLOCK;
  return { input, output: outputTokens(turn), cached: Math.min(cached, input), cacheWrite: 0 };
}

type Block = { cache_control?: unknown } & Record<string, unknown>;

function anthropicCache(body: Record<string, unknown>, seen: Set<string>, turn: LlmTurn): ReportedUsage {
  // Anthropic's order: tools, system, messages; each block is a place a breakpoint may be.
  const blocks: Block[] = [
    ...((body.tools as Block[] | undefined) ?? []),
    ...(typeof body.system === "string" ? [{ type: "text", text: body.system }] : ((body.system as Block[] | undefined) ?? [])),
    ...((body.messages as Array<{ role: string; content: string | Block[] }> | undefined) ?? []).flatMap((m) =>
      typeof m.content === "string"
        ? [{ role: m.role, type: "text", text: m.content }]
        : m.content.map((block) => ({ role: m.role, ...block })),
    ),
  ];
  const parts = [JSON.stringify({ model: body.model }), ...blocks.map((block) => JSON.stringify(block))];
  const cuts = blocks.flatMap((block, i) => (block.cache_control ? [i + 1] : []));
  const breakpoints = prefixes(parts, cuts);
  const total = Math.ceil(prefixes(parts, [parts.length - 1])[0]!.bytes / 4);
  let read = 0;
  for (const prefix of breakpoints) if (seen.has(prefix.key)) read = tokensOfBytes(prefix.bytes);
  const last = breakpoints.at(-1);
  const write = last && !seen.has(last.key) ? tokensOfBytes(last.bytes) - read : 0;
  for (const prefix of breakpoints) seen.add(prefix.key);
  return { input: total, output: outputTokens(turn), cached: read, cacheWrite: write };
}

const sse = (payload: unknown, event?: string) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(payload)}\n\n`;

/** Splits text into a few deltas, as a real stream does. */
const pieces = (text: string) => text.match(/.{1,12}/gsu) ?? [];

function openaiEvents(model: string, turn: LlmTurn, usage: ReportedUsage): string[] {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    sse({
      id: "chatcmpl-cache",
      object: "chat.completion.chunk",
      created: 0,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  const calls = turn.toolCalls ?? [];
  return [
    chunk({ role: "assistant", content: "" }),
    ...pieces(turn.text ?? "").map((content) => chunk({ content })),
    ...calls.map((call, index) =>
      chunk({
        tool_calls: [
          { index, id: `call_${index}`, type: "function", function: { name: call.name, arguments: JSON.stringify(call.arguments) } },
        ],
      }),
    ),
    chunk({}, calls.length > 0 ? "tool_calls" : "stop"),
    sse({
      id: "chatcmpl-cache",
      object: "chat.completion.chunk",
      created: 0,
      model,
      choices: [],
      usage: {
        prompt_tokens: usage.input,
        completion_tokens: usage.output,
        total_tokens: usage.input + usage.output,
        prompt_tokens_details: { cached_tokens: usage.cached, ...(usage.cacheWrite > 0 ? { cache_write_tokens: usage.cacheWrite } : {}) },
      },
    }),
    "data: [DONE]\n\n",
  ];
}

function anthropicEvents(model: string, turn: LlmTurn, usage: ReportedUsage): string[] {
  const event = (payload: { type: string } & Record<string, unknown>) => sse(payload, payload.type);
  const blocks: string[] = [];
  let index = 0;
  if (turn.text) {
    blocks.push(
      event({ type: "content_block_start", index, content_block: { type: "text", text: "" } }),
      ...pieces(turn.text).map((text) => event({ type: "content_block_delta", index, delta: { type: "text_delta", text } })),
      event({ type: "content_block_stop", index }),
    );
    index++;
  }
  for (const call of turn.toolCalls ?? []) {
    blocks.push(
      event({ type: "content_block_start", index, content_block: { type: "tool_use", id: `toolu_${index}`, name: call.name, input: {} } }),
      event({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(call.arguments) } }),
      event({ type: "content_block_stop", index }),
    );
    index++;
  }
  return [
    event({
      type: "message_start",
      message: {
        id: "msg_cache",
        type: "message",
        role: "assistant",
        content: [],
        model,
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: usage.input - usage.cached - usage.cacheWrite,
          cache_read_input_tokens: usage.cached,
          cache_creation_input_tokens: usage.cacheWrite,
          output_tokens: 1,
        },
      },
    }),
    ...blocks,
    event({
      type: "message_delta",
      delta: { stop_reason: (turn.toolCalls ?? []).length > 0 ? "tool_use" : "end_turn", stop_sequence: null },
      usage: { output_tokens: usage.output },
    }),
    event({ type: "message_stop" }),
  ];
}

/**
 * The tokens of a request's first cacheable prefix, as this server counts them: for OpenAI the
 * model, tools and first message (the system prompt), in 128-token blocks; for Anthropic the
 * tools and system blocks up to the first `cache_control` breakpoint. What a second identical
 * run must at least find cached.
 */
export function firstPrefixTokens(format: LlmFormat, body: Record<string, unknown>): number {
  if (format === "openai") {
    const messages = (body.messages as unknown[]) ?? [];
    const text = JSON.stringify({ model: body.model, tools: body.tools ?? [] }) + JSON.stringify(messages[0] ?? null);
    return Math.floor(tokensOfBytes(bytes(text)) / CACHE_BLOCK) * CACHE_BLOCK;
  }
  const blocks: Block[] = [
    ...((body.tools as Block[] | undefined) ?? []),
    ...(typeof body.system === "string" ? [{ type: "text", text: body.system }] : ((body.system as Block[] | undefined) ?? [])),
  ];
  const first = blocks.findIndex((block) => block.cache_control);
  if (first < 0) return 0;
  const parts = [JSON.stringify({ model: body.model }), ...blocks.slice(0, first + 1).map((block) => JSON.stringify(block))];
  return tokensOfBytes(bytes(parts.join("")));
}
