import { join } from "node:path";
import { ConfigError } from "../config/errors.js";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { createMailer } from "../delivery/email.js";
import { describeTarget, targetKey, type DeliveryTarget } from "../delivery/targets.js";
import { resolveTarget } from "../delivery/secrets.js";
import { sendTest, testMessage } from "../delivery/test-message.js";
import { jobContext } from "../jobs/context.js";
import { loadJobFile, loadJobsDir } from "../jobs/load.js";
import { daemonLogger } from "../log.js";
import { HEARTBEAT_JOB } from "../store/run-record.js";
import { EXIT } from "./output.js";
import { notRunnable } from "../jobs/not-runnable.js";

/**
 * `countd test-delivery <job>`: a test message to each distinct target of the job's `deliver`
 * and `on_failure` (`@heartbeat`: heartbeat.deliver), sent from here and now, one line on stdout
 * per target saying what became of it. Nothing is queued or recorded, so it may run beside the
 * daemon.
 */
export async function testDelivery(name: string, opts: { config?: string }): Promise<number> {
  const heartbeat = name === HEARTBEAT_JOB;
  const located = await loadConfig({ file: opts.config, needs: heartbeat ? ["deliveries"] : [] });
  const targets = distinct(heartbeat ? located.heartbeat.deliver : await jobTargets(name, located));
  if (targets.length === 0) {
    const where = heartbeat ? "heartbeat.deliver in countd.yaml lists" : `the job ${name} has no deliver: or on_failure:, so it has`;
    throw new Error(`${where} no delivery targets: nothing to test`);
  }
  // The mail server's settings, and its password, only when there is mail to send.
  const config = targets.some((target) => target.kind === "email")
    ? await loadConfig({ file: opts.config, needs: ["smtp", "deliveries"] })
    : located;
  const log = daemonLogger({ secrets: config.secrets, level: "warn", destination: 2 });
  const mailer = createMailer({
    smtp: config.smtp,
    stateDir: config.paths.state,
    timezone: config.timezone,
    attachments: config.attachments,
    log,
  });
  if (mailer.usesFiles && targets.some((target) => target.kind === "email")) {
    process.stderr.write(
      `countd: no smtp settings in countd.yaml: mail is written to ${join(config.paths.state, "mail")}/ as .eml files, as the daemon does\n`,
    );
  }
  const message = testMessage(name, new Date());
  try {
    const outcomes = await Promise.all(
      targets.map((target) => sendTest(target, message, { mailer, env: process.env, workspace: config.paths.workspace })),
    );
    for (const [index, outcome] of outcomes.entries()) {
      process.stdout.write(`${shown(targets[index]!)}: ${outcome.ok ? `ok (${outcome.detail})` : `failed: ${outcome.reason}`}\n`);
    }
    return outcomes.every((outcome) => outcome.ok) ? EXIT.ok : EXIT.failure;
  } finally {
    mailer.close();
  }
}

/**
 * The job's targets, in the order its file gives them. Read first without the environment, so a
 * job that is missing is told apart from one whose variables are unset; those are then a
 * configuration problem (exit 78), at the reference's `file:line:col`, as for `countd start`.
 */
async function jobTargets(name: string, config: Config): Promise<DeliveryTarget[]> {
  const { jobs, problems } = await loadJobsDir(config.paths.jobs, jobContext(config, null));
  const job = jobs.find((candidate) => candidate.name === name);
  if (!job) throw await notRunnable(name, config.paths.jobs, jobs, problems);
  const withEnv = await loadJobFile(job.file, jobContext(config, process.env));
  if (withEnv.problems.length > 0) throw new ConfigError(withEnv.problems);
  return [...job.deliver, ...job.onFailure];
}

/** A target in both deliver and on_failure is tested once. */
function distinct(targets: readonly DeliveryTarget[]): DeliveryTarget[] {
  const seen = new Set<string>();
  return targets.filter((target) => !seen.has(targetKey(target)) && seen.add(targetKey(target)));
}

/**
 * A mail by every address it went to, filled in (the point is to see where it went); a webhook
 * as `countd outbox` shows it, secrets redacted.
 */
function shown(target: DeliveryTarget): string {
  if (target.kind === "webhook") return describeTarget(target);
  const mail = resolveTarget(target, process.env);
  return `email to ${[...mail.to, ...mail.cc, ...mail.bcc].join(", ")}`;
}
