/**
 * A loopback OpenAI-compatible `/v1/chat/completions` server whose streamed answers the test writes
 * piece by piece: each request is held open until the test takes it and sends its chunks, so a
 * test can look at what a client shows after each chunk, and at a request still open (to cancel
 * it), without guessing how long anything takes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { closeServer, listenLoopback } from "./loopback.js";

export interface HeldRequest {
  /** The request's JSON body: model, messages, tools. */
  body: { messages: Array<{ role: string; content?: unknown }> } & Record<string, unknown>;
  /** Sends one chunk of answer text, resolving once it is written to the socket. */
  text(content: string): Promise<void>;
  /** Sends one tool call (arguments as JSON text) and ends the answer with finish_reason tool_calls. */
  toolCall(id: string, name: string, args: unknown): Promise<void>;
  /** Ends the answer: finish reason, usage and [DONE]. */
  end(usage?: { prompt_tokens: number; completion_tokens: number }): Promise<void>;
  /** Resolves when the client hung up before the answer ended (a cancelled run). */
  hungUp: Promise<void>;
}

export interface HeldLlm {
  /** Base URL for the OpenAI client, ending in `/v1`. */
  baseURL: string;
  /** The next request (oldest first) whose user message contains `prompt`, waiting for it if none has come yet. */
  take(prompt: string): Promise<HeldRequest>;
  close(): Promise<void>;
}

const USAGE = { prompt_tokens: 120, completion_tokens: 30 };

export async function startHeldLlm(): Promise<HeldLlm> {
  const waiting: HeldRequest[] = [];
  const takers: Array<{ prompt: string; resolve: (request: HeldRequest) => void }> = [];
  const matches = (request: HeldRequest, prompt: string) =>
    request.body.messages.some((message) => message.role === "user" && JSON.stringify(message.content).includes(prompt));

  const server = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as HeldRequest["body"];
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    const request = held(body, res);
    const taker = takers.find((t) => matches(request, t.prompt));
    if (taker) {
      takers.splice(takers.indexOf(taker), 1);
      taker.resolve(request);
    } else waiting.push(request);
  });
  const port = await listenLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    take: (prompt) => {
      const found = waiting.find((request) => matches(request, prompt));
      if (found) {
        waiting.splice(waiting.indexOf(found), 1);
        return Promise.resolve(found);
      }
      return new Promise((resolve) => takers.push({ prompt, resolve }));
    },
    close: () => closeServer(server),
  };
}

function held(body: HeldRequest["body"], res: ServerResponse): HeldRequest {
  let ended = false;
  const hungUp = new Promise<void>((resolve) => res.on("close", () => !ended && resolve()));
  const send = (payload: unknown) =>
    new Promise<void>((resolve, reject) => res.write(`data: ${JSON.stringify(payload)}\n\n`, (err) => (err ? reject(err) : resolve())));
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    send({
      id: "chatcmpl-held",
      object: "chat.completion.chunk",
      created: 0,
      model: "held-model",
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  const finish = async (reason: string, usage = USAGE) => {
    await chunk({}, reason);
    await send({
      id: "chatcmpl-held",
      object: "chat.completion.chunk",
      created: 0,
      model: "held-model",
      choices: [],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    });
    ended = true;
    await new Promise<void>((resolve) => res.end("data: [DONE]\n\n", resolve));
  };
  return {
    body,
    text: (content) => chunk({ content }),
    toolCall: async (id, name, args) => {
      await chunk({ tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: JSON.stringify(args) } }] });
      await finish("tool_calls");
    },
    end: (usage) => finish("stop", usage),
    hungUp,
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString("utf8");
}
