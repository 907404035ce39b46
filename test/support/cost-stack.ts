import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";
import { stateStreaks } from "../../src/delivery/alerts.js";
import { jobContext } from "../../src/jobs/context.js";
import { jobDefaults } from "../../src/jobs/defaults.js";
import { loadJobFile } from "../../src/jobs/load.js";
import type { Job } from "../../src/jobs/types.js";
import { Outbox } from "../../src/delivery/outbox.js";
import { openPipeline, type Pipeline, type PipelineOptions } from "../../src/runner/pipeline.js";
import { openRuntime, type Runtime } from "../../src/runtime.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { finalRecord } from "./runner-jobs.js";

/*
 * countd as the daemon wires it (countd.yaml → config → runtime → pipeline → runner), in a
 * directory of the test's, without the triggers: a test fires runs by hand. Closing it stops
 * what writes files (runner, outbox, spend ledger, audit log), so they can be read after.
 */

export interface CostStack {
  config: Config;
  runtime: Runtime;
  state: StateStore;
  pipeline: Pipeline;
  /** Defines (or redefines) a job the runner can look up; `dir`/jobs/<name>.yaml is its file's name. */
  job(name: string, prompt: string, extra?: Partial<Job>): Job;
  /** Writes jobs/<name>.yaml and defines the job as countd reads that file. */
  jobFile(name: string, yaml: string): Promise<Job>;
  /** A manual fire of the job, resolved with its final record. */
  run(name: string): Promise<RunRecord>;
  close(): Promise<void>;
}

export interface StackOptions {
  /** The directory holding countd.yaml; state, logs and workspace go under it. */
  dir: string;
  /** countd.yaml's text. */
  yaml: string;
  env: NodeJS.ProcessEnv;
  /** The clock of the runner, the budgets and the spend ledger. */
  now?: () => Date;
  /** The jobs a stack defines; pass the same map to a reopened stack to keep them. */
  jobs?: Map<string, Job>;
  /** runner.concurrency: how many runs go at once (2 unless given). */
  concurrency?: number;
  /** Instead of the job map (e.g. with the heartbeat's job added). */
  lookup?: (jobs: Map<string, Job>, config: () => Config) => (name: string) => Job | undefined;
  /** Wraps the job executor, as the daemon does with the heartbeat's (triggers/check-ins.ts). */
  wrap?: PipelineOptions["wrap"];
}

export async function openStack(opts: StackOptions): Promise<CostStack> {
  await writeFile(join(opts.dir, "countd.yaml"), opts.yaml);
  const config = await loadConfig({ cwd: opts.dir, env: opts.env });
  await mkdir(config.paths.workspace, { recursive: true });
  const runtime = await openRuntime(config, opts.env);
  const state = await StateStore.open(config.paths.state);
  const jobs = opts.jobs ?? new Map<string, Job>();
  const pipeline = await openPipeline({
    config,
    env: opts.env,
    state,
    runtime: () => runtime,
    job: opts.lookup ? opts.lookup(jobs, () => runtime.config) : (name) => jobs.get(name),
    concurrency: opts.concurrency ?? 2,
    streaks: stateStreaks(state),
    paused: (name) => state.isPaused(name),
    spend: (local) => local,
    outbox: (send) => Outbox.open({ stateDir: config.paths.state, send, events: runtime.events }),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.wrap ? { wrap: opts.wrap } : {}),
  });
  // Sending, as the daemon's outbox does once it has started.
  pipeline.outbox.start();
  let closed: Promise<void> | undefined;
  return {
    config,
    runtime,
    state,
    pipeline,
    job(name, prompt, extra = {}) {
      const defined: Job = {
        name,
        file: join(opts.dir, "jobs", `${name}.yaml`),
        timezone: "UTC",
        prompt,
        ...jobDefaults(),
        tools: [],
        ...extra,
      };
      jobs.set(name, defined);
      return defined;
    },
    async jobFile(name, yaml) {
      const file = join(config.paths.jobs, `${name}.yaml`);
      await mkdir(config.paths.jobs, { recursive: true });
      await writeFile(file, yaml);
      const { job, problems } = await loadJobFile(file, jobContext(config, opts.env));
      if (!job) throw new Error(`${file}: ${problems.join("; ")}`);
      jobs.set(name, job);
      return job;
    },
    run: (name) => finalRecord(pipeline.runner, { job: name, reason: "manual", scheduledAt: opts.now?.() ?? new Date() }),
    close: () =>
      (closed ??= (async () => {
        await pipeline.runner.shutdown(0);
        await pipeline.close();
        await runtime.close();
        await state.close();
      })()),
  };
}

export type AuditLine = Record<string, unknown> & { kind: string; session?: string; model?: string; cost?: number | null };

/** Every line of the audit log's files, oldest file first; read after the stack is closed. */
export async function auditLines(logsDir: string, kind?: string): Promise<AuditLine[]> {
  const files = (await readdir(logsDir)).filter((name) => /^audit-.*\.jsonl$/.test(name)).sort();
  const lines: AuditLine[] = [];
  for (const file of files) {
    for (const line of (await readFile(join(logsDir, file), "utf8")).split("\n"))
      if (line.trim()) lines.push(JSON.parse(line) as AuditLine);
  }
  return kind === undefined ? lines : lines.filter((line) => line.kind === kind);
}
