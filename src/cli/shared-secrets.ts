import { readFileSync } from "node:fs";
import type { Node } from "yaml";
import { formatProblem, parseYaml } from "../config/yaml-errors.js";
import { resolveSecret } from "../delivery/secrets.js";
import { displayPath } from "../jobs/load.js";
import type { Job } from "../jobs/types.js";

/**
 * `countd validate`'s warning for each job whose webhook secret an earlier job already uses (the
 * same `${VAR}`, or another variable with the same value here): whoever may fire one may fire the
 * other. countd refuses to replay one job's request to the other, since it keeps webhook-ids per
 * secret. Named at the second job's secret, naming the first.
 */
export function sharedSecretWarnings(jobs: readonly Job[], env: NodeJS.ProcessEnv): string[] {
  const firstWith = new Map<string, Job>();
  const warnings: string[] = [];
  for (const job of jobs) {
    if (!job.webhook) continue;
    const resolved = resolveSecret(job.webhook.secret, env);
    const keys = [`written ${job.webhook.secret}`, ...("secret" in resolved ? [`value ${resolved.secret}`] : [])];
    const first = keys.map((key) => firstWith.get(key)).find((found) => found !== undefined);
    for (const key of keys) if (!firstWith.has(key)) firstWith.set(key, job);
    if (!first) continue;
    const message = `warning: webhook.secret: job "${job.name}" uses the same webhook secret as job "${first.name}" (${displayPath(first.file)}): a request signed for one is valid for the other; give each job its own secret`;
    warnings.push(atSecret(job, message));
  }
  return warnings;
}

/** `message` placed on the job's `webhook.secret`; on the file alone when it cannot be read again. */
function atSecret(job: Job, message: string): string {
  const shown = displayPath(job.file);
  try {
    const { source } = parseYaml(shown, readFileSync(job.file, "utf8"));
    const node = source.doc.getIn(["webhook", "secret"], true) as Node | undefined;
    return formatProblem(source, { path: [], offset: node?.range?.[0] ?? 0, message });
  } catch {
    return `${shown}: ${message}`;
  }
}
