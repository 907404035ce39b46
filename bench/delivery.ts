/**
 * (a) Deliveries per second: 2,000 runs queued in the outbox at once and sent by the real webhook
 *     sender to a loopback receiver, from the first enqueue until the last acknowledgement is
 *     synced, beside a bare `fetch` loop posting the same payloads with the same concurrency (4);
 *     five rounds of each after a warm-up of each, interleaved, medians compared (target >= 0.8x).
 *     The outbox posts through node:http, which costs less CPU than fetch, so a bare node:http
 *     loop (kept-alive connections, same concurrency) runs in the same rounds too: the outbox
 *     against the same transport, reported beside the target.
 * (b) State write time per run (StateStore.saveRun + Outbox.enqueue) as the run history grows to
 *     100,000 runs, every run delivered so the delivered log grows with it. It must stay flat:
 *     a run record is one appended line (runs/<job>.jsonl, compacted to RUNS_KEPT_PER_JOB runs),
 *     outbox.jsonl is compacted to what is still in play.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DeliveryMessage } from "../src/delivery/message.js";
import { CONCURRENCY, Outbox } from "../src/delivery/outbox.js";
import type { WebhookTarget } from "../src/delivery/targets.js";
import { sendWebhook } from "../src/delivery/webhook.js";
import { emptyUsage } from "../src/providers/types.js";
import type { RunRecord } from "../src/store/run-record.js";
import { StateStore } from "../src/store/state.js";
import { median } from "./stats.js";

export interface DeliveryBenchResult {
  runs: number;
  deliveriesPerSecond: number;
  bareFetchPerSecond: number;
  bareHttpPerSecond: number;
  stateWriteMs: Array<{ runs: number; ms: number }>;
}

const THROUGHPUT_RUNS = 2_000;
/** Rounds of each, interleaved; the medians are compared. */
const ROUNDS = 5;
/** Each job's history holds at most RUNS_KEPT_PER_JOB runs; that bound is reached before the first sample. */
const JOBS = 5;
const SAMPLE_AT = [1_000, 10_000, 50_000, 100_000];
const SAMPLES = 25;
/** Runs added between samples per step; each step's deliveries are sent before the next. */
const STEP = 25;

const RESULT = "## Daily report\n\nAll services green. Disk usage at 61 %, up 2 points since yesterday. ".repeat(3);

function messageFor(runId: string): DeliveryMessage {
  const at = new Date().toISOString();
  return {
    kind: "run.completed",
    job: "bench",
    run: {
      id: runId,
      reason: "schedule",
      status: "ok",
      startedAt: at,
      finishedAt: at,
      durationMs: 1_000,
      usage: emptyUsage(),
      cost: 0.0042,
    },
    result: RESULT,
  };
}

function runRecord(n: number): RunRecord {
  const at = new Date().toISOString();
  const job = `job-${n % JOBS}`;
  const id = `run-${n}`;
  return {
    id,
    job,
    reason: "schedule",
    scheduledAt: at,
    startedAt: at,
    finishedAt: at,
    status: "ok",
    iterations: 3,
    toolCalls: 2,
    usage: emptyUsage(),
    resultExcerpt: RESULT.slice(0, 300),
    sessionId: `cron:${job}:${id}`,
  };
}

/** A loopback receiver that acknowledges every POST with 204, counting them. */
async function receiver(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Deliveries per second through the outbox: every delivery queued at once (as a burst of runs
 * finishing would), each state change journalled and synced, until the last acknowledgement is on disk.
 */
async function outboxRound(url: string): Promise<number> {
  const target: WebhookTarget = { kind: "webhook", url, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", format: "json", headers: {} };
  const stateDir = await mkdtemp(join(tmpdir(), "countd-bench-delivery-"));
  const outbox = await Outbox.open({
    stateDir,
    send: async (entry) => void (await sendWebhook(entry.target as WebhookTarget, entry.message, entry.id)),
  });
  try {
    outbox.start();
    const started = performance.now();
    const ids = (
      await Promise.all(
        Array.from({ length: THROUGHPUT_RUNS }, (_, i) => outbox.enqueue(`run-${i}`, [target], messageFor(`run-${i}`), stateDir)),
      )
    ).flat();
    const settled = await outbox.settled(ids);
    await outbox.close();
    const seconds = (performance.now() - started) / 1_000;
    const failed = settled.filter((s) => !s.delivered).length;
    if (failed > 0) throw new Error(`${failed} deliveries not delivered`);
    return THROUGHPUT_RUNS / seconds;
  } finally {
    await rm(stateDir, { recursive: true, force: true });
  }
}

const bareBodies = () =>
  Array.from({ length: THROUGHPUT_RUNS }, (_, i) => {
    const { kind, job, run, result } = messageFor(`run-${i}`);
    return JSON.stringify({ type: kind, job, run, result });
  });

/** The same payloads posted by a bare `fetch` loop with the outbox's concurrency: the network's limit here. */
async function bareRound(url: string): Promise<number> {
  const bodies = bareBodies();
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const i = next++;
        const response = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "webhook-id": `run-${i}` },
          body: bodies[i],
        });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        await response.arrayBuffer();
      }
    }),
  );
  return THROUGHPUT_RUNS / ((performance.now() - started) / 1_000);
}

/** The same with node:http on kept-alive connections, the outbox's own transport. */
async function bareHttpRound(url: string): Promise<number> {
  const bodies = bareBodies();
  const agent = new Agent({ keepAlive: true });
  const post = (body: string, id: string) =>
    new Promise<void>((resolve, reject) => {
      const req = request(url, {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "webhook-id": id },
      });
      req.on("error", reject);
      req.on("response", (res) => {
        if (res.statusCode! >= 300) reject(new Error(`HTTP ${res.statusCode}`));
        res.resume().on("end", resolve).on("error", reject);
      });
      req.end(body);
    });
  let next = 0;
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) {
          const i = next++;
          await post(bodies[i]!, `run-${i}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return THROUGHPUT_RUNS / ((performance.now() - started) / 1_000);
}

async function throughput(): Promise<{ outbox: number; bare: number; bareHttp: number }> {
  const { url, close } = await receiver();
  const outbox: number[] = [];
  const bare: number[] = [];
  const bareHttp: number[] = [];
  try {
    // Warm-up for each: connections, JIT.
    await bareRound(url);
    await bareHttpRound(url);
    await outboxRound(url);
    for (let round = 0; round < ROUNDS; round++) {
      bare.push(await bareRound(url));
      bareHttp.push(await bareHttpRound(url));
      outbox.push(await outboxRound(url));
    }
  } finally {
    await close();
  }
  return { outbox: median(outbox), bare: median(bare), bareHttp: median(bareHttp) };
}

async function stateWrites(): Promise<Array<{ runs: number; ms: number }>> {
  const stateDir = await mkdtemp(join(tmpdir(), "countd-bench-state-"));
  const target: WebhookTarget = { kind: "webhook", url: "https://hooks.example.com/countd", format: "json", headers: {} };
  const state = await StateStore.open(stateDir);
  const outbox = await Outbox.open({ stateDir, send: async () => {} });
  let runs = 0;
  const samples: Array<{ runs: number; ms: number }> = [];
  try {
    for (const sampleAt of SAMPLE_AT) {
      // Growth through saveRun itself, so the history files grow and get compacted as in the daemon.
      while (runs < sampleAt - SAMPLES) {
        const step = Math.min(STEP, sampleAt - SAMPLES - runs);
        const added = Array.from({ length: step }, (_, i) => runRecord(runs + i));
        await Promise.all(added.map((run) => state.saveRun(run)));
        await Promise.all(added.map((run) => outbox.enqueue(run.id, [target], messageFor(run.id), stateDir)));
        await outbox.runDue();
        runs += step;
      }
      const times: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const run = runRecord(runs++);
        const started = performance.now();
        await state.saveRun(run);
        await outbox.enqueue(run.id, [target], messageFor(run.id), stateDir);
        times.push(performance.now() - started);
        await outbox.runDue();
      }
      times.sort((a, b) => a - b);
      samples.push({ runs, ms: times[Math.floor(times.length / 2)]! });
    }
    return samples;
  } finally {
    await outbox.close();
    await state.close();
    await rm(stateDir, { recursive: true, force: true });
  }
}

export async function benchDelivery(): Promise<DeliveryBenchResult> {
  const { outbox, bare, bareHttp } = await throughput();
  const stateWriteMs = await stateWrites();
  return { runs: THROUGHPUT_RUNS, deliveriesPerSecond: outbox, bareFetchPerSecond: bare, bareHttpPerSecond: bareHttp, stateWriteMs };
}
