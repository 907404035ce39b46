import { Redactor } from "../audit/redact.js";
import type { EventBus } from "../events.js";
import type { Config } from "../config/schema.js";
import type { ToolCallReport } from "../agent/loop.js";
import { silentLogger, type Logger } from "../log.js";
import type { Job } from "../jobs/types.js";
import type { RunRecord } from "../store/run-record.js";
import type { RunOutcome } from "../agent/outcome.js";
import { KeyedQueue } from "../store/keyed-queue.js";
import { DEFAULT_FAILURE_REPEAT_MS, failed, memoryStreaks, type StreakStore } from "./alerts.js";
import { createMailer, type Mailer } from "./email.js";
import type { ApprovalRequest, DeliveryMessage, ToolCallSummary } from "./message.js";
import type { DeliveryOutbox, SendFn } from "./delivery-outbox.js";
import { deliveryId } from "./outbox.js";
import { resolveTarget } from "./secrets.js";
import { redactedSend } from "./redacted-send.js";
import type { DeliveryTarget } from "./targets.js";
import { sendWebhook } from "./webhook.js";
import type { OutboxEntry } from "../store/outbox-store.js";
import { comparedHash, memoryLastDelivered, unchangedSince, type LastDeliveredStore } from "./changed.js";

/** One message queued for some targets: the delivery ids and the message they carry, as stored. */
export interface QueuedDelivery {
  ids: string[];
  message: DeliveryMessage;
  /** The target of each id, in order, as the job file had it: a replay renders the original with it. */
  targets: DeliveryTarget[];
}

/** What a run's end queued, and why its answer was not delivered when a rule held it back (deliver_when: changed). */
export interface Dispatched {
  queued: QueuedDelivery[];
  /** Shown with the run, e.g. "unchanged since run 20261204T090000Z-ab12". */
  notDelivered?: string;
}

/** Tool calls a failure message shows, so its reader sees where the run stopped. */
const LAST_TOOL_CALLS = 5;

/** How the outbox sends one entry: `${VAR}` references in the target are filled in only now. */
export function sendEntry(mailer: Mailer, env: NodeJS.ProcessEnv): (entry: Readonly<OutboxEntry>) => Promise<void> {
  return async (entry) => {
    const target = resolveTarget(entry.target, env);
    if (target.kind === "email") await mailer.send(target, entry.message, entry.id, entry.workspace);
    else await sendWebhook(target, entry.message, entry.id);
  };
}

/** An answer that is empty or exactly NO_REPLY says there is nothing to report. */
export function isEmptyAnswer(answer: string): boolean {
  const text = answer.trim();
  return text === "" || text === "NO_REPLY";
}

/**
 * Decides what a finished run sends where: the answer to `deliver` (unless `deliver_when:
 * non_empty` and there is nothing to say, or `changed` and it is not new: changed.ts), a failure to `on_failure` once no retry follows. A
 * job that keeps failing reports its first failure, then at most one "still failing" per
 * `on_failure_repeat`, and one "recovered" with its next success (alerts.ts; the streak is kept
 * in `streaks`). The runner hands each run's outcome (answer, tool calls) with its final record.
 */
export class RunDispatcher {
  /** One job's outcomes in turn: two runs ending at once must not both read the same streak. */
  private readonly perJob = new KeyedQueue();
  private readonly log: Logger;

  constructor(
    private readonly outbox: DeliveryOutbox,
    private readonly workspace: () => string,
    private readonly streaks: StreakStore = memoryStreaks(),
    log: Logger = silentLogger,
    /** The console's address (`http://host:port/`) while the daemon serves one: a failure alert links the run's page. */
    private readonly consoleUrl: () => string | undefined = () => undefined,
    /** The secrets no message may carry (the runtime's, which a reload replaces). */
    private readonly redactor: () => Redactor = () => new Redactor([]),
    /** Each job's last delivered answer, which `deliver_when: changed` compares with. */
    private readonly lastDelivered: LastDeliveredStore = memoryLastDelivered(),
  ) {
    this.log = log.child({ component: "dispatch" });
  }

  /** Queues what a run's end sends; resolves with what was queued (its journal keeps it, a replay compares with it). */
  async finished(
    job: Job,
    run: RunRecord,
    outcome: Pick<RunOutcome, "answer" | "calls" | "output" | "failedChecks">,
    willRetry: boolean,
  ): Promise<Dispatched> {
    // A waiting run has not ended: it reports when it goes on after the answer (ask() asked for it).
    if (willRetry || run.status === "waiting") return { queued: [] };
    const { answer, failedChecks: failed } = outcome;
    if (run.status === "ok") {
      const recovery = await this.recovered(job, run);
      if (job.deliverWhen === "non_empty" && isEmptyAnswer(answer)) return { queued: recovery };
      const msg = jobMessage("run.completed", job, run, answer);
      if (outcome.output !== undefined) msg.output = outcome.output;
      // Checks that failed under on_verify_fail hold or deliver_flagged (runner/verify.ts).
      const flagged = failed && job.verify?.onFail === "deliver_flagged" ? { ...msg, failedChecks: failed } : msg;
      const held = failed && job.verify?.onFail === "hold" ? `failed checks: ${failed.join(" · ")}` : undefined;
      const answered = () => this.send(job.name, run, job.deliver, flagged, held);
      if (job.deliverWhen === "changed") return this.ifChanged(job, run, outcome, recovery, answered);
      return { queued: [...recovery, ...(await answered())] };
    } else if (run.status !== "skipped") {
      const queued = await this.reportFailure(job, run, {
        ...jobMessage("run.failed", job, run, answer),
        ...(run.error ? { error: run.error } : {}),
        lastToolCalls: lastToolCalls(outcome.calls ?? []),
      });
      return { queued };
    }
    return { queued: [] };
  }

  /**
   * Asks `targets` to approve or deny the call a run waits on. The delivery ids are the
   * approval's own, so asking again (after a crash, on another node) sends nothing twice.
   */
  ask(
    job: Pick<Job, "name" | "timezone">,
    run: RunRecord,
    approval: Omit<ApprovalRequest, "links">,
    links: ApprovalRequest["links"],
    targets: readonly DeliveryTarget[],
  ): Promise<QueuedDelivery[]> {
    if (targets.length === 0) return Promise.resolve([]);
    const { id, tool, rule, reasoning, askedAt, expiresAt, onTimeout } = approval;
    const request: ApprovalRequest = { id, tool, arguments: approval.arguments, rule, reasoning, askedAt, expiresAt, onTimeout };
    // Dated when asked, so the same request always renders the same message.
    const waiting = { ...message("approval.requested", job.name, { ...run, finishedAt: askedAt }, ""), timezone: job.timezone };
    return this.enqueue(`${runKey(job.name, run)}.approval.${id}`, targets, {
      ...waiting,
      approval: { ...request, ...(links ? { links } : {}) },
    });
  }

  /** The answer is queued unless it is the job's last delivered one again; what was queued is then the last. */
  private ifChanged(
    job: Job,
    run: RunRecord,
    outcome: Pick<RunOutcome, "answer" | "output">,
    recovery: QueuedDelivery[],
    answered: () => Promise<QueuedDelivery[]>,
  ): Promise<Dispatched> {
    return this.perJob.run(job.name, async () => {
      const hash = comparedHash(job, outcome);
      const last = await this.lastDelivered.get(job.name);
      const ids = last ? answerIds(job, { id: last.run }) : [];
      const since = await unchangedSince(last, hash, { ids, outbox: this.outbox });
      if (since !== undefined) {
        this.log.info({ job: job.name, runId: run.id, since }, "answer unchanged since the last one delivered; not delivered");
        return { queued: recovery, notDelivered: `unchanged since run ${since}` };
      }
      const queued = await answered();
      // Saved after queueing: a crash in between delivers this answer again rather than never.
      await this.lastDelivered.set(job.name, { hash, run: run.id, at: run.finishedAt ?? new Date().toISOString() });
      return { queued: [...recovery, ...queued] };
    });
  }

  /**
   * A run cut short by a crash is reported to `on_failure`, unless it had got as far as queueing
   * its answer: then the crash came between queueing and recording, and the answer is on its way.
   */
  async interrupted(job: Job, run: RunRecord): Promise<void> {
    const { pending, dead } = await this.outbox.list();
    const queued = new Set([...pending, ...dead].map((entry) => entry.id));
    for (const id of answerIds(job, run)) if (queued.has(id) || (await this.outbox.deliveredAt(id))) return;
    await this.reportFailure(job, run, { ...jobMessage("run.failed", job, run, ""), ...(run.error ? { error: run.error } : {}) });
  }

  /** The failure is reported unless the last report of this streak was under `on_failure_repeat` ago. */
  private reportFailure(job: Job, run: RunRecord, failure: DeliveryMessage): Promise<QueuedDelivery[]> {
    if (job.onFailure.length === 0) return Promise.resolve([]);
    const page = this.consoleUrl();
    // The console's own route for a run (console/ui.js runHref).
    const msg = page ? { ...failure, consoleUrl: `${page}#/runs/${encodeURIComponent(job.name)}/${encodeURIComponent(run.id)}` } : failure;
    return this.perJob.run(job.name, async () => {
      const repeatMs = job.onFailureRepeatMs ?? DEFAULT_FAILURE_REPEAT_MS;
      const { report, next } = failed(await this.streaks.get(job.name), new Date(msg.run.finishedAt), repeatMs);
      let ids: QueuedDelivery[] = [];
      if (report.kind === "quiet") {
        const due = new Date(Date.parse(next.reportedAt) + repeatMs).toISOString();
        this.log.info(
          { job: job.name, runId: run.id, failures: next.failures, since: next.since, reportAgainFrom: due },
          "job failed again; on_failure is told again later",
        );
      } else {
        const { since, failures, unreported } = report.kind === "still" ? report.streak : next;
        ids = await this.send(
          job.name,
          run,
          job.onFailure,
          report.kind === "still" ? { ...msg, failing: { since, failures, unreported } } : msg,
        );
      }
      // Saved after queueing: a crash in between reports this failure again rather than never.
      await this.streaks.set(job.name, next);
      return ids;
    });
  }

  /** A success ending a failing streak tells on_failure, once. */
  private recovered(job: Job, run: RunRecord): Promise<QueuedDelivery[]> {
    if (job.onFailure.length === 0) return Promise.resolve([]);
    return this.perJob.run(job.name, async () => {
      const streak = await this.streaks.get(job.name);
      if (!streak) return [];
      const { since, failures, unreported } = streak;
      const recovery = { ...jobMessage("run.recovered", job, run, ""), failing: { since, failures, unreported } };
      // Its own key: the same run's answer may go to a target that is also in on_failure.
      const ids = await this.enqueue(`${runKey(job.name, run)}.recovered`, job.onFailure, recovery);
      await this.streaks.set(job.name, undefined);
      return ids;
    });
  }

  private async send(
    job: string,
    run: RunRecord,
    targets: DeliveryTarget[],
    msg: DeliveryMessage,
    held?: string,
  ): Promise<QueuedDelivery[]> {
    if (targets.length === 0) return [];
    return this.enqueue(runKey(job, run), targets, msg, held);
  }

  /**
   * Every message is redacted here, before the outbox stores it: the journal, a shared queue,
   * the mail and the webhook body all carry what is stored. Targets are not: their `${VAR}`
   * references are filled in only when sent.
   */
  private async enqueue(key: string, targets: readonly DeliveryTarget[], msg: DeliveryMessage, held?: string): Promise<QueuedDelivery[]> {
    const message = this.redactor().redactStrings(msg);
    const reason = held === undefined ? undefined : this.redactor().redactStrings(held);
    return [{ ids: await this.outbox.enqueue(key, targets, message, this.workspace(), reason), message, targets: [...targets] }];
  }
}

function lastToolCalls(calls: readonly ToolCallReport[]): ToolCallSummary[] {
  return calls.slice(-LAST_TOOL_CALLS).map((call) => ({
    name: call.name,
    status: call.isError ? "error" : "ok",
    summary: call.result.split("\n", 1)[0]!.slice(0, 200),
  }));
}

/** Names a run across all jobs (run ids are unique within a job only); a check-in's `@heartbeat.<run id>` is no job file's. */
const runKey = (job: string, run: Pick<RunRecord, "id">) => `${job}.${run.id}`;

/** The delivery ids of a run's answer, one per target of the job's `deliver`. */
export function answerIds(job: Pick<Job, "name" | "deliver">, run: Pick<RunRecord, "id">): string[] {
  return job.deliver.map((target) => deliveryId(runKey(job.name, run), target));
}

/**
 * A job's message carries its zone, so a subject's {{date}} is the prompt's. The heartbeat's answer
 * is a check-in, named after its sender (X-Countd-Run and the webhook's run.id are still the run's).
 */
function jobMessage(kind: DeliveryMessage["kind"], job: Job, run: RunRecord, answer: string): DeliveryMessage {
  const checkIn = kind === "run.completed" && job.checkIn ? { kind: "heartbeat" as const, persona: job.checkIn.persona } : {};
  return { ...message(kind, job.name, run, answer), timezone: job.timezone, ...checkIn };
}

export function message(kind: DeliveryMessage["kind"], job: string, run: RunRecord, answer: string): DeliveryMessage {
  const finishedAt = run.finishedAt ?? new Date().toISOString();
  return {
    kind,
    job,
    run: {
      id: run.id,
      reason: run.reason,
      status: run.status,
      startedAt: run.startedAt,
      finishedAt,
      durationMs: Date.parse(finishedAt) - Date.parse(run.startedAt),
      usage: run.usage,
      cost: run.cost ?? null,
    },
    result: answer,
  };
}

export interface DeliveryStage {
  outbox: DeliveryOutbox;
  dispatcher: RunDispatcher;
  /** True when mail is written as .eml files because there are no smtp settings. */
  mailToFiles: boolean;
  /** Waits for attempts in flight; what is still pending stays on disk for the next start. */
  close(): Promise<void>;
}

/** The delivery stage as the daemon and `countd run` use it: mailer, outbox and dispatcher. */
export async function openDelivery(opts: {
  config: Config;
  env: NodeJS.ProcessEnv;
  workspace: () => string;
  log?: Logger;
  /** Where failing streaks are kept; the daemon's job state, so the on_failure throttle survives a restart. */
  streaks?: StreakStore;
  /** Where each job's last delivered answer is kept (deliver_when: changed); in memory when absent. */
  lastDelivered?: LastDeliveredStore;
  /** Where the outbox tells each change to a delivery. */
  events?: EventBus;
  /** Opens the backend's outbox, sending with `send`. */
  outbox: (send: SendFn) => Promise<DeliveryOutbox>;
  /** The console's address while the daemon serves one, for failure alerts. */
  consoleUrl?: () => string | undefined;
  /** The secrets every queued message is redacted of. */
  redactor: () => Redactor;
}): Promise<DeliveryStage> {
  const { config } = opts;
  const mailer = createMailer({
    smtp: config.smtp,
    stateDir: config.paths.state,
    timezone: config.timezone,
    attachments: config.attachments,
    log: opts.log,
  });
  const send = redactedSend(sendEntry(mailer, opts.env), opts.redactor);
  const outbox = await opts.outbox(send);
  return {
    outbox,
    dispatcher: new RunDispatcher(outbox, opts.workspace, opts.streaks, opts.log, opts.consoleUrl, opts.redactor, opts.lastDelivered),
    mailToFiles: mailer.usesFiles,
    async close() {
      await outbox.close();
      mailer.close();
    },
  };
}
