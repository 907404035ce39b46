import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ApprovalStore } from "../approvals/types.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import type { EventBus } from "../events.js";
import type { JobRegistry } from "../jobs/registry.js";
import { jobOfSession } from "../runner/session-ids.js";
import type { RunRecord } from "../store/run-record.js";
import type { StateStore } from "../store/state.js";

/** LLM runs take seconds to the better part of an hour. */
const DURATION_BUCKETS = [1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];
/** A timer fires within milliseconds; a full run queue holds a fire for minutes. */
const LATENESS_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];
/**
 * Tool names come from the model, which may call tools that do not exist: past this many
 * distinct names, new ones are counted as "other", so a model inventing names cannot grow the
 * series without end.
 */
const MAX_TOOL_NAMES = 100;

/**
 * The `job_name` label, not `job`: Prometheus gives every scraped series its own `job` label (the
 * scrape job's), and a metric's `job` would be renamed `exported_job`.
 */
const JOB = "job_name";

export interface MetricsSources {
  /** The runtime's bus, which a reload keeps: the counters go on across SIGHUP. */
  events: EventBus;
  outbox: Pick<DeliveryOutbox, "counts">;
  jobs: Pick<JobRegistry, "files" | "all">;
  state: Pick<StateStore, "isPaused" | "runs">;
  /**
   * The approvals kept, read at each scrape: the waiting runs are right after a restart and, where
   * daemons share a backend, are every node's.
   */
  approvals?: Pick<ApprovalStore, "list">;
  /** Where daemons share a backend: this daemon's node, named by countd_node_info. */
  node?: string;
}

/**
 * The daemon's Prometheus metrics: counters and histograms fed by the event bus as things happen,
 * gauges read from the outbox, the job files and the state when scraped. A registry of its own,
 * so several daemons in one process (the tests) keep apart. Where daemons share a backend each node's metrics stay
 * its own (its runs, its calls, its outbox), as Prometheus scrapes every instance; the info metric
 * countd_node_info names the node, to join on or sum by.
 */
export class Metrics {
  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;
  private readonly registry = new Registry();
  private readonly detach: Array<() => void> = [];
  /** Runs that started (skipped fires never do): only they have a duration. */
  private readonly running = new Set<string>();
  /** Seconds since the epoch of each job's last successful run, seen or read from its history. */
  private readonly lastSuccess = new Map<string, number>();
  private readonly historyRead = new Set<string>();
  private readonly toolNames = new Set<string>();
  /**
   * prom-client's process and Node.js metrics, registered at the first scrape: their event loop
   * monitor wakes the process every 10 ms, a quarter of a percent of a core for a daemon nobody scrapes.
   */
  private processMetrics = false;

  constructor(private readonly sources: MetricsSources) {
    const registers = [this.registry];
    const runs = new Counter({
      name: "countd_runs_total",
      help: "Runs ended, by job, status and reason (skipped fires included).",
      labelNames: [JOB, "status", "reason"],
      registers,
    });
    const duration = new Histogram({
      name: "countd_run_duration_seconds",
      help: "How long runs that started took, from start to end.",
      labelNames: [JOB],
      buckets: DURATION_BUCKETS,
      registers,
    });
    const lateness = new Histogram({
      name: "countd_fire_lateness_seconds",
      help: "A scheduled run's start after its slot.",
      labelNames: [JOB],
      buckets: LATENESS_BUCKETS,
      registers,
    });
    const llmRequests = new Counter({
      name: "countd_llm_requests_total",
      help: "LLM calls (a call's retries count once), by job and model.",
      labelNames: [JOB, "model"],
      registers,
    });
    const llmFailures = new Counter({
      name: "countd_llm_failures_total",
      help: "LLM calls that failed after their retries, by job and model.",
      labelNames: [JOB, "model"],
      registers,
    });
    const tokens = new Counter({
      name: "countd_llm_tokens_total",
      help: "Tokens by job, model and type: input (cached and cache writes included), output, cached (the input read from the provider's cache), cache_write (the input written to it).",
      labelNames: [JOB, "model", "type"],
      registers,
    });
    const cost = new Counter({
      name: "countd_llm_cost_usd_total",
      help: "USD of the LLM calls whose model has a price, by job and model.",
      labelNames: [JOB, "model"],
      registers,
    });
    const unpriced = new Counter({
      name: "countd_llm_unpriced_calls_total",
      help: "LLM calls whose model has no price (their cost is not known), by job and model.",
      labelNames: [JOB, "model"],
      registers,
    });
    const tools = new Counter({
      name: "countd_tool_calls_total",
      help: "Tool calls by tool and status (ok, error).",
      labelNames: ["tool", "status"],
      registers,
    });
    const deliveries = new Counter({
      name: "countd_deliveries_total",
      help: "Delivery changes by target kind and status (queued, sending, delivered, failed, dead, retried, purged).",
      labelNames: ["kind", "status"],
      registers,
    });
    const verifyFailures = new Counter({
      name: "countd_verify_failures_total",
      help: "Checks of a job's verify: that failed on a run's answer, by job and kind of check (command, expect, tools_called).",
      labelNames: [JOB, "check"],
      registers,
    });
    const heartbeat = new Counter({
      name: "countd_heartbeat_decisions_total",
      help: "Heartbeat ticks by outcome (skipped, silent, duplicate, failed, sent) and, for skipped, the rule's reason.",
      labelNames: ["outcome", "reason"],
      registers,
    });
    const lastSuccess = new Gauge({
      name: "countd_last_success_timestamp_seconds",
      help: "When each loaded job's last successful run ended (none for a job that never succeeded).",
      labelNames: [JOB],
      registers,
      collect: async () => {
        lastSuccess.reset();
        for (const job of this.sources.jobs.all()) {
          const at = await this.lastSuccessOf(job.name);
          if (at !== undefined) lastSuccess.set({ [JOB]: job.name }, at);
        }
      },
    });
    new Gauge({
      name: "countd_outbox_pending",
      help: "Deliveries waiting for their next attempt.",
      registers,
      async collect() {
        this.set((await sources.outbox.counts()).pending);
      },
    });
    new Gauge({
      name: "countd_outbox_dead",
      help: "Deliveries given up, until retried or purged.",
      registers,
      async collect() {
        this.set((await sources.outbox.counts()).dead);
      },
    });
    new Gauge({
      name: "countd_jobs",
      help: "Job files by state: valid, or invalid now (a loaded job then keeps its last good version).",
      labelNames: ["state"],
      registers,
      collect() {
        const files = sources.jobs.files();
        const invalid = files.filter((file) => file.problems.length > 0).length;
        this.set({ state: "invalid" }, invalid);
        this.set({ state: "valid" }, files.length - invalid);
      },
    });
    const { approvals } = sources;
    if (approvals !== undefined) {
      new Gauge({
        name: "countd_runs_waiting",
        help: "Runs waiting for a person's answer to a tool call, by job: every node's where daemons share a backend.",
        labelNames: [JOB],
        registers,
        async collect() {
          // Every loaded job has a series, 0 when nothing waits, so an alert sees a drop to 0 and not a series gone.
          const waiting = new Map(sources.jobs.all().map((job) => [job.name, 0]));
          for (const approval of await approvals.list())
            if (approval.status === "waiting") waiting.set(approval.job, (waiting.get(approval.job) ?? 0) + 1);
          this.reset();
          for (const [job, count] of waiting) this.set({ [JOB]: job }, count);
        },
      });
    }
    const answered = new Counter({
      name: "countd_approvals_answered_total",
      help: "Approvals answered on this daemon, by job and answer (approved, denied, expired).",
      labelNames: [JOB, "answer"],
      registers,
    });
    if (sources.node !== undefined) {
      const node = new Gauge({
        name: "countd_node_info",
        help: "Always 1: the node this daemon is, where daemons share a backend; its other metrics count this node's runs only.",
        labelNames: ["node"],
        registers,
      });
      node.set({ node: sources.node }, 1);
    }
    new Gauge({
      name: "countd_jobs_paused",
      help: "Loaded jobs that are paused (all of them while all are paused).",
      registers,
      collect() {
        this.set(sources.jobs.all().filter((job) => sources.state.isPaused(job.name)).length);
      },
    });

    const { events } = sources;
    this.detach.push(
      events.on("run.started", ({ run }) => {
        this.running.add(key(run));
        if (run.reason === "schedule") lateness.observe({ [JOB]: run.job }, seconds(run.startedAt) - seconds(run.scheduledAt));
      }),
      events.on("run.finished", ({ run }) => {
        runs.inc({ [JOB]: run.job, status: run.status, reason: run.reason });
        if (this.running.delete(key(run)) && run.finishedAt)
          duration.observe({ [JOB]: run.job }, seconds(run.finishedAt) - seconds(run.startedAt));
        if (run.status === "ok") this.lastSuccess.set(run.job, seconds(run.finishedAt ?? run.startedAt));
      }),
      events.on("llm.finished", (e) => {
        // Sessions of no job (countd ask, subagents) count under the empty job name, which Prometheus shows as no label.
        const labels = { [JOB]: jobOfSession(e.sessionId) ?? "", model: e.model };
        llmRequests.inc(labels);
        if (e.error !== undefined) llmFailures.inc(labels);
        tokens.inc({ ...labels, type: "input" }, e.usage.inputTokens);
        tokens.inc({ ...labels, type: "output" }, e.usage.outputTokens);
        tokens.inc({ ...labels, type: "cached" }, e.usage.cachedInputTokens);
        tokens.inc({ ...labels, type: "cache_write" }, e.usage.cacheWriteTokens);
        if (e.cost === null) unpriced.inc(labels);
        else cost.inc(labels, e.cost);
      }),
      events.on("tool.finished", (e) => tools.inc({ tool: this.toolLabel(e.name), status: e.error === undefined ? "ok" : "error" })),
      events.on("delivery", (e) => deliveries.inc({ kind: e.kind, status: e.status })),
      events.on("verify.checked", (e) => {
        if (!e.passed) verifyFailures.inc({ [JOB]: e.job, check: e.check });
      }),
      events.on("approval.answered", (e) => answered.inc({ [JOB]: e.job, answer: e.answer })),
      events.on("heartbeat.decision", (e) => heartbeat.inc({ outcome: e.outcome, reason: e.outcome === "skipped" ? e.reason : "" })),
    );
  }

  /** The text format, gauges read now. */
  scrape(): Promise<string> {
    if (!this.processMetrics) collectDefaultMetrics({ register: this.registry });
    this.processMetrics = true;
    return this.registry.metrics();
  }

  close(): void {
    this.detach.splice(0).forEach((off) => off());
  }

  /** A job's history is read once, at the first scrape that lacks it; the bus tells of later successes. */
  private async lastSuccessOf(job: string): Promise<number | undefined> {
    if (!this.lastSuccess.has(job) && !this.historyRead.has(job)) {
      this.historyRead.add(job);
      const last = [...(await this.sources.state.runs(job))].reverse().find((run) => run.status === "ok");
      if (last && !this.lastSuccess.has(job)) this.lastSuccess.set(job, seconds(last.finishedAt ?? last.startedAt));
    }
    return this.lastSuccess.get(job);
  }

  private toolLabel(name: string): string {
    if (this.toolNames.has(name)) return name;
    if (this.toolNames.size >= MAX_TOOL_NAMES) return "other";
    this.toolNames.add(name);
    return name;
  }
}

const key = (run: RunRecord) => `${run.job}/${run.id}`;
const seconds = (iso: string) => Date.parse(iso) / 1000;
