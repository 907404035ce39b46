import { stat } from "node:fs/promises";
import path from "node:path";
import picomatch from "picomatch";
import { isScalar, type Node } from "yaml";
import { formatPath, formatProblem, type Problem, type YamlSource } from "../config/yaml-errors.js";
import { secretReferenceProblems } from "../delivery/secrets.js";
import { PLACEHOLDERS, UPSTREAM_PLACEHOLDERS, unknownPlaceholders } from "./template.js";
import type { Job } from "./types.js";
import { shownTime } from "../time.js";

/*
 * Checks of a job's parts that its schema cannot make: its secret's variables, its prompt's
 * placeholders, its watch folders, and what loads but may not do what was meant.
 */

const SECRET_NAME = /\$\{([A-Za-z_][A-Za-z0-9_]*)/g;

/** The secret's references checked as a delivery secret's are, and each variable must be one of countd.yaml's secrets. */
export function webhookSecretProblems(
  secret: string,
  env: NodeJS.ProcessEnv | null,
  source: YamlSource,
  ctx: { jobEnv: readonly string[]; secretNames?: readonly string[] | undefined },
): Problem[] {
  const at = ["webhook", "secret"];
  const problems = secretReferenceProblems(secret, env, source, at, ctx.jobEnv);
  if (problems.length > 0 || !ctx.secretNames) return problems;
  const secretNames = ctx.secretNames;
  return [...secret.matchAll(SECRET_NAME)]
    .map((match) => match[1]!)
    .filter((name) => !secretNames.includes(name))
    .map((name) => ({
      path: at,
      message: `environment variable ${name} is not listed in secrets (countd.yaml): list it there, so that its value is redacted from logs and never reaches a tool`,
    }));
}

/** An unset variable as `countd validate` reports it: on the reference, the daemon's environment being another. */
export function unsetWarning(problem: Problem): Problem {
  const message = `warning: ${formatPath(problem.path)}: ${problem.message} here: countd start and countd run refuse the job unless their environment sets it`;
  return {
    path: problem.offset === undefined ? problem.path : [],
    message,
    ...(problem.offset !== undefined ? { offset: problem.offset } : {}),
  };
}

/** What loads but may not do what was meant: a one-shot `at:` that has passed; a webhook secret written in the file. */
export function jobWarnings(job: Job, source: YamlSource): string[] {
  const warnings: string[] = [];
  const { schedule } = job;
  if (schedule?.kind === "at" && schedule.date.getTime() <= Date.now()) {
    const node = source.doc.get("at", true) as Node | undefined;
    const at = node?.range?.[0] ?? 0;
    // As the user wrote it, so they find it in the file; then as the job's clock reads it.
    const written = node?.range ? source.text.slice(node.range[0], node.range[1]).replace(/^["']|["']$/g, "") : schedule.date.toISOString();
    const message = `warning: at: ${written} (${shownTime(schedule.date, job.timezone)}) is in the past: the job fires only as a catch-up run, if countd starts within catch_up of it`;
    warnings.push(formatProblem(source, { path: [], offset: at, message }));
  }
  if (job.webhook && !job.webhook.secret.includes("${")) {
    const at = (source.doc.getIn(["webhook", "secret"], true) as Node | undefined)?.range?.[0] ?? 0;
    const message =
      "warning: webhook.secret is written in the job file, where secrets do not belong: write ${VAR} and list VAR in job_env and secrets (countd.yaml)";
    warnings.push(formatProblem(source, { path: [], offset: at, message }));
  }
  return warnings;
}

/**
 * Unknown `{{…}}` in the prompt, placed on the placeholder itself when the source shows it verbatim.
 * `upstream`: the job has `after:`, so its `{{upstream.…}}` are known.
 */
export function placeholderProblems(prompt: string, source: YamlSource, upstream = false): Problem[] {
  const unknown = unknownPlaceholders(prompt, upstream);
  // A file read from the cache is parsed only when there is something to place in it.
  if (unknown.length === 0) return [];
  const node = source.doc.get("prompt", true);
  const [start, end] = isScalar(node) && node.range ? node.range : [undefined, undefined];
  const raw = start !== undefined ? source.text.slice(start, end) : "";
  let from = 0;
  const known = [...PLACEHOLDERS, ...(upstream ? UPSTREAM_PLACEHOLDERS : [])].map((name) => `{{${name}}}`);
  if (upstream) known.push("{{upstream.output.<path>}}");
  return unknown.map(({ text, why }) => {
    const found = raw.indexOf(text, from);
    if (found >= 0) from = found + text.length;
    return {
      path: ["prompt"],
      ...(found >= 0 && start !== undefined ? { offset: start + found } : {}),
      message: why ? `placeholder ${text}: ${why}` : `unknown placeholder ${text} (known: ${known.join(", ")})`,
    };
  });
}

/**
 * A watch sees nothing when the folder its glob starts from does not exist: most likely a typo.
 * The glob is split as the watch trigger splits it (picomatch).
 */
export async function missingBase(pattern: string, workspace: string): Promise<string | undefined> {
  const { base, isGlob } = picomatch.scan(pattern, { unescape: true });
  // A plain path may name a file that is yet to come: its folder must exist.
  const folder = path.resolve(workspace, isGlob ? base : path.dirname(base));
  try {
    return (await stat(folder)).isDirectory() ? undefined : `${folder} is not a folder`;
  } catch {
    return `the folder ${folder} does not exist`;
  }
}
