import type * as OpenAISdk from "openai";
import type OpenAI from "openai";
import { httpError, LLMError } from "./errors.js";
import { toWireMessages } from "./openai-messages.js";
import { ChunkAssembler, type WireChunk } from "./openai-stream.js";
import type { ChatMessage, ChatOptions, LLMProvider, StreamEvent, ToolDefinition } from "./types.js";
import { errorText } from "../text.js";

export interface OpenAIProviderOptions {
  /** Preset or kind name, for logs and error messages: "openai", "deepseek", "ollama", … */
  name: string;
  baseURL: string;
  apiKey: string;
  /** How long to wait for the response to begin; the SDK's default is 10 minutes. */
  timeoutMs?: number;
}

type Sdk = typeof OpenAISdk;

/** Any OpenAI-compatible `/chat/completions` endpoint, streamed through the official client. */
export class OpenAIProvider implements LLMProvider {
  readonly name: string;
  private readonly baseURL: string;
  private readonly options: OpenAIProviderOptions;
  /** The SDK takes some 60 ms to load, so the first request loads it rather than start-up. */
  private connection: Promise<{ sdk: Sdk; client: OpenAI }> | undefined;

  constructor(options: OpenAIProviderOptions) {
    this.name = options.name;
    this.baseURL = options.baseURL;
    this.options = options;
  }

  private connect(): Promise<{ sdk: Sdk; client: OpenAI }> {
    this.connection ??= import("openai").then((sdk) => {
      const { baseURL, apiKey, timeoutMs } = this.options;
      const client = new sdk.default({
        baseURL,
        apiKey,
        ...(timeoutMs !== undefined ? { timeout: timeoutMs } : {}),
        // retry.ts is the only retry layer: N attempts there must mean N HTTP requests.
        maxRetries: 0,
        // Every failure reaches the caller as an LLMError; the SDK's console output would bypass the daemon's log.
        logLevel: "off",
      });
      return { sdk, client };
    });
    return this.connection;
  }

  async *chatStream(messages: ChatMessage[], tools: ToolDefinition[], options: ChatOptions): AsyncIterable<StreamEvent> {
    const { signal } = options;
    const where = `${this.name} at ${this.baseURL}, model ${options.model}`;
    const assembler = new ChunkAssembler(where);
    let chunks = 0;
    let answered: { status: number; contentType: string | null } | undefined;
    const { sdk, client } = await this.connect();
    const request = requestSignal(signal);
    try {
      const created = client.chat.completions.create(
        {
          model: options.model,
          messages: toWireMessages(messages),
          // Some compatible servers reject an empty tools array.
          ...(tools.length > 0 ? { tools } : {}),
          temperature: options.temperature,
          max_tokens: options.maxTokens,
          stream: true,
          stream_options: { include_usage: true },
          // Not strict: strict mode refuses most schemas users write (optional properties, formats); countd validates the answer itself.
          ...(options.answer
            ? {
                response_format: {
                  type: "json_schema" as const,
                  json_schema: { name: options.answer.name, schema: options.answer.schema, strict: false },
                },
              }
            : {}),
        },
        { signal: request.signal },
      );
      const { data: stream, response } = await created.withResponse();
      answered = { status: response.status, contentType: response.headers.get("content-type") };
      for await (const chunk of stream) {
        chunks++;
        yield* assembler.accept(chunk as WireChunk);
      }
    } catch (err) {
      throw toLLMError(sdk, err, signal, where);
    } finally {
      request.release();
    }
    // The SDK ends the iteration quietly when the request is aborted mid-stream.
    if (signal?.aborted) throw cancelled(where);
    // The SDK reads any body as SSE, so a JSON or HTML page (a wrong base_url, a proxy's error
    // page, garbage) comes out as an empty stream; name what came instead.
    if (chunks === 0 && answered && !answered.contentType?.includes("text/event-stream")) {
      const what = answered.contentType ?? "no content type";
      throw new LLMError("stream", `the server answered ${answered.status} with ${what}, not an event stream (${where})`);
    }
    yield* assembler.end();
  }
}

/**
 * A signal of its own for one request, aborted with `run`. The SDK adds an abort listener to the
 * signal it is given and never removes it, so the run's signal, shared by all of a run's requests,
 * would collect one per request (a leak, and a MaxListenersExceededWarning from the 11th on).
 * `release` removes the one listener this puts on the run's signal once the request is done.
 */
function requestSignal(run: AbortSignal | undefined): { signal: AbortSignal | undefined; release: () => void } {
  if (!run) return { signal: undefined, release: () => {} };
  const controller = new AbortController();
  const abort = () => controller.abort(run.reason);
  if (run.aborted) abort();
  else run.addEventListener("abort", abort, { once: true });
  return { signal: controller.signal, release: () => run.removeEventListener("abort", abort) };
}

function toLLMError(sdk: Sdk, err: unknown, signal: AbortSignal | undefined, where: string): LLMError {
  if (err instanceof LLMError) return err;
  if (signal?.aborted || err instanceof sdk.APIUserAbortError) return cancelled(where, err);
  if (err instanceof sdk.APIConnectionError) return new LLMError("connection", `${describe(err)} (${where})`, { cause: err });
  if (err instanceof sdk.APIError && err.status !== undefined) {
    return httpError(err.status, `${serverMessage(err)} (${where})`, err.headers, err);
  }
  // Anything else broke the stream after the response began: a dropped connection, a malformed
  // chunk, an error event the server sent instead of a chunk.
  return new LLMError("stream", `the stream broke: ${describe(err)} (${where})`, { cause: err });
}

function cancelled(where: string, cause?: unknown): LLMError {
  return new LLMError("cancelled", `cancelled (${where})`, { cause });
}

/** The server's own words, without the status the SDK puts in front of them. */
function serverMessage(err: OpenAISdk.APIError): string {
  const body = err.error as { message?: unknown } | undefined;
  return typeof body?.message === "string" ? body.message : err.message;
}

/** The error's message with those of its causes: "Connection error.: fetch failed: connect ECONNREFUSED …". */
function describe(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  // Bounded, as nothing stops a cause chain from looping.
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    const message = errorText(current);
    if (message !== "" && !parts.includes(message)) parts.push(message);
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}
