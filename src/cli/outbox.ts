import { openBackend, withBackend } from "../backend/open.js";
import type { Backend } from "../backend/types.js";
import { ownDeliveries } from "../delivery/own-deliveries.js";
import { jobContext } from "../jobs/context.js";
import { loadConfig } from "../config/load.js";
import type { Config } from "../config/schema.js";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { sendEntry } from "../delivery/dispatch.js";
import { redactedSend } from "../delivery/redacted-send.js";
import { Redactor } from "../audit/redact.js";
import { createMailer, type Mailer } from "../delivery/email.js";
import { describeTarget, targetKey } from "../delivery/targets.js";
import type { OutboxEntry } from "../store/outbox-store.js";
import { acquireLock } from "../store/lock.js";
import { findDaemon } from "./control.js";
import { EXIT, table } from "./output.js";
import { setting } from "./setting.js";
import { deliveryOwner } from "../console/views.js";
import { loadJobsDir } from "../jobs/load.js";
import { zoneOf } from "../jobs/zones.js";
import { shownTime } from "../time.js";

/**
 * `countd outbox`: the backend's outbox, read only, so it works beside a running daemon (a shared
 * one lists every daemon's deliveries, whichever sent or queued each).
 */
export async function listOutbox(opts: { config?: string; json?: boolean }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const { entries: all, disabledTargets } = await withBackend(config, (backend) => backend.readOutbox());
  const entries = Object.values(all).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
    return EXIT.ok;
  }
  const zone = zoneOf(config, (await loadJobsDir(config.paths.jobs, ctx)).jobs);
  // A held delivery waits for `countd outbox release`, not for a time; its reason stands where an error would.
  const rows = entries.map((entry: OutboxEntry) => [
    entry.id,
    entry.held !== undefined && entry.status === "pending" ? "held" : entry.status,
    describeTarget(entry.target),
    String(entry.attempts),
    entry.status === "pending" && entry.held === undefined ? shownTime(entry.nextAttemptAt, zone(deliveryOwner(entry.id).job)) : "-",
    entry.lastError ?? entry.held ?? "",
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

/**
 * `countd outbox retry <id> | --dead` and `countd outbox purge`. Beside a running daemon the outbox
 * is the daemon's: the change goes through its control socket and the daemon sends what was
 * retried. Without one, the command takes the state directory's lock, changes the journal and
 * sends at once. A shared outbox (several daemons on one backend) is changed beside the running
 * daemons, and the command sends what it retried itself, as one more of them. Only a retry of an email delivery, sent
 * here, needs the mail server's settings (and their variables).
 */
export async function changeOutbox(change: Change, opts: { config?: string; id?: string; dead?: boolean }): Promise<number> {
  const which = opts.dead ? "dead" : opts.id;
  if (change === "retry" && !which) throw new Error("name a delivery id, or --dead for every dead delivery");
  if (change === "release" && !opts.id) throw new Error("name the id of a held delivery (countd outbox lists them)");
  const located = await loadConfig({ file: opts.config, needs: [] });
  const backend = await openBackend(located, { role: "command" });
  try {
    return await changeWith(backend, change, which, opts.config, located);
  } finally {
    await backend.close();
  }
}

/** `release`: a held delivery (on_verify_fail: hold) is sent now. */
type Change = "retry" | "purge" | "release";

async function changeWith(
  backend: Backend,
  change: Change,
  which: string | undefined,
  file: string | undefined,
  located: Config,
): Promise<number> {
  const daemon = backend.sharedOutbox ? undefined : await findDaemon(located.paths.state);
  if (daemon) {
    if (change === "purge") {
      const { purged } = await daemon.call<{ purged: number }>("POST", "/api/outbox/purge");
      process.stdout.write(`${removed(purged)}\n`);
      return EXIT.ok;
    }
    if (change === "release") {
      await daemon.call("POST", `/api/outbox/${encodeURIComponent(which!)}/release`);
      process.stdout.write(`${which} released; the daemon sends it now (countd outbox shows what is left)\n`);
      return EXIT.ok;
    }
    const { retried } = await daemon.call<{ retried: number }>("POST", `/api/outbox/${encodeURIComponent(which!)}/retry`);
    process.stdout.write(
      `${retried} queued again; the daemon sends ${retried === 1 ? "it" : "them"} now (countd outbox shows what is left)\n`,
    );
    return EXIT.ok;
  }
  const mails =
    change !== "purge" &&
    (await backend.readOutbox()).entries.some(
      (entry) => entry.target.kind === "email" && (which === "dead" ? entry.status === "dead" : entry.id === which),
    );
  const config = mails ? await loadConfig({ file, needs: ["smtp"] }) : located;
  const release = backend.sharedOutbox ? async () => {} : await acquireLock(config.paths.state);
  const mailer = createMailer({
    smtp: config.smtp,
    stateDir: config.paths.state,
    timezone: config.timezone,
    attachments: config.attachments,
  });
  try {
    const outbox = await openOutbox(backend, config, mailer);
    try {
      if (change === "purge") {
        process.stdout.write(`${removed(await outbox.purge())}\n`);
        return EXIT.ok;
      }
      if (change === "release") {
        await outbox.release(which!);
        await outbox.runDue();
        const delivered = await outbox.deliveredAt(which!);
        process.stdout.write(
          delivered ? `${which} released and delivered\n` : `${which} released; not delivered yet (countd outbox shows why)\n`,
        );
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

async function openOutbox(backend: Backend, config: Config, mailer: Mailer): Promise<DeliveryOutbox> {
  const redactor = new Redactor(config.secrets);
  const send = redactedSend(sendEntry(mailer, process.env), () => redactor);
  // A retry of a shared outbox's delivery sent here goes to this machine's job files' targets, as a daemon's would.
  const { jobs } = await loadJobsDir(config.paths.jobs, jobContext(config, null));
  const own = ownDeliveries(
    (name) => jobs.find((job) => job.name === name),
    () => config,
  );
  return backend.outbox(send, own);
}
