import { validateJobs } from "../jobs/validate.js";
import { approveChecks } from "./approve-checks.js";
import { EXIT } from "./output.js";
import { setting } from "./setting.js";
import { sharedSecretWarnings } from "./shared-secrets.js";
import { unpricedModelWarnings } from "./unpriced.js";

/**
 * `countd validate`: every problem of every job file as `path:line:col: message`, and a warning
 * for each unpriced model, each webhook secret two jobs share and each variable a delivery names
 * that is unset here, and the approve: blocks' checks (approve-checks.ts). Only a warning:
 * validate is run where the daemon's environment (a unit's EnvironmentFile) is seldom loaded.
 */
export async function validate(opts: { config?: string; jobs?: string }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const result = await validateJobs(opts.jobs ?? config.paths.jobs, { ...ctx, env: process.env, unsetVariables: "warning" }, (jobs) => {
    const approvals = approveChecks(config, jobs, ctx.knownTools ?? []);
    return {
      problems: approvals.problems,
      warnings: [...unpricedModelWarnings(config, jobs, process.env), ...sharedSecretWarnings(jobs, process.env), ...approvals.warnings],
    };
  });
  result.lines.forEach((line) => process.stderr.write(`${line}\n`));
  process.stdout.write(`${result.summary}\n`);
  return result.ok ? EXIT.ok : EXIT.failure;
}
