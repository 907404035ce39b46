/**
 * The world outside the daemon for bench/console (a), in a process of its own so that neither
 * costs the daemon's event loop: an LLM on loopback streaming numbered chunks at a steady pace,
 * and the WebSocket clients that read them from the console. Each client notes, for every chunk
 * number it reads, process.hrtime: CLOCK_MONOTONIC, one clock for every process on the machine,
 * so the parent can set it against the time it saw the chunk on the daemon's event bus.
 * Steered by the parent over IPC (see ToClients and FromClients).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { WebSocket } from "ws";

export interface ClientsOptions {
  chunksPerAnswer: number;
  chunkEveryMs: number;
}

export type ToClients =
  /** Open or close clients until `count` are connected, each having read the `live` marker. */
  | { type: "clients"; url: string; token: string; count: number }
  /** Once every client has read `runs` run_finished messages since the last collect: what each read. */
  | { type: "collect"; runs: number }
  | { type: "stop" };

export type FromClients =
  | { type: "ready"; baseURL: string }
  | { type: "clients"; count: number }
  /** Per client, [chunk number, hrtime in ms, chunk number, hrtime in ms, …]. */
  | { type: "receipts"; receipts: number[][] }
  | { type: "error"; message: string };

/** A chunk's number is written into its text, as the model's words would be: the console passes it on untouched. */
export const chunkText = (seq: number) => `[${seq}] `;
export const CHUNK_NUMBER = /\[(\d+)\]/g;

export const hrtimeMs = () => Number(process.hrtime.bigint()) / 1e6;

interface Client {
  socket: WebSocket;
  receipts: number[];
  finished: number;
}

const COLLECT_TIMEOUT_MS = 30_000;

function send(message: FromClients): void {
  process.send!(message);
}

async function main(options: ClientsOptions): Promise<void> {
  let seq = 0;
  const llm = createServer((req, res) => void answer(req, res));
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    for await (const _ of req);
    res.writeHead(200, { "content-type": "text/event-stream" });
    const event = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      res.write(
        `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: "bench", choices, ...extra })}\n\n`,
      );
    for (let i = 0; i < options.chunksPerAnswer; i++) {
      event([{ index: 0, delta: { ...(i === 0 ? { role: "assistant" } : {}), content: chunkText(seq++) }, finish_reason: null }]);
      await sleep(options.chunkEveryMs);
    }
    event([{ index: 0, delta: {}, finish_reason: "stop" }]);
    event([], { usage: { prompt_tokens: 50, completion_tokens: options.chunksPerAnswer, total_tokens: 50 + options.chunksPerAnswer } });
    res.end("data: [DONE]\n\n");
  };
  await new Promise<void>((resolve) => llm.listen(0, "127.0.0.1", resolve));
  send({ type: "ready", baseURL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1` });

  const clients: Client[] = [];
  const connect = (url: string, token: string) =>
    new Promise<Client>((resolve, reject) => {
      const socket = new WebSocket(`${url.replace(/^http/, "ws")}api/ws`, { headers: { authorization: `Bearer ${token}` } });
      const client: Client = { socket, receipts: [], finished: 0 };
      socket.on("message", (data) => {
        const at = hrtimeMs();
        const message = JSON.parse(data.toString()) as { type: string; content?: string };
        if (message.type === "stream") for (const [, n] of message.content!.matchAll(CHUNK_NUMBER)) client.receipts.push(Number(n), at);
        else if (message.type === "run_finished") client.finished++;
        else if (message.type === "live") resolve(client);
      });
      socket.once("error", reject);
      socket.once("close", (code, reason) => reject(new Error(`the console closed a client's WebSocket: ${code} ${reason.toString()}`)));
    });

  process.on("message", (message: ToClients) => {
    void (async () => {
      if (message.type === "clients") {
        while (clients.length > message.count) clients.pop()!.socket.terminate();
        const more = await Promise.all(Array.from({ length: message.count - clients.length }, () => connect(message.url, message.token)));
        clients.push(...more);
        send({ type: "clients", count: clients.length });
      } else if (message.type === "collect") {
        const deadline = Date.now() + COLLECT_TIMEOUT_MS;
        while (clients.some((client) => client.finished < message.runs)) {
          if (Date.now() > deadline)
            throw new Error(`not every client read ${message.runs} run_finished messages within ${COLLECT_TIMEOUT_MS / 1000} s`);
          await sleep(10);
        }
        send({ type: "receipts", receipts: clients.map((client) => client.receipts) });
        for (const client of clients) {
          client.receipts = [];
          client.finished = 0;
        }
      } else {
        for (const client of clients) client.socket.terminate();
        llm.closeAllConnections();
        llm.close();
        process.disconnect();
      }
    })().catch((err: unknown) => send({ type: "error", message: err instanceof Error ? err.message : String(err) }));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) await main(JSON.parse(process.argv[2]!) as ClientsOptions);
