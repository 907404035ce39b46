import type { Config } from "../config/schema.js";
import type { OutboxEntry } from "../delivery/outbox.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { describeTarget, targetKey, type DeliveryTarget } from "../delivery/targets.js";
import { displayPath } from "../jobs/load.js";
import { triggerLabel, type TriggerOf } from "../jobs/trigger-label.js";
import type { Job } from "../jobs/types.js";
import type { RunRecord, RunStatus } from "../store/run-record.js";
import { localClock } from "../time.js";
import type { JobDetail, JobView, OutboxItem, RunDelivery, RunView, StatsView } from "./protocol.js";

/** How the console shows a job's trigger: what `countd jobs` shows, one phrase. */
export function triggerText(job: TriggerOf, workspace: string): string {
  return triggerLabel(job, true, workspace);
}

export function jobView(
  job: Job,
  extra: { nextFires: string[]; lastRun?: RunRecord; pausedAt?: string; pausedAll: boolean; problems: string[]; workspace: string },
): JobView {
  const last = extra.lastRun;
  return {
    name: job.name,
    file: displayPath(job.file),
    ...(job.description ? { description: job.description } : {}),
    enabled: job.enabled,
    trigger: triggerText(job, extra.workspace),
    timezone: job.timezone,
    next_fires: extra.nextFires,
    ...(last
      ? {
          last_run: {
            id: last.id,
            status: last.status,
            reason: last.reason,
            startedAt: last.startedAt,
            ...(last.finishedAt ? { finishedAt: last.finishedAt } : {}),
            ...(last.error ? { error: last.error } : {}),
          },
        }
      : {}),
    paused: extra.pausedAt !== undefined || extra.pausedAll,
    ...(extra.pausedAt ? { paused_at: extra.pausedAt } : {}),
    problems: extra.problems,
    loaded: true,
  };
}

/** A file in the jobs folder that loaded no job: shown with its problems, so a typo is seen where the job should be. */
export function invalidFileView(file: string, problems: string[], timezone: string, reason: string): JobView {
  return {
    name: file.replace(/^.*\//, "").replace(/\.ya?ml$/, ""),
    file,
    enabled: false,
    trigger: "-",
    timezone,
    next_fires: [],
    paused: false,
    problems,
    loaded: false,
    not_loaded: reason,
  };
}

export function jobDetail(view: JobView, job: Job): JobDetail {
  return {
    ...view,
    settings: {
      prompt: job.prompt,
      session: job.session,
      overlap: job.overlap,
      timeout_ms: job.timeoutMs,
      catch_up_ms: job.catchUpMs,
      retry: { attempts: job.retry.attempts, backoff_ms: job.retry.backoffMs },
      ...(job.tools ? { tools: job.tools } : {}),
      deliver: job.deliver.map(describeTarget),
      on_failure: job.onFailure.map(describeTarget),
      deliver_when: job.deliverWhen,
      ...(job.watch ? { watch: { paths: job.watch.paths } } : {}),
      ...(job.webhook ? { webhook: { path: `/hooks/${job.name}`, max_body: job.webhook.maxBody, rate: job.webhook.rate } } : {}),
    },
  };
}

/** A delivery as the console shows it: where it goes, never the target's secret, headers or the message body. */
export function deliveryView(entry: Readonly<OutboxEntry>): RunDelivery & { job?: string; run_id?: string; created_at: string } {
  const owner = deliveryOwner(entry.id);
  return {
    id: entry.id,
    kind: entry.target.kind,
    to: describeTarget(entry.target),
    status: entry.status,
    attempts: entry.attempts,
    ...(entry.lastError ? { last_error: entry.lastError } : {}),
    // A held delivery waits for its release, not for a time.
    ...(entry.status === "pending" && entry.held === undefined ? { next_attempt_at: entry.nextAttemptAt } : {}),
    ...owner,
    created_at: entry.createdAt,
    ...(entry.held !== undefined ? { held: entry.held } : {}),
  };
}

/** `written`: the run's job's targets (the heartbeat's for a check-in). */
export async function runDeliveries(
  outbox: DeliveryOutbox,
  run: RunRecord,
  written: readonly DeliveryTarget[],
): Promise<RunView["deliveries"]> {
  const prefix = `${run.job}.${run.id}.`;
  // The outbox keeps only the id of a delivered message: its target is found by key among the job's (ids end in the target's key).
  const targets = written.map((target) => ({ target, key: targetKey(target) }));
  const delivered = (id: string) => {
    const rest = id.slice(prefix.length);
    const found = targets.find(({ key }) => rest === key || rest.endsWith(`.${key}`));
    return found
      ? { kind: found.target.kind, to: describeTarget(found.target) }
      : { kind: /(?:^|\.)(email|webhook)-/.exec(rest)?.[1] ?? rest, to: rest };
  };
  const { pending, dead } = await outbox.list();
  const open = [...pending, ...dead]
    .filter((entry) => entry.id.startsWith(prefix))
    .map((entry) => {
      const { job: _job, run_id: _run, created_at: _created, ...view } = deliveryView(entry);
      return view;
    });
  const done = (await outbox.deliveredIds(prefix)).map(({ id, at, attempts }) => ({
    id,
    ...delivered(id),
    status: "delivered" as const,
    delivered_at: at,
    ...(attempts !== undefined ? { attempts } : {}),
  }));
  return [...open, ...done];
}

/** A delivery as the outbox page shows it: with its times' zone, its job's (`zone` says whose). */
export const outboxItem =
  (zone: (job: string | undefined) => string) =>
  (entry: Readonly<OutboxEntry>): OutboxItem => {
    const view = deliveryView(entry);
    return { ...view, timezone: zone(view.job) };
  };

/** A run's deliveries have ids `<job>.<run id>.<target key>` (delivery/outbox.ts). */
export function deliveryOwner(id: string): { job?: string; run_id?: string } {
  const match = /^(.+)\.(\d{8}T\d{6}Z-[0-9a-f]+)\./.exec(id);
  return match ? { job: match[1]!, run_id: match[2]! } : {};
}

/**
 * The configuration as the console shows it: paths, limits and schedules, without the provider's
 * key, smtp's password or any target's secret (which the redactor's names and values catch too).
 */
export function shownConfig(config: Config): Record<string, unknown> {
  const { secrets: _secrets, provider, smtp, heartbeat, ...rest } = config;
  return {
    ...rest,
    provider: { ...provider, apiKey: provider.apiKey ? "[REDACTED]" : undefined },
    ...(smtp ? { smtp: { ...smtp, password: smtp.password ? "[REDACTED]" : undefined } } : {}),
    heartbeat: { ...heartbeat, deliver: heartbeat.deliver.map(describeTarget) },
  };
}

/** Every time zone's offset, and so every local midnight, falls on a whole quarter hour of UTC. */
const QUARTER_HOUR_MS = 15 * 60_000;

/**
 * Runs per local day by status and what they cost over the last `days` days. `points`: each
 * finished run's duration, tokens and cost too (a job's charts); without, the days alone (the overview's).
 */
export function statsView(runs: readonly RunRecord[], days: number, timezone: string, now: Date, points = true): StatsView {
  // Counted back on the calendar, not in steps of 24 h, which skip a day after a 23-hour one.
  const [year, month, day] = localClock(now, timezone).date.split("-").map(Number) as [number, number, number];
  const dates: string[] = [];
  for (let i = days - 1; i >= 0; i--) dates.push(new Date(Date.UTC(year, month - 1, day - i)).toISOString().slice(0, 10));
  const byDate = new Map(dates.map((date) => [date, { date, by_status: {} as Partial<Record<RunStatus, number>>, cost: 0, unpriced: 0 }]));
  // One Intl call per quarter hour rather than per run: with 10,000 runs, the calls were most of the request's 300 ms.
  const quarterDates = new Map<number, string>();
  const localDate = (at: number) => {
    const quarter = Math.floor(at / QUARTER_HOUR_MS);
    let date = quarterDates.get(quarter);
    if (date === undefined) quarterDates.set(quarter, (date = localClock(new Date(quarter * QUARTER_HOUR_MS), timezone).date));
    return date;
  };
  const shown: Array<{ at: number; view: StatsView["runs"][number] }> = [];
  for (const run of runs) {
    const at = Date.parse(run.startedAt);
    const shownDay = byDate.get(localDate(at));
    if (!shownDay) continue;
    shownDay.by_status[run.status] = (shownDay.by_status[run.status] ?? 0) + 1;
    if (run.cost === null) shownDay.unpriced++;
    else shownDay.cost += run.cost ?? 0;
    if (!points || !run.finishedAt || run.status === "skipped") continue;
    shown.push({
      at,
      view: {
        id: run.id,
        job: run.job,
        started_at: run.startedAt,
        status: run.status,
        duration_ms: Date.parse(run.finishedAt) - at,
        tokens: run.usage.inputTokens + run.usage.outputTokens,
        ...(run.cost !== undefined ? { cost: run.cost } : {}),
      },
    });
  }
  shown.sort((a, b) => a.at - b.at);
  return { timezone, days: [...byDate.values()], runs: shown.map(({ view }) => view) };
}
