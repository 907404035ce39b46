import type { Config } from "../config/schema.js";
import type { EventBus } from "../events.js";
import type { LogFn } from "../log.js";
import type { Job } from "../jobs/types.js";
import type { RunRecord } from "../runner/types.js";
import { createMailer, type Mailer } from "./email.js";
import type { DeliveryMessage, ToolCallSummary } from "./message.js";
import { deliveryId, Outbox } from "./outbox.js";
import { resolveTarget } from "./secrets.js";
import type { DeliveryTarget } from "./targets.js";
import { sendWebhook } from "./webhook.js";
import type { OutboxEntry } from "../store/outbox-store.js";

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
 * non_empty` and there is nothing to say), a failure to `on_failure` once no retry follows.
 * The answers and tool calls of runs in progress are kept here until their run ends.
 */
export class RunDispatcher {
  private readonly answers = new Map<string, string>();
  private readonly toolCalls = new Map<string, ToolCallSummary[]>();

  constructor(
    private readonly outbox: Outbox,
    private readonly workspace: () => string,
    events: EventBus,
  ) {
    events.on("tool.finished", (e) => {
      const calls = this.toolCalls.get(e.sessionId);
      if (!calls) return;
      calls.push({ name: e.name, status: e.error ? "error" : "ok", summary: e.result.split("\n", 1)[0]!.slice(0, 200) });
      if (calls.length > LAST_TOOL_CALLS) calls.shift();
    });
  }

  started(run: RunRecord): void {
    this.toolCalls.set(run.sessionId, []);
  }

  answered(runId: string, answer: string): void {
    this.answers.set(runId, answer);
  }

  async finished(job: Job, run: RunRecord, willRetry: boolean): Promise<void> {
    const answer = this.answers.get(run.id) ?? "";
    const calls = this.toolCalls.get(run.sessionId) ?? [];
    this.answers.delete(run.id);
    if (willRetry) return;
    this.toolCalls.delete(run.sessionId);
    if (run.status === "ok") {
      if (job.deliverWhen === "non_empty" && isEmptyAnswer(answer)) return;
      await this.send(job.name, run, job.deliver, message("run.completed", job.name, run, answer));
    } else if (run.status !== "skipped") {
      await this.send(job.name, run, job.onFailure, {
        ...message("run.failed", job.name, run, answer),
        ...(run.error ? { error: run.error } : {}),
        lastToolCalls: calls,
      });
    }
  }

  /**
   * A run cut short by a crash is reported to `on_failure`, unless it had got as far as queueing
   * its answer: then the crash came between queueing and recording, and the answer is on its way.
   */
  async interrupted(job: Job, run: RunRecord): Promise<void> {
    const { pending, dead } = this.outbox.list();
    const queued = new Set([...pending, ...dead].map((entry) => entry.id));
    const answerIds = job.deliver.map((target) => deliveryId(runKey(job.name, run), target));
    if (answerIds.some((id) => queued.has(id) || this.outbox.deliveredAt(id))) return;
    await this.send(job.name, run, job.onFailure, { ...message("run.failed", job.name, run, ""), ...(run.error ? { error: run.error } : {}) });
  }

  private async send(job: string, run: RunRecord, targets: DeliveryTarget[], msg: DeliveryMessage): Promise<void> {
    if (targets.length === 0) return;
    await this.outbox.enqueue(runKey(job, run), targets, msg, this.workspace());
  }
}

/** Names a run across all jobs (run ids are unique within a job only). */
const runKey = (job: string, run: RunRecord) => `${job}.${run.id}`;

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
    },
    result: answer,
  };
}

export interface DeliveryStage {
  outbox: Outbox;
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
  events: EventBus;
  workspace: () => string;
  log?: LogFn;
}): Promise<DeliveryStage> {
  const { config } = opts;
  const mailer = createMailer({
    smtp: config.smtp,
    stateDir: config.paths.state,
    timezone: config.timezone,
    attachments: config.attachments,
    ...(opts.log ? { log: opts.log } : {}),
  });
  const outbox = await Outbox.open({ stateDir: config.paths.state, send: sendEntry(mailer, opts.env), ...(opts.log ? { log: opts.log } : {}) });
  return {
    outbox,
    dispatcher: new RunDispatcher(outbox, opts.workspace, opts.events),
    mailToFiles: mailer.usesFiles,
    async close() {
      await outbox.stop();
      mailer.close();
    },
  };
}
