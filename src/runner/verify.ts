import picomatch from "picomatch";
import type { RunOutcome } from "../agent/outcome.js";
import type { EventBus } from "../events.js";
import type { Job } from "../jobs/types.js";
import { expectationProblem, type Check } from "../jobs/verify-schema.js";
import type { JournalWriter } from "../store/journal-entries.js";
import type { CommandVerdict } from "../tools/check-command.js";

/** One check's result, as journalled and shown: `index` counts from 0 in the job's `verify:` list. */
export interface CheckResult {
  index: number;
  check: Check["kind"];
  /** What was checked, as written (the command, the expectations, the tool names). */
  what: string;
  passed: boolean;
  reason?: string;
}

export interface VerifyRun {
  job: Job;
  runId: string;
  journal?: JournalWriter;
  events?: EventBus;
  /** Runs a `command:` check (tools/check-command.ts, with countd.yaml's exec settings). */
  command(command: string, answer: string, output: unknown): Promise<CommandVerdict>;
  /** Asks the agent once more in the same conversation, with `feedback` as the message. */
  again(feedback: string): Promise<RunOutcome>;
}

/**
 * A job's `verify:` checks, run on an ok outcome before the runner hands it to the dispatcher.
 * What a failure does is `on_verify_fail`'s: `fail` ends the run `error`; `retry` asks the agent
 * once more with the failed checks and checks again, failing if they still fail; `hold` and
 * `deliver_flagged` keep the run ok and mark the outcome with the failed checks, which the
 * dispatcher holds in the outbox or delivers with a flag line.
 */
export async function verifiedOutcome(first: RunOutcome, run: VerifyRun): Promise<RunOutcome> {
  const { verify } = run.job;
  if (!verify || first.status !== "ok") return first;
  const failed = await runChecks(first, run);
  if (failed.length === 0) return first;
  if (verify.onFail === "hold" || verify.onFail === "deliver_flagged") return { ...first, failedChecks: failed };
  if (verify.onFail === "fail") return failedRun(first, failed);
  const second = merged(first, await run.again(feedback(failed)));
  if (second.status !== "ok") return second;
  const still = await runChecks(second, run);
  return still.length === 0 ? second : failedRun(second, still);
}

async function runChecks(outcome: RunOutcome, run: VerifyRun): Promise<string[]> {
  const results: CheckResult[] = [];
  for (const [index, check] of run.job.verify!.checks.entries()) results.push(await runCheck(index, check, outcome, run));
  for (const result of results) {
    run.journal?.write({ kind: "verify", ...result });
    run.events?.emit("verify.checked", { job: run.job.name, runId: run.runId, check: result.check, passed: result.passed });
  }
  return results.filter((result) => !result.passed).map(describeFailure);
}

async function runCheck(index: number, check: Check, outcome: RunOutcome, run: VerifyRun): Promise<CheckResult> {
  const done = (what: string, reason: string | undefined): CheckResult => ({
    index,
    check: check.kind,
    what,
    passed: reason === undefined,
    ...(reason !== undefined ? { reason } : {}),
  });
  if (check.kind === "command") {
    const verdict = await run.command(check.command, outcome.answer, jsonOf(outcome));
    return done(check.command, verdict.passed ? undefined : verdict.reason);
  }
  if (check.kind === "tools_called") {
    const succeeded = (outcome.calls ?? []).filter((call) => !call.isError).map((call) => call.name);
    const missing = check.tools.filter((pattern) => !succeeded.some((name) => picomatch.isMatch(name, pattern)));
    return done(check.tools.join(", "), missing.length > 0 ? `no successful call of ${missing.join(", ")}` : undefined);
  }
  const what = check.expect.map((e) => e.text).join("; ");
  const value = jsonOf(outcome);
  if (value === undefined) return done(what, "the answer is not JSON");
  const problems = check.expect.map((e) => expectationProblem(e, value)).filter((p) => p !== undefined);
  return done(what, problems.length > 0 ? problems.join("; ") : undefined);
}

/** The run's JSON: its typed output, else the answer when it parses as JSON. */
function jsonOf(outcome: RunOutcome): unknown {
  if (outcome.output !== undefined) return outcome.output;
  try {
    return JSON.parse(outcome.answer) as unknown;
  } catch {
    return undefined;
  }
}

const describeFailure = (result: CheckResult) => `${result.check} ${result.what}: ${result.reason}`;

function feedback(failed: string[]): string {
  return [
    "Your answer failed these checks, which run before it is delivered:",
    ...failed.map((line) => `- ${line}`),
    "Do what is missing and answer again, in full, so that the checks pass.",
  ].join("\n");
}

function failedRun(outcome: RunOutcome, failed: string[]): RunOutcome {
  return { ...outcome, status: "error", error: `failed checks: ${failed.join(" · ")}` };
}

/** The second attempt's outcome, counting both attempts' iterations and calls (the spend already counts both). */
function merged(first: RunOutcome, second: RunOutcome): RunOutcome {
  return {
    ...second,
    iterations: first.iterations + second.iterations,
    toolCalls: first.toolCalls + second.toolCalls,
    calls: [...(first.calls ?? []), ...(second.calls ?? [])],
  };
}
