import { resolveSecret } from "../delivery/secrets.js";
import { displayPath } from "../jobs/load.js";
import type { Job } from "../jobs/types.js";
import { placed } from "./file-place.js";

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
    const message = `job "${job.name}" uses the same webhook secret as job "${first.name}" (${displayPath(first.file)}): a request signed for one is valid for the other; give each job its own secret`;
    warnings.push(placed(job.file, ["webhook", "secret"], message, { warning: true }));
  }
  return warnings;
}
