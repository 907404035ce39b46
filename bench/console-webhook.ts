/**
 * The webhook trigger (issue 14), against a daemon started in this process with the senders in a
 * child process (bench/webhook-senders.ts), on loopback:
 * (a) requests a second with a valid signature answered 202 (fired: the first starts a run whose
 *     LLM answer is held, the rest queue behind it and merge into one waiting run, so each pays the
 *     whole accepted path: the check, the runner's decision and the synced webhook-id), and with a
 *     bad signature answered 401, by a few concurrent keep-alive clients;
 * (b) fire lateness (a run record's startedAt minus its scheduledAt) of cron jobs firing every
 *     second, p99, quiet and while 1,000 bad-signature requests a second arrive.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { startDaemon, type Daemon } from "../src/daemon.js";
import { silentLogger } from "../src/log.js";
import type { FromSenders, ToSenders } from "./webhook-senders.js";

const SENDERS = fileURLToPath(new URL("./webhook-senders.ts", import.meta.url));
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CRON_JOBS = 4;
const CLIENTS = 8;
const THROUGHPUT_S = 5;
const LATENESS_S = 15;
const FLOOD_PER_SECOND = 1000;

export interface WebhookBenchResult {
  clients: number;
  acceptedPerSecond: number;
  refusedPerSecond: number;
  /** Answers other than the one each phase expects, by status: none when all went as meant. */
  unexpected: Record<string, number>;
  quiet: { fires: number; p99Ms: number };
  flooded: { fires: number; p99Ms: number; refusedPerSecond: number };
}

/** An OpenAI-compatible endpoint that answers at once, but holds a prompt saying HOLD until the bench ends. */
async function llm(): Promise<{ baseURL: string; close: () => void }> {
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    if (body.includes("HOLD")) return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const event = (choices: unknown[], extra = {}) =>
      res.write(`data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "bench", choices, ...extra })}\n\n`);
    event([{ index: 0, delta: { role: "assistant", content: "tock" }, finish_reason: null }]);
    event([{ index: 0, delta: {}, finish_reason: "stop" }]);
    event([], { usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } });
    res.end("data: [DONE]\n\n");
  };
  const server = createServer((req, res) => void answer(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

function senders(): {
  ask: (message: Extract<ToSenders, { type: "send" }>) => Promise<Extract<FromSenders, { type: "sent" }>>;
  stop: () => Promise<void>;
} {
  const child = spawn(process.execPath, ["--import", "tsx", SENDERS], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = once(child, "exit");
  process.once("exit", () => child.kill("SIGKILL"));
  return {
    ask: (message) =>
      new Promise((resolve, reject) => {
        child.once("message", (reply: FromSenders) =>
          reply.type === "sent" ? resolve(reply) : reject(new Error(`bench/webhook-senders: ${reply.message}`)),
        );
        child.send(message);
      }),
    stop: async () => {
      child.send({ type: "stop" } satisfies ToSenders);
      await exited;
    },
  };
}

/** p99 lateness of the cron jobs' fires scheduled in [from, to). */
async function lateness(daemon: Daemon, from: number, to: number): Promise<{ fires: number; p99Ms: number }> {
  const late: number[] = [];
  for (let i = 0; i < CRON_JOBS; i++) {
    for (const run of await daemon.state.runs(`tick-${i}`)) {
      const scheduled = Date.parse(run.scheduledAt);
      if (run.reason === "schedule" && scheduled >= from && scheduled < to) late.push(Date.parse(run.startedAt) - scheduled);
    }
  }
  late.sort((a, b) => a - b);
  return { fires: late.length, p99Ms: late[Math.min(late.length - 1, Math.floor(late.length * 0.99))] ?? Number.NaN };
}

function tally(into: Record<string, number>, statuses: Record<string, number>, expected: string): number {
  for (const [status, count] of Object.entries(statuses)) if (status !== expected) into[status] = (into[status] ?? 0) + count;
  return statuses[expected] ?? 0;
}

export async function benchConsoleWebhook(): Promise<WebhookBenchResult> {
  const home = await mkdtemp(join(tmpdir(), "countd-bench-webhook-"));
  await writeFile(
    join(home, "countd.yaml"),
    "timezone: UTC\ntools:\n  exec:\n    sandbox: none\nrunner:\n  concurrency: 8\n  shutdown_grace: 1s\njob_env: [BENCH_HOOK]\nsecrets: [BENCH_HOOK]\n",
  );
  await mkdir(join(home, "jobs"));
  for (let i = 0; i < CRON_JOBS; i++)
    await writeFile(join(home, "jobs", `tick-${i}.yaml`), 'schedule: "* * * * * *"\nprompt: tick\ntools: []\n');
  await writeFile(
    join(home, "jobs", "orders.yaml"),
    "webhook:\n  secret: ${BENCH_HOOK}\n  rate: 1000000\noverlap: queue\ntools: []\nprompt: HOLD {{payload}}\n",
  );
  const model = await llm();
  const send = senders();
  const daemon = await startDaemon({
    configFile: join(home, "countd.yaml"),
    env: {
      ...process.env,
      OPENAI_API_KEY: "sk-bench",
      OPENAI_BASE_URL: model.baseURL,
      BENCH_HOOK: SECRET,
      COUNTD_CONSOLE_LISTEN: "127.0.0.1:0",
    },
    logger: silentLogger,
  });
  try {
    const url = `${daemon.console.url!}hooks/orders`;
    const unexpected: Record<string, number> = {};
    // Warm-up: the first fires compile the runner's and the agent's paths.
    await sleep(3000);
    const quietFrom = Date.now();
    await sleep(LATENESS_S * 1000);
    const quiet = await lateness(daemon, quietFrom, Date.now() - 1000);
    const floodFrom = Date.now();
    const flood = await send.ask({
      type: "send",
      url,
      secret: SECRET,
      valid: false,
      concurrency: 64,
      seconds: LATENESS_S,
      perSecond: FLOOD_PER_SECOND,
    });
    const flooded = {
      ...(await lateness(daemon, floodFrom, Date.now() - 1000)),
      refusedPerSecond: tally(unexpected, flood.statuses, "401") / flood.seconds,
    };
    const refused = await send.ask({ type: "send", url, secret: SECRET, valid: false, concurrency: CLIENTS, seconds: THROUGHPUT_S });
    const accepted = await send.ask({ type: "send", url, secret: SECRET, valid: true, concurrency: CLIENTS, seconds: THROUGHPUT_S });
    return {
      clients: CLIENTS,
      acceptedPerSecond: tally(unexpected, accepted.statuses, "202") / accepted.seconds,
      refusedPerSecond: tally(unexpected, refused.statuses, "401") / refused.seconds,
      unexpected,
      quiet,
      flooded,
    };
  } finally {
    await send.stop();
    model.close();
    await daemon.stop();
    await rm(home, { recursive: true, force: true, maxRetries: 5 });
  }
}
