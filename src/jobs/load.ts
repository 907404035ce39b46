import { readdir } from "node:fs/promises";
import path from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { escapePath } from "tinyglobby";
import { isMap, isScalar, type Node } from "yaml";
import {
  closeKey,
  formatProblem,
  formatProblems,
  keysAt,
  nestingProblem,
  parseYaml,
  zodProblems,
  type Problem,
  type YamlSource,
} from "../config/yaml-errors.js";
import { referenceProblems } from "../delivery/secrets.js";
import { JOB_NAME, jobFileSchema, jobSchema, type JobFile } from "./schema.js";
import { FileTooLarge, readBounded } from "./read-bounded.js";
import { openJobFileCache, type JobFileCache, type ParsedJobFile } from "./file-cache.js";
import { cronProblem, parseAt } from "./schedule.js";
import { loadOutputSpec } from "./output-schema.js";
import { jobWarnings, missingBase, placeholderProblems, unsetWarning, webhookSecretProblems } from "./job-checks.js";
import type { Job, Schedule } from "./types.js";
import { chainProblems, keyLocation } from "./chains.js";
import { plural } from "../text.js";
import type { McpCatalog } from "../tools/mcp/catalog.js";
import { mayNameToolOf } from "../tools/mcp/names.js";
import { toolsMatching } from "../tools/registry.js";

export interface JobContext {
  /** Absolute; relative watch paths are taken from it. */
  workspace: string;
  /** countd.yaml's timezone, for jobs that do not name one. */
  defaultTimezone: string;
  /** When given, a job naming any other tool is refused; the commands give it (jobs/context.ts). */
  knownTools?: readonly string[];
  /**
   * The MCP servers' tools as known now (the daemon's live lists, or the listings on record for
   * the commands that start no server): a name of a server not listed yet is only warned about.
   */
  mcpTools?: () => McpCatalog | undefined;
  /**
   * Where the `${VAR}` references of delivery targets are checked (an unset one is a problem);
   * default process.env; null: not looked up, for commands that send nothing (jobs, validate).
   * Only delivery targets hold references: job files are not interpolated.
   */
  env?: NodeJS.ProcessEnv | null;
  /**
   * What an unset variable in `env` is: a problem (start, run, jobs) or a warning (validate,
   * whose environment is seldom the daemon's). Default: a problem.
   */
  unsetVariables?: "problem" | "warning";
  /**
   * countd.yaml's job_env: the only variables a job file may refer to. A file the agent managed
   * to write could otherwise send any of the daemon's variables (the provider key) to a webhook.
   */
  jobEnv: readonly string[];
  /**
   * countd.yaml's secrets: a webhook trigger's secret must name one of them, so that its value is
   * redacted from every log and never reaches a tool. Undefined: not checked.
   */
  secretNames?: readonly string[];
}

/** Far deeper than any real job (a delivery target's headers sit 4 levels down). */
export const MAX_JOB_NESTING = 64;
/** yaml's own default, stated: expanding more aliases than this is how a billion-laughs file works. */
const MAX_ALIAS_COUNT = 100;

/** What loading one file gave, kept by the registry so one changed file need not re-read the rest. */
export interface JobFileResult {
  /** Absolute. */
  file: string;
  job?: Job;
  /** `path:line:col: message` lines. */
  problems: string[];
  /** `path:line:col: warning: message` lines about a job that loads but may not do what was meant. */
  warnings: string[];
  /** `path:line:col` of the `name:` value, or of the file's start when the name comes from the file name. */
  nameAt: string;
  /** Those of `problems` that are an unset variable: `countd start` refuses to start with one. */
  unset: string[];
  /** `path:line:col` of the `after:` key, where the problems of the job's chain are placed. */
  afterAt?: string;
}

export async function loadJobFile(file: string, ctx: JobContext): Promise<{ job?: Job; problems: string[] }> {
  const { job, problems } = await readJobFile(file, ctx);
  return job ? { job, problems } : { problems };
}

/** Every job file in `dir`; an invalid file is skipped with its problems, the others load. */
export async function loadJobsDir(dir: string, ctx: JobContext): Promise<{ jobs: Job[]; problems: string[] }> {
  const listed = await listJobFiles(dir);
  if ("problem" in listed) return { jobs: [], problems: [listed.problem] };
  const { jobs, problems } = selectJobs(await readJobFiles(listed.files, ctx));
  return { jobs, problems };
}

/**
 * The jobs to run, in file order: a file's job when it loaded and its name is free, else its last
 * good version (`lastGood`, by file) when there is one and its name is free. `kept` lists those.
 */
export function selectJobs(
  results: readonly JobFileResult[],
  lastGood: ReadonlyMap<string, Job> = new Map(),
): { jobs: Job[]; problems: string[]; kept: Job[] } {
  const owner = new Map<string, string>();
  const jobs: Job[] = [];
  const problems: string[] = [];
  const kept: Job[] = [];
  for (const result of results) {
    problems.push(...result.problems);
    let job = result.job;
    const first = job && owner.get(job.name);
    if (job && first) {
      problems.push(`${result.nameAt}: name: "${job.name}" is already the name of the job in ${displayPath(first)}`);
      job = undefined;
    }
    const previous = lastGood.get(result.file);
    if (!job && previous && !owner.has(previous.name)) {
      job = previous;
      kept.push(previous);
    }
    if (job) {
      owner.set(job.name, result.file);
      jobs.push(job);
    }
  }
  const afterAt = new Map(results.map((result) => [result.file, result.afterAt ?? result.nameAt]));
  const chains = chainProblems(jobs, (job) => afterAt.get(job.file) ?? displayPath(job.file));
  problems.push(...chains.problems);
  return { jobs: jobs.filter((job) => !chains.refused.has(job.name)), problems, kept };
}

/** The job files of `dir` (*.yaml, *.yml; not hidden ones, which are editors' lock and swap files), sorted. */
export async function listJobFiles(dir: string): Promise<{ files: string[] } | { problem: string }> {
  const absolute = path.resolve(dir);
  try {
    const entries = await readdir(absolute, { withFileTypes: true });
    const names = entries.filter((entry) => !entry.isDirectory() && isJobFileName(entry.name)).map((entry) => entry.name);
    return { files: names.sort().map((name) => path.join(absolute, name)) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === "ENOENT" ? "no such folder" : code === "ENOTDIR" ? "not a folder" : `cannot read: ${(err as Error).message}`;
    // The full path: "jobs: no such folder" leaves a daemon's reader guessing which folder it looked in.
    return { problem: `${absolute}: ${reason}` };
  }
}

export function isJobFileName(file: string): boolean {
  const base = path.basename(file);
  return !base.startsWith(".") && /\.ya?ml$/.test(base);
}

/** Relative to the working directory when inside it, so messages stay short and clickable. */
export function displayPath(absolute: string): string {
  const relative = path.relative(process.cwd(), absolute);
  return relative !== "" && relative.split(path.sep)[0] !== ".." && !path.isAbsolute(relative) ? relative : absolute;
}

/**
 * Files read and parsed in one turn of the event loop; then timers and I/O get their turn, so a
 * reload of 10,000 files does not hold up a fire for the whole second and more it takes.
 */
const FILES_PER_TURN = 64;

/**
 * `files` read as readJobFile reads each, in turns of FILES_PER_TURN; the results are in the order
 * of `files`. `cache`: what earlier reads made of each file's text, looked up and added to.
 */
export async function readJobFiles(files: readonly string[], ctx: JobContext, cache?: JobFileCache): Promise<JobFileResult[]> {
  const results: JobFileResult[] = [];
  for (let start = 0; start < files.length; start += FILES_PER_TURN) {
    if (start > 0) await nextTurn();
    for (const file of files.slice(start, start + FILES_PER_TURN)) results.push(await readJobFile(file, ctx, cache));
  }
  return results;
}

/**
 * A full read of the jobs folder's `files`, through the job file cache in `stateDir` (when given,
 * and the code is the bundle's), which is then written back. `unsaved`: why it was not written
 * (no state folder before a first start, a full disk); only the next read's shortcut is lost.
 */
export async function readJobFolder(
  files: readonly string[],
  ctx: JobContext,
  stateDir: string | undefined,
): Promise<{ results: JobFileResult[]; unsaved?: Error }> {
  const cache = stateDir === undefined ? undefined : await openJobFileCache(stateDir);
  const results = await readJobFiles(files, ctx, cache);
  const unsaved = await cache?.save(files);
  return unsaved ? { results, unsaved } : { results };
}

export async function readJobFile(file: string, ctx: JobContext, cache?: JobFileCache): Promise<JobFileResult> {
  const absolute = path.resolve(file);
  const shown = displayPath(absolute);
  const failed = (problems: string[], nameAt = shown, unset: string[] = []): JobFileResult => ({
    file: absolute,
    problems: capped(shown, problems),
    warnings: [],
    nameAt,
    unset,
  });

  let text: string;
  try {
    text = readBounded(absolute);
  } catch (err) {
    // Refused unread, so its problem points at the file's start: every problem of a file's content has a position.
    const where = err instanceof FileTooLarge ? `${shown}:1:1` : shown;
    return failed([`${where}: ${(err as Error).message}`]);
  }

  const known = cache?.get(absolute, text);
  if (known) {
    const ready = await knownJob(known, absolute, shown, text, ctx);
    if (ready) return ready;
  }

  const tooDeep = mayNestTooDeep(text) ? nestingProblem(shown, text, MAX_JOB_NESTING) : undefined;
  if (tooDeep) return failed([tooDeep]);
  const parsed = parseYaml(shown, text);
  const stranger = notAJobProblem(parsed.source, parsed.syntaxErrors.length > 0);
  if (stranger) return failed([stranger]);
  if (parsed.syntaxErrors.length > 0 && !parsed.recovered) return failed(parsed.syntaxErrors);
  const source = parsed.recovered?.source ?? parsed.source;
  const nameAt = nameLocation(source);

  let data: unknown;
  try {
    data = source.doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    return failed(formatProblems(source, [{ path: [], message: `cannot be read: ${(err as Error).message}` }]), nameAt);
  }

  const problems = [...(parsed.recovered?.problems ?? []), ...triggerProblems(data)];
  const checked = jobSchema.safeParse(data);
  if (checked.success) {
    const warnings: Problem[] = [];
    const job = await toJob(checked.data, absolute, source, ctx, problems, warnings);
    if (problems.length > 0)
      return failed(
        formatProblems(source, problems),
        nameAt,
        formatProblems(
          source,
          problems.filter((problem) => problem.unset),
        ),
      );
    const afterAt = job.after ? (keyLocation(source, "after") ?? nameAt) : undefined;
    if (cache) {
      const at = (location: string) => location.slice(shown.length);
      cache.put(absolute, text, { data: checked.data, nameAt: at(nameAt), ...(afterAt !== undefined ? { afterAt: at(afterAt) } : {}) });
    }
    return loaded(job, source, warnings, nameAt, afterAt);
  }

  // The checks across fields still run on the keys that passed, so one round of fixes shows everything.
  const shape = zodProblems(checked.error, jobFileSchema);
  problems.push(...shape);
  const passed = jobSchema.safeParse(withoutKeys(data, shape));
  if (passed.success) await toJob(passed.data, absolute, source, ctx, problems, []);
  return failed(formatProblems(source, problems), nameAt);
}

/**
 * A file whose text the cache knows, completed by the checks against the context (toJob) with its
 * YAML parsed only if one of them has something to place in it. Undefined when they find a
 * problem: the file is then read in full, so its problems are reported as a first read reports them.
 */
async function knownJob(
  known: ParsedJobFile,
  file: string,
  shown: string,
  text: string,
  ctx: JobContext,
): Promise<JobFileResult | undefined> {
  let parsed: YamlSource | undefined;
  const parse = () => (parsed ??= parseYaml(shown, text).source);
  const source: YamlSource = {
    name: shown,
    text,
    get doc() {
      return parse().doc;
    },
    get lineCounter() {
      return parse().lineCounter;
    },
  };
  const problems: Problem[] = [];
  const warnings: Problem[] = [];
  const job = await toJob(known.data, file, source, ctx, problems, warnings);
  if (problems.length > 0) return undefined;
  const nameAt = `${shown}${known.nameAt}`;
  const afterAt = job.after ? (known.afterAt !== undefined ? `${shown}${known.afterAt}` : nameAt) : undefined;
  return loaded(job, source, warnings, nameAt, afterAt);
}

/** A file that gave its job with no problem: its warnings placed in `source`. */
function loaded(job: Job, source: YamlSource, warnings: Problem[], nameAt: string, afterAt: string | undefined): JobFileResult {
  return {
    file: job.file,
    job,
    problems: [],
    warnings: [...jobWarnings(job, source), ...formatProblems(source, warnings)],
    nameAt,
    unset: [],
    ...(afterAt !== undefined ? { afterAt } : {}),
  };
}

/**
 * Whether `text` holds more than MAX_JOB_NESTING of the characters that open a nested collection on
 * one line (`[`, `{`, `-`, `?`): with fewer, nestingProblem cannot find one, and its lexer pass (a
 * tenth of a job file's parse) is skipped.
 */
function mayNestTooDeep(text: string): boolean {
  let openers = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c === 0x5b || c === 0x7b || c === 0x2d || c === 0x3f) && ++openers > MAX_JOB_NESTING) return true;
  }
  return false;
}

const JOB_KEYS = keysAt(jobFileSchema, []);

/**
 * One problem for a file not meant as a job at all (notes, a link to /etc/shadow, whose lines
 * YAML reads as keys), instead of a listing of it: neither its keys nor its values are quoted.
 * A mapping with a job key, or a likely typo of one, is a job with mistakes, and is listed.
 */
function notAJobProblem(source: YamlSource, invalidYaml: boolean): string | undefined {
  const contents = source.doc.contents;
  const keys = isMap(contents) ? contents.items.map((pair) => (isScalar(pair.key) ? String(pair.key.value) : "")) : [];
  if (keys.some((key) => closeKey(key, JOB_KEYS) !== undefined)) return undefined;
  const jobKeys = "prompt:, schedule:, every:, at:, watch: …";
  if (invalidYaml) {
    return formatProblem(source, {
      path: [],
      offset: source.doc.errors[0]?.pos[0] ?? 0,
      message: `not a job file: not valid YAML, and no job key (${jobKeys}) in it`,
    });
  }
  if (keys.length === 0) return undefined;
  return formatProblem(source, {
    path: [],
    message: `not a job file: none of its ${plural(keys.length, "key")} is a job key (${jobKeys}); its content is not shown`,
  });
}

/** Checked on the keys as written, so that a bad value does not hide that there are two triggers. */
function triggerProblems(data: unknown): Problem[] {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return [];
  const given = Object.keys(data).filter((key) => key === "schedule" || key === "every" || key === "at");
  return given.slice(1).map((key) => ({
    path: [key],
    at: "key" as const,
    message: `${given[0]} is already given; use one of schedule, every and at`,
  }));
}

/** `data` without the top-level keys that have problems; a stand-in prompt, since one is required. */
function withoutKeys(data: unknown, problems: readonly Problem[]): unknown {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return data;
  const bad = new Set(problems.map((problem) => problem.path[0]));
  const rest = Object.fromEntries(Object.entries(data).filter(([key]) => !bad.has(key)));
  return bad.has("prompt") ? { ...rest, prompt: "-" } : rest;
}

/** A generated file can hold thousands of bad items; past this many, the rest are counted, not listed. */
export const MAX_PROBLEMS_PER_FILE = 20;

/** The first problems of a file, then one line at the next one's position counting the rest. */
function capped(shown: string, problems: string[]): string[] {
  if (problems.length <= MAX_PROBLEMS_PER_FILE) return problems;
  const next = problems[MAX_PROBLEMS_PER_FILE]!;
  const position = /^\d+:\d+/.exec(next.slice(shown.length + 1))?.[0] ?? "1:1";
  const rest = problems.length - MAX_PROBLEMS_PER_FILE;
  return [
    ...problems.slice(0, MAX_PROBLEMS_PER_FILE),
    `${shown}:${position}: ${rest} more ${rest === 1 ? "problem" : "problems"} in this file not shown`,
  ];
}

function nameLocation(source: YamlSource): string {
  const node = source.doc.get("name", true) as Node | undefined;
  const { line, col } = source.lineCounter.linePos(node?.range?.[0] ?? 0);
  return `${source.name}:${line}:${col}`;
}

/** The checks that need more than one field, the file system or the context; problems go to `problems`, warnings to `warnings`. */
async function toJob(
  data: JobFile,
  file: string,
  source: YamlSource,
  ctx: JobContext,
  problems: Problem[],
  warnings: Problem[],
): Promise<Job> {
  const name = data.name ?? path.basename(file).replace(/\.ya?ml$/, "");
  if (data.name === undefined && !JOB_NAME.test(name)) {
    problems.push({
      path: [],
      message: `the file name gives the job name "${name}", which is not at most 64 lowercase letters, digits, ".", "_" and "-": rename the file or set name:`,
    });
  }

  const timezone = data.timezone ?? ctx.defaultTimezone;
  if (data.trigger.schedule !== undefined) {
    const problem = cronProblem(data.trigger.schedule, timezone, new Date());
    if (problem) problems.push({ path: ["schedule"], message: problem });
  }
  const { settings } = data;
  problems.push(...placeholderProblems(settings.prompt, source, data.after !== undefined));
  const env = ctx.env === undefined ? process.env : ctx.env;
  const references = [
    ...referenceProblems(settings.deliver, env, source, ["deliver"], ctx.jobEnv),
    ...referenceProblems(settings.onFailure, env, source, ["on_failure"], ctx.jobEnv),
    ...(data.webhook ? webhookSecretProblems(data.webhook.secret, env, source, ctx) : []),
  ];
  const warnUnset = ctx.unsetVariables === "warning";
  problems.push(...references.filter((problem) => !(warnUnset && problem.unset)));
  if (warnUnset) warnings.push(...references.filter((problem) => problem.unset).map(unsetWarning));

  if (ctx.knownTools && settings.tools) {
    const mcp = ctx.mcpTools?.();
    const known = [...ctx.knownTools, ...(mcp?.tools ?? [])];
    settings.tools.forEach((tool, index) => {
      if (toolsMatching(tool, known).length > 0) return;
      const server = mcp?.unlisted.find((name) => mayNameToolOf(tool, name));
      if (server === undefined) {
        problems.push({ path: ["tools", index], message: `unknown tool "${tool}" (known: ${known.join(", ")})` });
        return;
      }
      const at = (source.doc.getIn(["tools", index], true) as Node | undefined)?.range?.[0];
      const message = `warning: tools[${index}]: "${tool}" is not checked: the tools of the MCP server "${server}" have not been listed (countd mcp lists them)`;
      warnings.push({ path: [], message, ...(at !== undefined ? { offset: at } : {}) });
    });
  }

  const output = data.output && loadOutputSpec(data.output, file, problems);
  let watch: Job["watch"];
  if (data.watch) {
    const paths = data.watch.paths;
    const missing = await Promise.all(paths.map((pattern) => missingBase(pattern, ctx.workspace)));
    missing.forEach((problem, index) => {
      if (problem) problems.push({ path: ["watch", "paths", index], message: problem });
    });
    watch = {
      ...data.watch,
      // The workspace is escaped so that a folder name like "[work]" is not read as a glob.
      paths: paths.map((pattern) => (path.isAbsolute(pattern) ? pattern : path.join(escapePath(ctx.workspace), pattern))),
    };
  }

  return {
    ...settings,
    name,
    file,
    timezone,
    schedule: toSchedule(data.trigger, timezone),
    watch,
    ...(data.webhook ? { webhook: data.webhook } : {}),
    ...(data.after ? { after: data.after } : {}),
    ...(output ? { output } : {}),
  };
}

function toSchedule(trigger: JobFile["trigger"], timezone: string): Schedule | undefined {
  if (trigger.schedule !== undefined) return { kind: "cron", expression: trigger.schedule };
  if (trigger.every !== undefined) return { kind: "every", intervalMs: trigger.every };
  if (trigger.at !== undefined) return { kind: "at", date: parseAt(trigger.at, timezone) };
  return undefined;
}
