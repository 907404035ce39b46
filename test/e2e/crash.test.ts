import { seededRandom } from "../support/mutate.js";
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CONCURRENCY as OUTBOX_CONCURRENCY } from "../../src/delivery/outbox.js";
import { targetKey } from "../../src/delivery/targets.js";
import { readJournal } from "../../src/store/journal.js";
import { OUTBOX_FILE, OutboxStore, type OutboxEntry, type OutboxRecord } from "../../src/store/outbox-store.js";
import { useAimock } from "../support/aimock.js";
import { allRuns, ANY_CONSOLE_PORT, BIN, runKey, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { startWebhookReceiver, type ReceiverStep, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Scenario 2 of the fault suite: the built daemon, with two jobs firing every second and
 * deliveries held up at a slow or failing receiver, is killed with SIGKILL at a random moment and
 * started again on the same state directory, round after round. Then it drains, and every
 * completed run's deliveries must have arrived, a duplicate only ever under the same id.
 */

const FULL = process.env["COUNTD_FAULTS"] === "full";
const ROUNDS = FULL ? 20 : 4;
/** Printed with every failure: the same seed replays the same kill moments and receiver scripts. */
const SEED = Number(process.env["COUNTD_CRASH_SEED"] ?? Date.now() % 2 ** 31);
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SLOW = { timeout: 20_000, interval: 100 };

const hookTarget = (url: string) => ({ kind: "webhook" as const, url, secret: "${HOOK_SECRET}", format: "json" as const, headers: {} });
const hookYaml = (url: string) => `  - webhook:\n      url: ${url}\n      secret: \${HOOK_SECRET}\n`;
const mailYaml = '  - email:\n      to: [ops@example.com]\n      subject: "{{job.name}} {{status}}"\n';

/** One message as it reached a receiver: its id, the run it describes, and whether the receiver took it. */
interface Arrival {
  id: string;
  /** The id countd must use for this run and target. */
  expectedId: string;
  job: string;
  runId: string;
  acknowledged: boolean;
}

/** The outbox journal after a kill: every line parses as JSON but the last, which the kill may have cut short. */
async function journalParses(file: string): Promise<void> {
  const lines = (await readFile(file, "utf8").catch(() => "")).split("\n");
  const broken = lines.slice(0, -1).filter((line) => {
    try {
      JSON.parse(line);
      return false;
    } catch {
      return true;
    }
  });
  expect(broken, `${file} after a SIGKILL (seed ${SEED})`).toEqual([]);
}

/** What the files must look like after a kill: each one present parses as JSON. */
async function parsesIfPresent(file: string): Promise<boolean> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  expect(() => JSON.parse(text), `${file} after a SIGKILL (seed ${SEED})`).not.toThrow();
  return true;
}

/** Ids the outbox journal records as acknowledged; a line cut short by the kill does not count. */
async function recordedAcknowledged(stateDir: string): Promise<Set<string>> {
  const { lines } = await readJournal(join(stateDir, OUTBOX_FILE));
  const ids = new Set<string>();
  for (const line of lines) {
    if ("value" in line && (line.value as OutboxRecord).op === "delivered") ids.add((line.value as { id: string }).id);
  }
  return ids;
}

describe(`countd start killed with SIGKILL ${ROUNDS} times (seed ${SEED})`, () => {
  const mock = useAimock();
  const random = seededRandom(SEED);
  let dir: string;
  let stateDir: string;
  let hooks: WebhookReceiver;
  let smtp: SmtpPeer;
  let daemon: DaemonProcess | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-crash-"));
    stateDir = join(dir, "state");
    await mkdir(join(dir, "jobs"));
    hooks = await startWebhookReceiver({ secret: SECRET });
    smtp = await startSmtpPeer();
    await writeFile(
      join(dir, "countd.yaml"),
      `runner:\n  shutdown_grace: 1s\njob_env: [HOOK_SECRET]\ntools:\n  exec:\n    sandbox: none\nsmtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: countd@example.com\n`,
    );
  });
  afterAll(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await hooks.close();
    await smtp.close();
    await rm(dir, { recursive: true, force: true });
  });

  const env = () => ({ OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-crash-test-key", HOOK_SECRET: SECRET });

  async function writeJobs(enabled: boolean): Promise<void> {
    const head = enabled ? `schedule: "* * * * * *"\n` : "enabled: false\n";
    await writeFile(
      join(dir, "jobs", "alpha.yaml"),
      `${head}prompt: tick\ndeliver:\n${hookYaml(hooks.url)}${hookYaml(`${hooks.url}?copy=2`)}`,
    );
    await writeFile(join(dir, "jobs", "beta.yaml"), `${head}prompt: tick\ndeliver:\n${hookYaml(hooks.url)}${mailYaml}`);
  }

  /** Every webhook request and accepted mail, in arrival order per receiver. */
  function arrivals(): { hooks: Arrival[]; mails: Arrival[] } {
    const keyOf = new Map([hooks.url, `${hooks.url}?copy=2`].map((url) => [new URL(url).search, targetKey(hookTarget(url))]));
    const hookArrivals = hooks.requests.map((request): Arrival => {
      expect(request.verified, `webhook signature (seed ${SEED})`).toBe(true);
      const body = JSON.parse(request.body) as { job: string; run: { id: string } };
      const key = keyOf.get(new URL(request.url, hooks.url).search)!;
      return {
        id: String(request.headers["webhook-id"]),
        expectedId: `${body.job}.${body.run.id}.${key}`,
        job: body.job,
        runId: body.run.id,
        acknowledged: request.status !== undefined && request.status >= 200 && request.status < 300,
      };
    });
    const mailArrivals = smtp.received.map(({ mail }): Arrival => {
      const runId = String(mail.headers.get("x-countd-run"));
      const id = /^<(.+)@countd>$/.exec(mail.messageId ?? "")?.[1] ?? `not a countd Message-ID: ${mail.messageId}`;
      // One email target: its key is whatever the first mail carries, and every mail must carry the same.
      const key = /\.(email-[^.]+)$/.exec(/^<(.+)@countd>$/.exec(smtp.received[0]!.mail.messageId ?? "")?.[1] ?? "")?.[1];
      return { id, expectedId: `beta.${runId}.${key}`, job: "beta", runId, acknowledged: true };
    });
    return { hooks: hookArrivals, mails: mailArrivals };
  }

  /** The outbox's entries as its journal holds them, each also named as `expected` names it (a mail by its run alone). */
  async function pendingEntries(): Promise<Array<OutboxEntry & { as: string }>> {
    const data = await OutboxStore.read(stateDir, new Date());
    return Object.values(data.entries).map((entry) => ({
      ...entry,
      as: entry.target.kind === "email" ? `${entry.message.job}.${entry.message.run.id}.mail` : entry.id,
    }));
  }

  /** A one-off countd command in the test's directory; resolves with its exit code. */
  async function countd(args: string[]): Promise<number | null> {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { PATH: process.env["PATH"] ?? "", ...ANY_CONSOLE_PORT, ...env() },
      stdio: "ignore",
    });
    return new Promise((resolve) => child.on("exit", resolve));
  }

  /**
   * Steps that hold deliveries up: never answered (slow), and at full size also 503 (briefly failing),
   * whose 30 s retry the reduced size has no time for.
   */
  function holdUps(): ReceiverStep[] {
    const count = Math.floor(random() * (OUTBOX_CONCURRENCY + 1));
    return Array.from({ length: count }, (): ReceiverStep => (FULL && random() < 0.3 ? 503 : "hang"));
  }

  it(
    "leaves state and outbox readable, no run running after a restart, and loses no completed run's delivery",
    async () => {
      mock.onMessage("tick", { content: "tock, all quiet on the test bench" }, { latency: 60, chunkSize: 4 });
      await writeJobs(true);

      /** Per kill: how many webhook requests and mails had arrived, and the ids recorded as acknowledged. */
      const kills: Array<{ requests: number; mails: number; recorded: Set<string> }> = [];
      let leftRunning = new Set<string>();
      let interruptedSeen = 0;

      for (let round = 1; round <= ROUNDS; round++) {
        const steps = holdUps();
        hooks.script(...steps);
        const before = hooks.requests.length;
        daemon = spawnDaemon(dir, env());
        // A held-up step is used before the kill, so none is left over to hold up the final drain.
        if (steps.length > 0) await vi.waitFor(() => expect(hooks.requests.length).toBeGreaterThanOrEqual(before + steps.length), SLOW);
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * (steps.length > 0 ? 1_500 : 2_500))));
        daemon.child.kill("SIGKILL");
        await daemon.exited;
        const output = daemon.output();
        daemon = undefined;

        await parsesIfPresent(join(stateDir, "state.json"));
        await journalParses(join(stateDir, OUTBOX_FILE));
        const runs = await allRuns(stateDir);
        // markInterrupted runs before "countd started" is logged: a daemon that got that far left none of the runs before it running.
        if (output.includes("countd started")) {
          const stillRunning = runs.filter((r) => leftRunning.has(runKey(r.job, r.id)) && r.status !== "interrupted");
          expect(stillRunning, `runs the kill before round ${round} left running (seed ${SEED})`).toEqual([]);
          interruptedSeen += leftRunning.size;
          leftRunning = new Set();
        }
        for (const run of runs) if (run.status === "running") leftRunning.add(runKey(run.job, run.id));
        kills.push({ requests: hooks.requests.length, mails: smtp.received.length, recorded: await recordedAcknowledged(stateDir) });
      }

      // The jobs stop firing, so what must arrive is fixed: the deliveries of the runs completed so far.
      await writeJobs(false);
      daemon = spawnDaemon(dir, env());
      await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), SLOW);
      const runs = await allRuns(stateDir);
      expect(
        runs.filter((r) => r.status === "running"),
        `runs left running after the last restart (seed ${SEED})`,
      ).toEqual([]);
      const leftStatuses = Object.fromEntries(
        runs.filter((r) => leftRunning.has(runKey(r.job, r.id))).map((r) => [runKey(r.job, r.id), r.status]),
      );
      expect(leftStatuses, `runs the last kill left running (seed ${SEED})`).toEqual(
        Object.fromEntries([...leftRunning].map((key) => [key, "interrupted"])),
      );
      interruptedSeen += leftRunning.size;

      const completed = runs.filter((r) => r.status === "ok");
      const expected = completed.flatMap((run) =>
        run.job === "alpha"
          ? [hooks.url, `${hooks.url}?copy=2`].map((url) => `alpha.${run.id}.${targetKey(hookTarget(url))}`)
          : [`beta.${run.id}.${targetKey(hookTarget(hooks.url))}`, `beta.${run.id}.mail`],
      );
      const arrived = () => {
        const { hooks: hookArrivals, mails } = arrivals();
        return new Set([...hookArrivals.filter((a) => a.acknowledged).map((a) => a.id), ...mails.map((a) => `beta.${a.runId}.mail`)]);
      };
      // Every expected delivery arrives, or waits in the outbox for a retry that is not due yet.
      await vi.waitFor(async () => {
        const now = Date.now();
        const waiting = await pendingEntries();
        expect(
          waiting.filter((entry) => Date.parse(entry.nextAttemptAt) <= now),
          "deliveries due and not yet sent",
        ).toEqual([]);
        const taken = arrived();
        const missing = expected.filter((id) => !taken.has(id) && !waiting.some((entry) => entry.as === id));
        expect(missing, `deliveries neither arrived nor pending (seed ${SEED})`).toEqual([]);
      }, SLOW);
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      daemon = undefined;
      // A 503 after attempts cut short by kills puts the next try minutes away; what a user would do
      // instead of waiting: `countd outbox retry <id>`, with the daemon stopped.
      const deferred = await pendingEntries();
      expect(
        deferred.filter((entry) => entry.status !== "pending"),
        `deliveries given up (seed ${SEED})`,
      ).toEqual([]);
      // A retry also sends every other delivery due by then, so each is retried only while still pending.
      for (const entry of deferred) {
        if (!(await pendingEntries()).some((left) => left.id === entry.id)) continue;
        expect(await countd(["outbox", "retry", entry.id]), `countd outbox retry ${entry.id}`).toBe(0);
      }
      expect(
        expected.filter((id) => !arrived().has(id)),
        `deliveries not arrived (seed ${SEED})`,
      ).toEqual([]);
      expect(await pendingEntries(), "outbox entries left after draining").toEqual([]);

      const { hooks: hookArrivals, mails } = arrivals();
      const all = [...hookArrivals, ...mails];
      // The id is the run and target's: the same delivery never went out under two ids.
      expect(
        all.filter((a) => a.id !== a.expectedId),
        `arrivals whose id is not their run and target's (seed ${SEED})`,
      ).toEqual([]);
      // Only completed runs send answers, and an interrupted one that had queued its answer before the kill.
      const interrupted = new Set(runs.filter((r) => r.status === "interrupted").map((r) => runKey(r.job, r.id)));
      const okIds = new Set(completed.map((r) => runKey(r.job, r.id)));
      expect(all.filter((a) => !okIds.has(runKey(a.job, a.runId)) && !interrupted.has(runKey(a.job, a.runId)))).toEqual([]);

      // Which daemon's life each arrival came in: the n-th kill ends life n.
      const lifeOf = (count: (kill: (typeof kills)[number]) => number) => (index: number) =>
        kills.filter((kill) => count(kill) <= index).length;
      const lives = [
        ...hookArrivals.map((arrival, index) => ({ arrival, life: lifeOf((kill) => kill.requests)(index) })),
        ...mails.map((arrival, index) => ({ arrival, life: lifeOf((kill) => kill.mails)(index) })),
      ];
      // An id recorded as acknowledged at a kill is never sent again by a later daemon.
      kills.forEach((kill, index) => {
        const resent = lives.filter(({ arrival, life }) => life > index && kill.recorded.has(arrival.id)).map(({ arrival }) => arrival.id);
        expect(resent, `sent again after kill ${index + 1} had recorded it as acknowledged (seed ${SEED})`).toEqual([]);
      });
      // A second acknowledgement of one id is the at-least-once window: the receiver took it and the
      // kill came before countd recorded that. So never twice within one daemon's life, and after a
      // kill at most as many as the attempts that were in flight.
      const acknowledged = lives.filter(({ arrival }) => arrival.acknowledged);
      const twiceInOneLife = acknowledged.filter(({ arrival, life }, i) =>
        acknowledged.slice(0, i).some((a) => a.arrival.id === arrival.id && a.life === life),
      );
      expect(
        twiceInOneLife.map(({ arrival }) => arrival.id),
        `acknowledged twice by one daemon (seed ${SEED})`,
      ).toEqual([]);
      kills.forEach((kill, index) => {
        const unrecorded = new Set(
          acknowledged.filter(({ arrival, life }) => life === index && !kill.recorded.has(arrival.id)).map(({ arrival }) => arrival.id),
        );
        expect(unrecorded.size, `acknowledged in life ${index + 1} and not recorded at its kill (seed ${SEED})`).toBeLessThanOrEqual(
          OUTBOX_CONCURRENCY,
        );
      });
      const acknowledgedIds = acknowledged.map(({ arrival }) => arrival.id);

      const figures = {
        seed: SEED,
        rounds: ROUNDS,
        runs: runs.length,
        ok: completed.length,
        interrupted: interrupted.size,
        interruptedAtRestart: interruptedSeen,
        deliveriesExpected: expected.length,
        webhookRequests: hookArrivals.length,
        webhookAcknowledged: hookArrivals.filter((a) => a.acknowledged).length,
        mails: mails.length,
        retriedByHand: deferred.length,
        resentSameId: all.length - new Set(all.map((a) => a.id)).size,
        acknowledgedTwiceSameId: acknowledgedIds.length - new Set(acknowledgedIds).size,
      };
      console.log(`crash consistency: ${JSON.stringify(figures)}`);
      expect(completed.length).toBeGreaterThan(0);
    },
    FULL ? 600_000 : 120_000,
  );
});
