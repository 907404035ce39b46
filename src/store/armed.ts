import { readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import type { FileProblems } from "../jobs/not-armed.js";
import type { Job } from "../jobs/types.js";
import { silentLogger, type Logger } from "../log.js";
import { isAlive } from "./lock.js";
import { RUN_STATUSES } from "./run-record.js";

/**
 * What the running daemon fires, published in `<state_dir>/armed.json` for `countd jobs`, which
 * runs in another process: the jobs as the daemon holds them (a job whose file turned invalid
 * keeps its last good version there, which the job files alone cannot tell), the heartbeat's
 * among them. Only what the listing shows is written: no prompt, no delivery target.
 */
export type ArmedJob = Pick<Job, "name" | "file" | "enabled" | "timezone" | "schedule" | "after"> & {
  watch?: { paths: string[] };
  webhook?: object;
};

export interface Armed {
  /** The daemon that wrote it; a file left by one that is gone is not read. */
  pid: number;
  jobs: ArmedJob[];
  /** The job files it fires nothing from, or a last good version from, with why (its own environment decides an unset variable). */
  problems: FileProblems[];
}

const FILE = "armed.json";

const time = z.iso.datetime({ offset: true }).transform((text) => new Date(text));
const armedShape = z.object({
  pid: z.number().int().positive(),
  jobs: z.array(
    z.object({
      name: z.string(),
      file: z.string(),
      enabled: z.boolean(),
      timezone: z.string(),
      schedule: z
        .discriminatedUnion("kind", [
          z.object({ kind: z.literal("cron"), expression: z.string() }),
          z.object({ kind: z.literal("every"), intervalMs: z.number().positive() }),
          z.object({ kind: z.literal("at"), date: time }),
        ])
        .optional(),
      watch: z.object({ paths: z.array(z.string()) }).optional(),
      webhook: z.object({}).optional(),
      after: z.object({ job: z.string(), statuses: z.array(z.enum(RUN_STATUSES)) }).optional(),
    }),
  ),
  problems: z
    .array(z.object({ file: z.string(), name: z.string(), armed: z.boolean(), problems: z.array(z.string()), reason: z.string() }))
    .default([]),
});

/** The daemon's side: every change is written whole (temp file and rename), one write at a time. */
export class ArmedPublisher {
  private jobs: ArmedJob[] = [];
  private problems: FileProblems[] = [];
  private writing: Promise<void> = Promise.resolve();
  private withdrawn = false;
  private readonly log: Logger;

  constructor(
    private readonly stateDir: string,
    log: Logger = silentLogger,
  ) {
    this.log = log.child({ component: "armed" });
  }

  setJobs(jobs: readonly Job[]): Promise<void> {
    this.jobs = jobs.map(({ name, file, enabled, timezone, schedule, watch, webhook, after }) => ({
      name,
      file,
      enabled,
      timezone,
      ...(schedule ? { schedule } : {}),
      ...(watch ? { watch: { paths: watch.paths } } : {}),
      // Whether there is one, not its secret's reference nor its limits.
      ...(webhook ? { webhook: {} } : {}),
      ...(after ? { after } : {}),
    }));
    return this.write();
  }

  setProblems(files: readonly FileProblems[]): Promise<void> {
    this.problems = [...files];
    return this.write();
  }

  /** At stop: a daemon that is not running fires nothing. */
  withdraw(): Promise<void> {
    this.withdrawn = true;
    this.writing = this.writing.then(() => unlink(join(this.stateDir, FILE)).catch(() => {}));
    return this.writing;
  }

  private write(): Promise<void> {
    if (this.withdrawn) return this.writing;
    const data: Armed = {
      pid: process.pid,
      jobs: this.jobs,
      problems: this.problems,
    };
    const file = join(this.stateDir, FILE);
    this.writing = this.writing
      .then(async () => {
        if (this.withdrawn) return;
        await writeFile(`${file}.tmp`, `${JSON.stringify(data)}\n`);
        await rename(`${file}.tmp`, file);
      })
      // Only the listing misses it: never a reason to stop a run or the daemon.
      .catch((err: unknown) => this.log.warn({ file, error: (err as Error).message }, "could not write the file countd jobs lists from"));
    return this.writing;
  }
}

/** The CLI's side: what the daemon now running fires; undefined when none is running or the file is unreadable. */
export async function readArmed(stateDir: string): Promise<Armed | undefined> {
  const text = await readFile(join(stateDir, FILE), "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  let parsed;
  try {
    parsed = armedShape.safeParse(JSON.parse(text));
  } catch {
    return undefined;
  }
  if (!parsed.success || !isAlive(parsed.data.pid)) return undefined;
  const { pid, jobs, problems } = parsed.data;
  return {
    pid,
    problems,
    jobs: jobs.map(({ schedule, watch, after, ...job }) => ({
      ...job,
      ...(schedule ? { schedule } : {}),
      ...(watch ? { watch } : {}),
      ...(after ? { after } : {}),
    })),
  };
}
