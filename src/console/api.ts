import { Hono } from "hono";
import pLimit from "p-limit";
import type { Redactor } from "../audit/redact.js";
import type { Config } from "../config/schema.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import type { JobRegistry } from "../jobs/registry.js";
import { displayPath } from "../jobs/load.js";
import type { PausedFiles } from "../runner/held-files.js";
import type { Runner } from "../runner/runner.js";
import { nextCheckInShown } from "./check-in-view.js";
import { HEARTBEAT_JOB, RUN_STATUSES, type RunRecord, type RunStatus } from "../store/run-record.js";
import type { StateStore } from "../store/state.js";
import type { SpendBook } from "../store/spend-ledger.js";
import { fileTranscripts, type TranscriptStore } from "../store/transcripts.js";
import type { CancelResult } from "../store/run-record.js";
import { renderMarkdown } from "../delivery/render.js";
import type { CronTrigger } from "../triggers/cron.js";
import type { Job } from "../jobs/types.js";
import type { DeliveryTarget } from "../delivery/targets.js";
import { errorText } from "../text.js";
import { emptyUsage, addUsage } from "../providers/types.js";
import { ApiError } from "./api-error.js";
import type { Credential, Guard } from "./guard.js";
import type { LiveHub } from "./live.js";
import { rehearsalRoutes } from "./rehearsal-api.js";
import type { ApprovalDesk } from "../approvals/desk.js";
import { approvalLinkRoutes } from "./approval-page.js";
import { approvalRoutes } from "./approvals-api.js";
import { waitingRuns } from "./waiting-runs.js";
import { outboxRoutes } from "./outbox-api.js";
import type { Rehearsals } from "./rehearsals.js";
import type { Metrics } from "./metrics.js";
import type {
  CancelAnswer,
  JobAnswer,
  JobsView,
  JobView,
  PauseAnswer,
  RunNowAnswer,
  RunsPage,
  RunView,
  SessionView,
  Spend,
  StatusView,
} from "./protocol.js";
import { reasonOf } from "../jobs/not-armed.js";
import { invalidFileView, jobDetail, jobView, runDeliveries, shownConfig, statsView } from "./views.js";
import type { Asset } from "./assets.js";
import { page, refuse, signIn, signOut, type ConsoleEnv } from "./sign-in.js";
import type { WebhookTrigger } from "../triggers/webhook.js";
import { zoneOf } from "../jobs/zones.js";
import { rehearsalRuns } from "../rehearse/runs.js";

/** What the console reads and steers: the running daemon's parts, handed over by the composition root. */
export interface ConsoleDeps {
  config: () => Config;
  state: StateStore;
  runner: Runner;
  jobs: JobRegistry;
  outbox: DeliveryOutbox;
  cron: CronTrigger;
  live: LiveHub;
  metrics: Metrics;
  hooks: WebhookTrigger;
  /** What the budgets count: today's spend in budget.timezone's day. */
  ledger: SpendBook;
  redactor: () => Redactor;
  startedAt: Date;
  version: string;
  /** Where run transcripts are read: the state and logs folders unless given (the backend's, which may hold other daemons' runs). */
  transcripts?: TranscriptStore;
  /** Cancels a run on whichever daemon holds it; this daemon's runner alone when not given. */
  cancel?: (run: RunRecord, why: string) => Promise<CancelResult>;
  /** Runs the files a watch job's fires carried while it was paused, once it is resumed. */
  pausedFiles?: Pick<PausedFiles, "release">;
  /** The console's rehearsals, replays and forks, run in the daemon's process with its environment and logger. */
  rehearsals: Rehearsals;
  /** Where tool calls wait for a person's answer; without it the approval endpoints answer 404. */
  approvals?: ApprovalDesk;
}

/** A page of runs at most; the default page is smaller. */
const MAX_PAGE = 500;
const DEFAULT_PAGE = 50;
/** History files read at once for the jobs list. */
const HISTORY_READS = 16;
/** The longest span the charts ask for. */
const MAX_DAYS = 90;
const FAILED: ReadonlySet<RunStatus> = new Set(["error", "timeout", "interrupted", "budget"]);

/**
 * The console's HTTP side: the page's files, the JSON API under /api/ and sign-in. Every request
 * passes the Host check; everything but the page's files needs the token or a session's cookie, and
 * every change a CSRF proof when it comes with the cookie.
 */
export function consoleApp(deps: ConsoleDeps, guard: Guard, assets: ReadonlyMap<string, Asset>): Hono<ConsoleEnv> {
  const app = new Hono<ConsoleEnv>();
  /**
   * Every answer goes out redacted: a run's answer excerpt or error, a delivery's last error, may
   * quote a secret the agent or a peer saw; the state store keeps them as they were.
   */
  const safe = <T>(value: T): T => deps.redactor().redactValue(value) as T;

  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json({ error: err.message }, err.status);
    return c.json({ error: `countd could not answer: ${errorText(err)}` }, 500);
  });
  app.notFound((c) => c.json({ error: `no such endpoint: ${c.req.method} ${c.req.path}` }, 404));

  app.use("*", async (c, next) => {
    if (!guard.hostAllowed(c.req.header("host")))
      return c.json({ error: "this Host is not the console's: open it by the address countd console prints" }, 403);
    await next();
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    c.header("X-Frame-Options", "DENY");
  });

  app.get("/", (c) => signIn(c, guard, assets.get("/")!));
  for (const [path, asset] of assets) if (path !== "/") app.get(path, (c) => page(c, asset));

  // Beside /api/, where scrapers look for it; console.metrics_public opens it to a scraper that holds no token.
  app.get("/metrics", async (c) => {
    if (!deps.config().console.metricsPublic && !guard.credential(c.req.raw.headers)) {
      return refuse(c, guard, "/metrics needs the console's token (Authorization: Bearer <token>), or console.metrics_public: true");
    }
    c.header("Cache-Control", "no-store");
    return c.body(await deps.metrics.scrape(), 200, { "Content-Type": deps.metrics.contentType });
  });

  // Before /api/'s guard and outside it: an approval link's token is the only credential these pages take.
  approvalLinkRoutes(app, deps.approvals, guard, deps.redactor);

  app.use("/api/*", async (c, next) => {
    const credential = guard.credential(c.req.raw.headers);
    if (!credential)
      return refuse(c, guard, "sign in first: open the address countd console prints, or send Authorization: Bearer <token>");
    if (c.req.method !== "GET" && c.req.method !== "HEAD" && !guard.changeAllowed(credential, c.req.raw.headers, c.req.header("host"))) {
      return c.json({ error: "refused: a change must come from the console's own page (CSRF check failed)" }, 403);
    }
    c.set("credential", credential);
    c.header("Cache-Control", "no-store");
    await next();
  });

  app.get("/api/session", (c) => c.json({ csrf: guard.csrf(c.req.raw.headers), version: deps.version } satisfies SessionView));
  app.post("/api/sign-out", (c) => signOut(c, guard));
  app.get("/api/status", async (c) => c.json(safe(await status(deps))));
  app.get("/api/config", (c) => c.json(safe(shownConfig(deps.config()))));

  app.get("/api/jobs", async (c) => c.json(safe<JobsView>({ jobs: await jobViews(deps) })));
  app.get("/api/jobs/:name", async (c) => {
    const name = c.req.param("name");
    const job = deps.jobs.get(name);
    const view = (await jobViews(deps)).find((v) => v.name === name);
    if (!view) throw new ApiError(404, `no job named "${name}"`);
    return c.json(safe<JobAnswer>(job ? jobDetail(view, job) : view));
  });
  app.post("/api/jobs/:name/run", async (c) => {
    const name = c.req.param("name");
    if (!deps.jobs.get(name)) throw new ApiError(404, `no job named "${name}"`);
    const fire = (() => {
      try {
        return deps.runner.request({ job: name, reason: "manual", scheduledAt: new Date() });
      } catch (err) {
        throw new ApiError(503, errorText(err));
      }
    })();
    if (fire.decision === "skipped") {
      // Once its record is saved: the run id answered is then found in the history.
      await fire.ended;
      const answer: RunNowAnswer = { status: "skipped", run_id: fire.run!.id, message: fire.run!.error ?? "skipped" };
      return c.json(answer, 409);
    }
    if (fire.decision === "queued" && c.req.query("wait") === "start") {
      const started = await fire.started;
      if (!started) {
        const end = await fire.ended;
        return c.json(
          { status: "skipped", run_id: end.record.id, message: end.record.error ?? end.record.status } satisfies RunNowAnswer,
          409,
        );
      }
      return c.json({ status: "started", run_id: started.id } satisfies RunNowAnswer, 202);
    }
    const answer: RunNowAnswer =
      fire.decision === "started"
        ? { status: "started", run_id: fire.run!.id }
        : {
            status: "queued",
            message: "queued: it starts when a run slot is free and the job's running run has ended (its overlap policy)",
          };
    return c.json(answer, 202);
  });
  app.post("/api/jobs/:name/pause", async (c) => {
    const name = c.req.param("name");
    if (!deps.jobs.get(name)) throw new ApiError(404, `no job named "${name}"`);
    await deps.state.pause(name);
    return c.json({ job: name, paused: true } satisfies PauseAnswer);
  });
  app.post("/api/jobs/:name/resume", async (c) => {
    const name = c.req.param("name");
    if (!deps.jobs.get(name)) throw new ApiError(404, `no job named "${name}"`);
    await deps.state.resume(name);
    await deps.pausedFiles?.release();
    return c.json({ job: name, paused: deps.state.isPaused(name) } satisfies PauseAnswer);
  });
  app.post("/api/pause", async (c) => {
    await deps.state.pause(null);
    return c.json({ paused_all: true } satisfies PauseAnswer);
  });
  app.post("/api/resume", async (c) => {
    await deps.state.resume(null);
    await deps.pausedFiles?.release();
    return c.json({ paused_all: false } satisfies PauseAnswer);
  });

  app.get("/api/runs", async (c) => {
    const job = c.req.query("job");
    const statusFilter = c.req.query("status");
    if (statusFilter !== undefined && !(RUN_STATUSES as readonly string[]).includes(statusFilter)) {
      throw new ApiError(400, `status must be one of ${RUN_STATUSES.join(", ")}, got "${statusFilter}"`);
    }
    const limit = pageSize(c.req.query("limit"));
    const before = c.req.query("before");
    const all = job !== undefined ? await deps.state.runs(job) : await deps.state.allRuns();
    // Each run's key made once, not at every comparison: 10,000 runs are sorted for every page.
    let keyed = all.filter((run) => !statusFilter || run.status === statusFilter).map((run) => ({ run, key: cursor(run) }));
    if (before) keyed = keyed.filter(({ key }) => key < before);
    keyed.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    const page = keyed.slice(0, limit);
    return c.json(safe<RunsPage>({ runs: page.map(({ run }) => run), ...(keyed.length > limit ? { next: page.at(-1)!.key } : {}) }));
  });
  app.get("/api/runs/:id", async (c) => {
    const run = await findRun(deps, c.req.param("id"), c.req.query("job"));
    const transcripts = deps.transcripts ?? fileTranscripts(() => deps.config().paths.state);
    const transcript = safe(await transcripts.read(run));
    // The agent's text is untrusted: the page shows it only as HTML sanitised here (no script, no handlers, no javascript: links).
    for (const step of transcript.steps) if (step.kind === "text") step.html = (await renderMarkdown(step.text)).html;
    const view: RunView = {
      run: safe(run),
      timezone: zoneOf(deps.config(), (name) => deps.jobs.get(name))(run.job),
      transcript,
      deliveries: safe(await runDeliveries(deps.outbox, run, targetsOf(deps, run.job))),
      running: deps.live.isRunning(run.id, run.job),
    };
    return c.json(view);
  });
  app.post("/api/runs/:id/cancel", async (c) => {
    const run = await findRun(deps, c.req.param("id"), c.req.query("job"));
    const why = cancelReason(c.req.query("reason"), c.get("credential"));
    const result = deps.cancel ? await deps.cancel(run, why) : deps.runner.cancel(run.id, why);
    if (result === "no answer")
      throw new ApiError(
        503,
        `node ${run.node} holds run ${run.id} of ${run.job} and did not answer the cancel (stopped, or cut off from Redis)`,
      );
    if (result === "not found") throw new ApiError(409, `run ${run.id} of ${run.job} is not in progress (${run.status})`);
    return c.json({ run_id: run.id, job: run.job, status: "cancelling" } satisfies CancelAnswer);
  });

  app.get("/api/stats", async (c) => {
    const job = c.req.query("job");
    const text = c.req.query("days") ?? "14";
    const days = Number(text);
    if (!Number.isInteger(days) || days < 1 || days > MAX_DAYS)
      throw new ApiError(400, `days must be a whole number from 1 to ${MAX_DAYS}, got "${text}"`);
    let timezone = deps.config().timezone;
    if (job !== undefined) {
      const found = deps.jobs.get(job);
      if (!found) throw new ApiError(404, `no job named "${job}"`);
      timezone = found.timezone;
    }
    const runs = job !== undefined ? await deps.state.runs(job) : await deps.state.allRuns();
    // Every job's runs as points would be a megabyte for 10,000 runs that no chart of all jobs draws.
    return c.json(statsView(runs, days, timezone, new Date(), job !== undefined));
  });

  outboxRoutes(app, deps, safe);
  rehearsalRoutes(app, deps, safe);
  approvalRoutes(app, deps.approvals, guard, safe);

  return app;
}

/** The longest reason a client may give for a cancel; the run's record keeps it. */
const MAX_REASON = 200;

/** What a cancelled run's record says: the client's reason (countd run's Ctrl-C says so), else where the cancel came from. */
function cancelReason(given: string | undefined, credential: Credential): string {
  // Control characters would reach terminals that show the record (countd history, show).
  const reason = given
    ?.replace(/[\u0000-\u001f\u007f-\u009f]/g, " ")
    .trim()
    .slice(0, MAX_REASON);
  if (reason) return reason;
  return credential === "socket" ? "cancelled with countd cancel" : "cancelled from the console";
}

function pageSize(text: string | undefined): number {
  if (text === undefined) return DEFAULT_PAGE;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new ApiError(400, `limit must be a whole number from 1 to ${MAX_PAGE}, got "${text}"`);
  return Math.min(n, MAX_PAGE);
}

const cursor = (run: RunRecord) => `${run.startedAt}|${run.job}|${run.id}`;

/** A run by id, searched in every job's history unless the job is named (ids are unique within a job only). */
async function findRun(deps: ConsoleDeps, id: string, job: string | undefined): Promise<RunRecord> {
  const saved = job !== undefined ? await deps.state.runs(job) : await deps.state.allRuns();
  // A run just started may not be saved yet: "run now" answers its id at once, and the page asks for it.
  const running = deps.runner
    .running()
    .filter((run) => (job === undefined || run.job === job) && !saved.some((s) => s.id === run.id && s.job === run.job));
  const found = [...saved, ...running].filter((run) => run.id === id);
  // A rehearsal's, a replay's or a fork's run is in no history, only in its rehearsal's folder.
  if (found.length === 0) found.push(...(await rehearsalRuns(deps.config().paths.state, id, job)));
  if (found.length === 0) throw new ApiError(404, `no run with id "${id}"${job !== undefined ? ` in job "${job}"` : ""}`);
  if (found.length > 1)
    throw new ApiError(409, `run id "${id}" is in several jobs (${found.map((run) => run.job).join(", ")}): add ?job=<name>`);
  return found[0]!;
}

/** A job's targets as written, or the heartbeat's (a check-in's delivery is labelled by its recipient too). */
function targetsOf(deps: ConsoleDeps, name: string): DeliveryTarget[] {
  if (name === HEARTBEAT_JOB) return deps.config().heartbeat.deliver;
  const job = deps.jobs.get(name);
  return job ? [...job.deliver, ...job.onFailure] : [];
}

/**
 * Each job's next fires as shown, kept until the first of them passes or the job is loaded again
 * (a new Job): croner's search and the time zone formatting of three fires for each of 1,000 jobs
 * took 150 of the 180 ms of a /api/jobs and 115 of the 150 ms of a /api/status (bench/console),
 * during which the daemon's event loop, and every live stream with it, waited; the page asks for
 * both whenever a run starts or ends. The trigger re-arms a job only when it fires or is set
 * again, from the same schedule.
 */
const shownFires = new WeakMap<Job, { until: number; fires: string[] }>();

function nextFiresShown(deps: ConsoleDeps, job: Job, now: number): string[] {
  const kept = shownFires.get(job);
  if (kept && now < kept.until) return kept.fires;
  const fires = job.enabled ? deps.cron.nextFires(job.name, 3) : [];
  const shown = fires.map((at) => at.toISOString());
  // A job not armed yet (the console listens before start-up arms the jobs) is asked again: that costs nothing.
  if (fires.length > 0) shownFires.set(job, { until: fires[0]!.getTime(), fires: shown });
  return shown;
}

export async function jobViews(deps: ConsoleDeps): Promise<JobView[]> {
  const now = Date.now();
  const pausedAll = deps.state.pausedAll() !== undefined;
  // A few at a time: the first call after a start reads every job's history file, and all at once
  // would hold one descriptor per job.
  const limit = pLimit(HISTORY_READS);
  const views = await Promise.all(
    deps.jobs.files().map(async ({ file, job, problems }) => {
      if (!job) return invalidFileView(displayPath(file), problems, deps.config().timezone, reasonOf(file, problems));
      const runs = await limit(() => deps.state.runs(job.name));
      return jobView(job, {
        nextFires: job.checkIn ? await nextCheckInShown(deps, job) : nextFiresShown(deps, job, now),
        lastRun: runs.at(-1),
        pausedAt: deps.state.job(job.name).pausedAt,
        pausedAll,
        problems,
        workspace: deps.config().paths.workspace,
      });
    }),
  );
  return views.sort((a, b) => a.name.localeCompare(b.name));
}

export async function status(deps: ConsoleDeps): Promise<StatusView> {
  const now = new Date();
  const views = await jobViews(deps);
  const counted = await deps.outbox.counts();
  const next = views
    .flatMap((view) => view.next_fires.slice(0, 1).map((at) => ({ job: view.name, at })))
    .sort((a, b) => Date.parse(a.at) - Date.parse(b.at))
    .slice(0, 5);
  const midnight = new Date(now);
  midnight.setHours(0, 0, 0, 0);
  const saved = await deps.state.allRuns();
  const budget = await budgetView(deps);
  const waiting = await waitingRuns(deps.approvals);
  // Read after the last await, so each run the view shows running is counted in today, as running,
  // with what the live stream saw it spend so far: its saved record may predate its start, or lag it.
  const active = deps.live.active();
  const inProgress = new Set(active.map((run) => `${run.job}/${run.id}`));
  const today: StatusView["today"] = { runs: 0, failures: 0, tokens: emptyUsage(), by_status: {}, cost: 0, unpriced: 0, by_job: {} };
  const todays: Array<Pick<RunRecord, "job" | "startedAt" | "status" | "usage" | "cost">> = [
    ...saved.filter((run) => !inProgress.has(`${run.job}/${run.id}`)),
    ...active.map((run) => ({ job: run.job, startedAt: run.started_at, status: "running" as const, usage: run.usage, cost: run.cost })),
  ];
  for (const run of todays) {
    if (Date.parse(run.startedAt) < midnight.getTime()) continue;
    today.runs++;
    if (FAILED.has(run.status)) today.failures++;
    today.by_status[run.status] = (today.by_status[run.status] ?? 0) + 1;
    addSpend(today, run);
    addSpend((today.by_job[run.job] ??= { cost: 0, unpriced: 0, tokens: emptyUsage() }), run);
  }
  return {
    up: true,
    pid: process.pid,
    version: deps.version,
    started_at: deps.startedAt.toISOString(),
    timezone: deps.config().timezone,
    uptime_s: Math.round((now.getTime() - deps.startedAt.getTime()) / 1000),
    jobs: {
      loaded: views.filter((v) => v.loaded).length,
      invalid: views.filter((v) => v.problems.length > 0).length,
      paused: views.filter((v) => v.loaded && v.paused).length,
      paused_all: deps.state.pausedAll() !== undefined,
      invalid_jobs: views
        .filter((v) => v.problems.length > 0)
        .map(({ name, file, loaded, problems }) => ({ name, file, loaded, problems })),
    },
    running: active,
    waiting,
    queued: deps.runner.queued().length,
    outbox: counted,
    next_fires: next,
    today,
    budget,
  };
}

/** countd.yaml's daily caps beside what all runs spent today, as the budgets count it (every call, in budget.timezone's day). */
async function budgetView(deps: ConsoleDeps): Promise<StatusView["budget"]> {
  const { timezone, perDay, tokensPerDay } = deps.config().budget;
  const spent = await deps.ledger.today(timezone);
  return {
    timezone,
    date: spent.date,
    cost: spent.cost,
    tokens: spent.tokens,
    ...(perDay !== undefined ? { per_day: perDay } : {}),
    ...(tokensPerDay !== undefined ? { tokens_per_day: tokensPerDay } : {}),
  };
}

/** An unpriced run's cost is not known: it is counted apart, never as free. Runs before pricing have none and add nothing. */
function addSpend(spend: Spend, run: Pick<RunRecord, "usage" | "cost">): void {
  addUsage(spend.tokens, run.usage);
  if (run.cost === null) spend.unpriced++;
  else spend.cost += run.cost ?? 0;
}
