import { readFile, realpath } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Redactor } from "../audit/redact.js";
import type { Config } from "../config/schema.js";
import { builtInJobs } from "../jobs/heartbeat.js";
import type { JobRegistry } from "../jobs/registry.js";
import type { Job } from "../jobs/types.js";
import { rehearsalAt } from "../rehearse/at.js";
import { DELIVERIES_DIR } from "../rehearse/capture.js";
import { NotReplayable, readRecording } from "../rehearse/recorded.js";
import { replay, type ForkChanges, type ReplayReport } from "../rehearse/replay.js";
import { rehearsals as keptRehearsals } from "../rehearse/runs.js";
import { rehearse, REHEARSALS_DIR, SUMMARY_FILE, type RehearsalSummary } from "../rehearse/session.js";
import { errorText } from "../text.js";
import { ApiError } from "./api-error.js";
import type { RehearsalItem, RehearsalsView, RehearsalStarted, RehearsalView } from "./rehearsal-protocol.js";
import type { Rehearsals } from "./rehearsals.js";
import type { ConsoleEnv } from "./sign-in.js";

/** What the rehearsal endpoints use of the daemon: its configuration, its jobs, and where its rehearsals run. */
export interface RehearsalApiDeps {
  config: () => Config;
  jobs: Pick<JobRegistry, "get">;
  redactor: () => Redactor;
  rehearsals: Rehearsals;
}

/** A rehearsal's body: a webhook payload, a few file paths. A megabyte is more than any job's webhook takes by default. */
const MAX_BODY = 1024 * 1024;
/** The folders of a rehearsal the files endpoint serves: what it would have sent, and a replay's originals. */
const SERVED_DIRS = [DELIVERIES_DIR, "original"];
/** A rehearsal's id as rehearsalId() makes it; anything else is no folder of ours. */
const ID = /^\d{8}T\d{6}Z-[0-9a-f]+$/;

/**
 * The console's Rehearse, Replay and Fork. Each POST spends real money (a rehearsal and a fork call
 * the model), so it passes the same guard as every change under /api/ (the token, or the cookie
 * with the CSRF proof); it answers 202 with the id at once and the work runs in the daemon's
 * process, followed with GET /api/rehearsals/:id.
 */
export function rehearsalRoutes(app: Hono<ConsoleEnv>, deps: RehearsalApiDeps, safe: <T>(value: T) => T): void {
  const limit = bodyLimit({
    maxSize: MAX_BODY,
    onError: () => {
      throw new ApiError(413, `the body is over ${MAX_BODY} bytes`);
    },
  });

  app.post("/api/jobs/:name/rehearse", limit, async (c) => {
    const config = deps.config();
    const name = c.req.param("name");
    const job = jobNamed(deps, config, name);
    if (!job) throw new ApiError(404, `no job named "${name}"`);
    const body = await bodyOf(c, ["at", "files", "payload"]);
    const at = optional(body, "at", "a time such as 2026-12-05T09:00");
    const files = body["files"];
    if (files !== undefined && (!Array.isArray(files) || files.some((file) => typeof file !== "string" || file.trim() === "")))
      throw new ApiError(400, `files must be a list of paths, got ${JSON.stringify(files)}`);
    const payload = optional(body, "payload", "the webhook's body as text");
    let when: Date;
    try {
      when = at !== undefined ? rehearsalAt(at, job.timezone, "at") : new Date();
    } catch (err) {
      throw new ApiError(400, errorText(err));
    }
    // As a watch job's paths are written: relative to the workspace unless absolute.
    const paths = (files as string[] | undefined)?.map((file) => resolve(config.paths.workspace, file.trim()));
    const fire = { at: when, ...(paths ? { files: paths } : {}), ...(payload !== undefined ? { payload } : {}) };
    const { env, log } = deps.rehearsals;
    const id = deps.rehearsals.start({ kind: "rehearsal", job: job.name }, (id) =>
      rehearse(config, env, log, "rehearsal", job, fire, { id }),
    );
    return c.json({ id } satisfies RehearsalStarted, 202);
  });

  app.post("/api/runs/:id/replay", limit, async (c) => {
    const config = deps.config();
    const runId = c.req.param("id");
    const body = await bodyOf(c, ["job", "model", "prompt", "system_prompt", "recorded_only"]);
    const jobName = optional(body, "job", "a job's name");
    const model = optional(body, "model", "a model's name");
    const prompt = optional(body, "prompt", "the prompt's text");
    const system = optional(body, "system_prompt", "the system prompt's text");
    const recordedOnly = body["recorded_only"];
    if (recordedOnly !== undefined && typeof recordedOnly !== "boolean")
      throw new ApiError(400, `recorded_only must be true or false, got ${JSON.stringify(recordedOnly)}`);
    // Refused now, not in the background: an unknown run, a run in several jobs, a journal that cannot be replayed.
    const recording = await readRecording(config.paths.state, runId, jobName).catch((err: unknown) => {
      if (!(err instanceof NotReplayable)) throw err;
      throw new ApiError(/^no journal/.test(err.message) ? 404 : 409, err.message.replace("add --job <name>", 'give "job"'));
    });
    if (!jobNamed(deps, config, recording.job))
      throw new ApiError(404, `run ${runId} is of job "${recording.job}", which the daemon has not loaded`);
    const changes: ForkChanges = {
      ...(model !== undefined ? { model } : {}),
      ...(prompt !== undefined ? { prompt } : {}),
      ...(system !== undefined ? { system } : {}),
      ...(recordedOnly === true ? { recordedOnly: true } : {}),
    };
    const kind = model !== undefined || prompt !== undefined || system !== undefined ? "fork" : "replay";
    const { env, log } = deps.rehearsals;
    const jobOf = async (name: string) => {
      const job = jobNamed(deps, config, name);
      if (!job) throw new Error(`no job named "${name}"`);
      return job;
    };
    const id = deps.rehearsals.start({ kind, job: recording.job, of: { job: recording.job, run: runId } }, (id) =>
      replay(config, env, log, runId, { jobName: recording.job, jobOf, changes, id }),
    );
    return c.json({ id } satisfies RehearsalStarted, 202);
  });

  app.get("/api/rehearsals", async (c) => {
    const state = deps.config().paths.state;
    const running: RehearsalItem[] = deps.rehearsals.all().map((flight) => ({
      id: flight.id,
      kind: flight.kind,
      job: flight.job,
      status: flight.error !== undefined ? "failed" : "running",
      started: flight.started,
      ...(flight.of ? { of: flight.of } : {}),
    }));
    const ended = await Promise.all(
      (await keptRehearsals(state)).map(async (summary): Promise<RehearsalItem> => {
        const of = summary.kind === "rehearsal" ? undefined : (await reportOf(state, summary.id))?.of;
        return {
          id: summary.id,
          kind: summary.kind,
          job: summary.job,
          run: summary.run.id,
          status: summary.run.status,
          started: summary.run.startedAt,
          ...(of ? { of } : {}),
        };
      }),
    );
    const all = [...running, ...ended.filter((item) => !running.some((r) => r.id === item.id))];
    // Newest first by start, to the millisecond: ids made in the same second sort by their random part.
    all.sort((a, b) => b.started.localeCompare(a.started) || b.id.localeCompare(a.id));
    return c.json(safe<RehearsalsView>({ rehearsals: all }));
  });

  app.get("/api/rehearsals/:id", async (c) => {
    const id = rehearsalIdOf(c.req.param("id"));
    const state = deps.config().paths.state;
    // The daemon's own word first: a replay writes its report after its run's summary, and is done once both are.
    const flight = deps.rehearsals.flight(id);
    if (flight) {
      const { error, ...shown } = flight;
      return c.json(safe<RehearsalView>(error !== undefined ? { state: "failed", ...shown, error } : { state: "running", ...shown }));
    }
    const summary = await summaryOf(state, id);
    if (!summary) throw new ApiError(404, `no rehearsal with id "${id}"`);
    const report = summary.kind === "rehearsal" ? undefined : await reportOf(state, id);
    return c.json(safe<RehearsalView>({ state: "done", ...summary, ...(report ? { replay: report } : {}) }));
  });

  app.get("/api/rehearsals/:id/files/*", async (c) => {
    const id = rehearsalIdOf(c.req.param("id"));
    const folder = join(deps.config().paths.state, REHEARSALS_DIR, id);
    const wanted = decodeURIComponent(c.req.path.slice(c.req.path.indexOf("/files/") + "/files/".length));
    const file = await servedFile(folder, wanted);
    const text = deps.redactor().redact(await readFile(file, "utf8"));
    if (!file.endsWith(".html")) return c.text(text, 200, { "Content-Type": "text/plain; charset=utf-8" });
    // A mail's HTML is the agent's words: shown in a sandboxed frame, where it runs nothing and loads nothing.
    return c.html(text, 200, {
      "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'; sandbox",
    });
  });
}

/** A loaded job, disabled or not, or the heartbeat while it is enabled: what `countd rehearse` finds by name. */
function jobNamed(deps: RehearsalApiDeps, config: Config, name: string): Job | undefined {
  return deps.jobs.get(name) ?? builtInJobs(config).find((job) => job.name === name);
}

/** The JSON object a POST carries (an empty body is an empty object), with no field but `known`. */
async function bodyOf(c: Context<ConsoleEnv>, known: string[]): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.trim() === "") return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, `the body is not JSON: ${JSON.stringify(text.slice(0, 80))}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ApiError(400, `the body must be a JSON object, got ${JSON.stringify(body)}`);
  const unknown = Object.keys(body).filter((key) => !known.includes(key));
  if (unknown.length > 0) throw new ApiError(400, `unknown field ${unknown.map((key) => `"${key}"`).join(", ")}: give ${known.join(", ")}`);
  return body as Record<string, unknown>;
}

/** A field that is text when given; empty text is refused, as a typo rather than a choice. */
function optional(body: Record<string, unknown>, field: string, what: string): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.trim() === "") throw new ApiError(400, `${field} must be ${what}, got ${JSON.stringify(value)}`);
  return value;
}

function rehearsalIdOf(id: string): string {
  if (!ID.test(id)) throw new ApiError(404, `no rehearsal with id "${id}"`);
  return id;
}

async function summaryOf(state: string, id: string): Promise<RehearsalSummary | undefined> {
  return readJson<RehearsalSummary>(join(state, REHEARSALS_DIR, id, SUMMARY_FILE));
}

async function reportOf(state: string, id: string): Promise<ReplayReport | undefined> {
  return readJson<ReplayReport>(join(state, REHEARSALS_DIR, id, "replay.json"));
}

async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** A file in the rehearsal's deliveries/ or original/, found where it really is: a path or a link that leads out is refused. */
async function servedFile(folder: string, wanted: string): Promise<string> {
  const refused = () => new ApiError(404, `no file "${wanted}" in rehearsal ${folder.split("/").at(-1)}: give deliveries/<name>`);
  const [dir] = wanted.split("/");
  if (!SERVED_DIRS.includes(dir ?? "")) throw refused();
  let real: string;
  let root: string;
  try {
    root = await realpath(join(folder, dir!));
    real = await realpath(resolve(folder, wanted));
  } catch {
    throw refused();
  }
  const inside = relative(root, real);
  if (inside === "" || inside.startsWith("..") || isAbsolute(inside)) throw refused();
  return real;
}
