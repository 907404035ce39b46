import picomatch from "picomatch";
import type { ApprovalRule, ApproveSettings } from "../approvals/rules.js";
import type { Config } from "../config/schema.js";
import type { Job } from "../jobs/types.js";
import { placed } from "./file-place.js";

/** MCP tools are named mcp_<server>_<tool>; their lists may not be on record, so a rule naming one is not checked. */
const MCP_PREFIX = "mcp_";

/**
 * `countd validate`'s checks of the `approve:` blocks, beyond their schema. A problem: a block
 * that asks nobody (no `ask:`, and no `on_failure:` targets to ask instead), since its calls would
 * wait out their timeout unseen. A warning: a rule that can never match, as it names exec while
 * the job cannot run exec, or a tool the job cannot have.
 */
export function approveChecks(
  config: Config,
  jobs: readonly Job[],
  knownTools: readonly string[],
): { problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  for (const job of jobs) {
    if (!job.approve) continue;
    if (!job.approve.ask && job.onFailure.length === 0)
      problems.push(
        placed(
          job.file,
          ["approve"],
          "nobody would be asked: it has no ask: and the job has no on_failure: targets; add ask: (delivery targets, as in deliver:) or on_failure:",
          { key: true },
        ),
      );
    warnings.push(...ruleWarnings(job.file, job.approve, config, job.tools, knownTools));
  }
  const defaults = config.approve;
  if (!defaults || !config.file) return { problems, warnings };
  const unasked = jobs.filter((job) => !job.approve && job.onFailure.length === 0).map((job) => job.name);
  if (!defaults.ask && unasked.length > 0)
    problems.push(
      placed(
        config.file,
        ["approve"],
        `nobody would be asked for the ${unasked.length === 1 ? "job" : "jobs"} ${unasked.join(", ")}: it has no ask: and ${unasked.length === 1 ? "it has" : "they have"} no on_failure: targets; add ask: here, or on_failure: to ${unasked.length === 1 ? "that job" : "those jobs"}`,
        { key: true },
      ),
    );
  warnings.push(...ruleWarnings(config.file, defaults, config, undefined, knownTools));
  return { problems, warnings };
}

function ruleWarnings(
  file: string,
  approve: ApproveSettings,
  config: Config,
  jobTools: readonly string[] | undefined,
  knownTools: readonly string[],
): string[] {
  // What the job may call: every tool countd.yaml enables, narrowed by the job's tools: (globs allowed).
  const usable = knownTools.filter((name) => !jobTools || jobTools.some((listed) => picomatch.isMatch(name, listed)));
  return approve.rules.flatMap((rule, index) => {
    const why = neverMatches(rule, config, jobTools, usable);
    return why === undefined
      ? []
      : [placed(file, ["approve", "rules", index, rule.kind], `${why}: the rule never matches`, { warning: true })];
  });
}

function neverMatches(
  rule: ApprovalRule,
  config: Config,
  jobTools: readonly string[] | undefined,
  usable: readonly string[],
): string | undefined {
  if (rule.kind === "exec") {
    if (!config.tools.exec.enabled) return "the exec tool is switched off in countd.yaml (tools.exec.enabled: false)";
    return usable.includes("exec") ? undefined : `the job's tools: (${jobTools?.join(", ")}) leave exec out`;
  }
  if (rule.kind !== "tool" || rule.name.startsWith(MCP_PREFIX)) return undefined;
  if (usable.some((name) => picomatch.isMatch(name, rule.name))) return undefined;
  return `"${rule.name}" names no tool this job can have (its tools: ${usable.join(", ") || "none"})`;
}
