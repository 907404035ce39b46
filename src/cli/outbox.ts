import { loadConfig } from "../config/load.js";
import { sendEntry } from "../delivery/dispatch.js";
import { createMailer } from "../delivery/email.js";
import { Outbox } from "../delivery/outbox.js";
import { describeTarget, targetKey } from "../delivery/targets.js";
import { OutboxStore, type OutboxEntry } from "../store/outbox-store.js";
import { acquireLock } from "../store/lock.js";
import { EXIT, table } from "./output.js";

/** `countd outbox`: reads the file only, so it works beside a running daemon. */
export async function listOutbox(opts: { config?: string; json?: boolean }): Promise<number> {
  const config = await loadConfig({ file: opts.config, needs: [] });
  const data = await OutboxStore.read(config.paths.state, new Date());
  const entries = Object.values(data.entries).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
    return EXIT.ok;
  }
  const rows = entries.map((entry: OutboxEntry) => [
    entry.id,
    entry.status,
    describeTarget(entry.target),
    String(entry.attempts),
    entry.status === "pending" ? entry.nextAttemptAt : "-",
    entry.lastError ?? "",
  ]);
  process.stdout.write(table(["ID", "STATUS", "TARGET", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR"], rows));
  const disabled = Object.entries(data.disabledTargets);
  if (disabled.length > 0) {
    const shown = new Map(entries.map((entry) => [targetKey(entry.target), describeTarget(entry.target)]));
    process.stdout.write(
      [
        "",
        "Disabled targets (they answered HTTP 410; nothing is sent to them):",
        ...disabled.map(([key, { at }]) => `  ${shown.get(key) ?? key}, since ${at}`),
        "Enable one again by changing its URL in the job file, by SIGHUP to the daemon, or with `countd outbox retry <id>` / `--dead`.",
        "",
      ].join("\n"),
    );
  }
  return EXIT.ok;
}

/**
 * `countd outbox retry <id> | --dead` and `countd outbox purge` change the outbox, which the
 * daemon owns while it runs: they take the state directory's lock, and send at once.
 */
export async function changeOutbox(change: "retry" | "purge", opts: { config?: string; id?: string; dead?: boolean }): Promise<number> {
  // A retry sends mail; the targets' own variables are filled in at send time.
  const config = await loadConfig({ file: opts.config, needs: change === "retry" ? ["smtp"] : [] });
  const release = await acquireLock(config.paths.state);
  const mailer = createMailer({ smtp: config.smtp, stateDir: config.paths.state, timezone: config.timezone, attachments: config.attachments });
  try {
    const outbox = await Outbox.open({ stateDir: config.paths.state, send: sendEntry(mailer, process.env) });
    try {
      if (change === "purge") {
        process.stdout.write(`${await outbox.purge()} dead deliveries removed\n`);
        return EXIT.ok;
      }
      const which = opts.dead ? "dead" : opts.id;
      if (!which) throw new Error("name a delivery id, or --dead for every dead delivery");
      const count = await outbox.retry(which);
      await outbox.runDue();
      const { pending, dead } = outbox.list();
      process.stdout.write(`${count} queued again; now ${pending.length} pending, ${dead.length} dead\n`);
      return EXIT.ok;
    } finally {
      await outbox.close();
    }
  } finally {
    mailer.close();
    await release();
  }
}
