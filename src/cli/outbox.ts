import { openClusterOutbox } from "../cluster/outbox.js";
import { NO_DELIVERIES, ownDeliveries } from "../cluster/own-deliveries.js";
import { jobContext } from "../jobs/context.js";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { sendEntry } from "../delivery/dispatch.js";
import { redactedSend } from "../delivery/redacted-send.js";
import { Redactor } from "../audit/redact.js";
import { createMailer, type Mailer } from "../delivery/email.js";
import { Outbox } from "../delivery/outbox.js";
import { describeTarget, targetKey } from "../delivery/targets.js";
import { OutboxStore, type DisabledTarget, type OutboxEntry } from "../store/outbox-store.js";
import { acquireLock } from "../store/lock.js";
import { findDaemon } from "./control.js";
import { EXIT, table } from "./output.js";
import { setting } from "./reports.js";
import { deliveryOwner } from "../console/views.js";
import { loadJobsDir } from "../jobs/load.js";
import { zoneOf } from "../jobs/zones.js";
import { shownTime } from "../time.js";

/**
 * `countd outbox`: in a cluster, the cluster's outbox in Redis, whichever node sent or queued each
 * delivery; otherwise this node's journal, read only, so it works beside a running daemon.
 */
export async function listOutbox(opts: { config?: string; json?: boolean }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const { entries: all, disabledTargets } = await readOutbox(config);
  const entries = Object.values(all).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
    return EXIT.ok;
  }
  const zone = zoneOf(config, (await loadJobsDir(config.paths.jobs, ctx)).jobs);
  const rows = entries.map((entry: OutboxEntry) => [
    entry.id,
    entry.status,
    describeTarget(entry.target),
    String(entry.attempts),
    entry.status === "pending" ? shownTime(entry.nextAttemptAt, zone(deliveryOwner(entry.id).job)) : "-",
    entry.lastError ?? "",
  ]);
  process.stdout.write(table(["ID", "STATUS", "TARGET", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR"], rows));
  const disabled = Object.entries(disabledTargets);
  if (disabled.length > 0) {
    const shown = new Map(entries.map((entry) => [targetKey(entry.target), describeTarget(entry.target)]));
    process.stdout.write(
      [
        "",
        "Disabled targets (they answered HTTP 410; nothing is sent to them):",
        // A target is no one job's: countd.yaml's zone.
        ...disabled.map(([key, { at }]) => `  ${shown.get(key) ?? key}, since ${shownTime(at, config.timezone)}`),
        "Enable one again by changing its URL in the job file, by SIGHUP to the daemon, or with `countd outbox retry <id>` / `--dead`.",
        "",
      ].join("\n"),
    );
  }
  return EXIT.ok;
}

async function readOutbox(config: Config): Promise<{ entries: OutboxEntry[]; disabledTargets: Record<string, DisabledTarget> }> {
  if (!config.cluster) {
    const data = await OutboxStore.read(config.paths.state, new Date());
    return { entries: Object.values(data.entries), disabledTargets: data.disabledTargets };
  }
  const outbox = await openClusterOutbox(config.cluster, () => Promise.reject(new Error("`countd outbox` sends nothing")), NO_DELIVERIES);
  try {
    const { pending, dead } = await outbox.list();
    return { entries: [...pending, ...dead], disabledTargets: await outbox.disabledSince() };
  } finally {
    await outbox.close();
  }
}

/**
 * `countd outbox retry <id> | --dead` and `countd outbox purge`. Beside a running daemon the outbox
 * is the daemon's: the change goes through its control socket and the daemon sends what was
 * retried. Without one, the command takes the state directory's lock, changes the journal and
 * sends at once. The cluster's outbox is shared: the command changes it beside the running daemons
 * and sends what it retried itself, as one more of them. Only a retry of an email delivery, sent
 * here, needs the mail server's settings (and their variables).
 */
export async function changeOutbox(change: "retry" | "purge", opts: { config?: string; id?: string; dead?: boolean }): Promise<number> {
  const which = opts.dead ? "dead" : opts.id;
  if (change === "retry" && !which) throw new Error("name a delivery id, or --dead for every dead delivery");
  const located = await loadConfig({ file: opts.config, needs: [] });
  const daemon = located.cluster ? undefined : await findDaemon(located.paths.state);
  if (daemon) {
    if (change === "purge") {
      const { purged } = await daemon.call<{ purged: number }>("POST", "/api/outbox/purge");
      process.stdout.write(`${removed(purged)}\n`);
      return EXIT.ok;
    }
    const { retried } = await daemon.call<{ retried: number }>("POST", `/api/outbox/${encodeURIComponent(which!)}/retry`);
    process.stdout.write(
      `${retried} queued again; the daemon sends ${retried === 1 ? "it" : "them"} now (countd outbox shows what is left)\n`,
    );
    return EXIT.ok;
  }
  const mails =
    change === "retry" &&
    (await readOutbox(located)).entries.some(
      (entry) => entry.target.kind === "email" && (which === "dead" ? entry.status === "dead" : entry.id === which),
    );
  const config = mails ? await loadConfig({ file: opts.config, needs: ["smtp"] }) : located;
  const release = config.cluster ? async () => {} : await acquireLock(config.paths.state);
  const mailer = createMailer({
    smtp: config.smtp,
    stateDir: config.paths.state,
    timezone: config.timezone,
    attachments: config.attachments,
  });
  try {
    const outbox = await openOutbox(config, mailer);
    try {
      if (change === "purge") {
        process.stdout.write(`${removed(await outbox.purge())}\n`);
        return EXIT.ok;
      }
      const count = await outbox.retry(which!);
      await outbox.runDue();
      const { pending, dead } = await outbox.counts();
      process.stdout.write(`${count} queued again; now ${pending} pending, ${dead} dead\n`);
      return EXIT.ok;
    } finally {
      await outbox.close();
    }
  } finally {
    mailer.close();
    await release();
  }
}

const removed = (count: number) => `${count} dead ${count === 1 ? "delivery" : "deliveries"} removed`;

async function openOutbox(config: Config, mailer: Mailer): Promise<DeliveryOutbox> {
  const redactor = new Redactor(config.secrets);
  const send = redactedSend(sendEntry(mailer, process.env), () => redactor);
  if (!config.cluster) return Outbox.open({ stateDir: config.paths.state, send });
  // A retry sent here goes to this machine's job files' targets, as a daemon's would.
  const { jobs } = await loadJobsDir(config.paths.jobs, jobContext(config, null));
  const own = ownDeliveries(
    (name) => jobs.find((job) => job.name === name),
    () => config,
  );
  return openClusterOutbox(config.cluster, send, own);
}
