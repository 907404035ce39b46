import { lstat, opendir, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { localDate } from "../audit/log.js";
import type { RetentionConfig } from "../config/schema.js";
import { silentLogger, type Logger } from "../log.js";
import { SPEND_DIR } from "./spend-ledger.js";
import { JOURNAL_DIR } from "./run-journal.js";
import { sessionIdOfFile } from "../sessions/file-names.js";

/** A pass runs at start-up and then this long after the previous one ended. */
export const PRUNE_EVERY_MS = 60 * 60_000;

/**
 * Files looked at between two turns of the event loop and two readings of the sessions in use.
 * Each file costs one stat (and maybe an unlink) on libuv's thread pool, one at a time, so runs'
 * own file I/O and DNS lookups keep the other threads; the explicit turn bounds a stretch of
 * skipped names too, whatever the directory reader buffers.
 */
const BATCH = 100;

const AUDIT_FILE = /^audit-\d{4}-\d{2}-\d{2}\.jsonl$/;
const SPEND_FILE = /^\d{4}-\d{2}-\d{2}\.jsonl$/;

export interface PruneReport {
  /** Files removed, per folder. */
  sessions: number;
  toolHistory: number;
  audit: number;
  /** Spend files (one per UTC day), kept as long as the audit files whose calls they price. */
  spend: number;
  /** Run journals and the texts they reference (journal/blobs), kept as long as sessions. */
  journals: number;
  /** Files that could not be looked at or removed; the first error is logged. */
  failed: number;
}

export interface RetentionOptions {
  /** Read at every pass, so a reloaded configuration applies from the next one. */
  settings: () => { stateDir: string; logsDir: string; retention: RetentionConfig };
  /**
   * Sessions whose files stay whatever their age: those of running runs, which are being
   * written, and the sessions of `session: shared` jobs, which are the jobs' conversations
   * however long ago they last ran.
   */
  sessionsInUse: () => ReadonlySet<string>;
  log?: Logger;
  now?: () => Date;
}

interface Folder {
  key: "sessions" | "toolHistory" | "audit" | "spend" | "journals";
  dir: string;
  maxAgeMs: number;
  /** A folder of one file per day: the files it prunes. Without it, files are sessions'. */
  daily?: RegExp;
  /** Every file of the folder goes by its age alone (a job's journals; the texts, touched each time a run uses one). */
  any?: boolean;
}

/**
 * Removes run journals, session transcripts, tool history and audit files not modified for their retention period,
 * without holding up runs: one file at a time, yielding between batches. Age is the time since
 * the last write, so a long-lived session is kept while it is still appended to.
 */
export class Retention {
  private readonly now: () => Date;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<PruneReport> | undefined;
  private stopping = false;

  constructor(private readonly opts: RetentionOptions) {
    this.now = opts.now ?? (() => new Date());
    this.log = (opts.log ?? silentLogger).child({ component: "retention" });
  }

  /** A pass now, then one every PRUNE_EVERY_MS; none of them is awaited by the caller. */
  start(): void {
    void this.scheduled();
  }

  /** One pass; a call while a pass is under way gets that pass. */
  prune(): Promise<PruneReport> {
    this.pass ??= this.run().finally(() => (this.pass = undefined));
    return this.pass;
  }

  /** No new pass; the one under way ends at its next file. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.pass;
  }

  private async scheduled(): Promise<void> {
    try {
      await this.prune();
    } catch (err) {
      this.log.error({ error: (err as Error).message }, "pruning old files failed");
    }
    if (!this.stopping) this.timer = setTimeout(() => void this.scheduled(), PRUNE_EVERY_MS).unref();
  }

  private async run(): Promise<PruneReport> {
    const started = this.now();
    const { stateDir, logsDir, retention } = this.opts.settings();
    const report: PruneReport = { sessions: 0, toolHistory: 0, audit: 0, spend: 0, journals: 0, failed: 0 };
    const errors: string[] = [];
    const folders: Folder[] = [
      { key: "sessions", dir: join(stateDir, "sessions"), maxAgeMs: retention.sessionsMs },
      { key: "toolHistory", dir: join(stateDir, "tool-history"), maxAgeMs: retention.toolHistoryMs },
      { key: "audit", dir: logsDir, maxAgeMs: retention.auditMs, daily: AUDIT_FILE },
      { key: "spend", dir: join(stateDir, SPEND_DIR), maxAgeMs: retention.auditMs, daily: SPEND_FILE },
      ...(await journalFolders(stateDir)).map((dir): Folder => ({ key: "journals", dir, maxAgeMs: retention.sessionsMs, any: true })),
    ];
    for (const folder of folders) {
      if (this.stopping) break;
      const cutoff = started.getTime() - folder.maxAgeMs;
      try {
        await this.pruneFolder(folder, cutoff, started, report, errors);
      } catch (err) {
        report.failed++;
        errors.push(`${folder.dir}: ${(err as Error).message}`);
      }
    }
    const removed = report.sessions + report.toolHistory + report.audit + report.spend + report.journals;
    const fields = { ...report, durationMs: this.now().getTime() - started.getTime() };
    if (report.failed > 0) this.log.warn({ ...fields, firstError: errors[0] }, "files could not be pruned");
    if (removed > 0) this.log.info({ ...fields, removed }, "removed files older than their retention period");
    return report;
  }

  private async pruneFolder(folder: Folder, cutoff: number, now: Date, report: PruneReport, errors: string[]): Promise<void> {
    let dir;
    try {
      dir = await opendir(folder.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    // The file being written today is never old, whatever audit retention says: the audit log's
    // is named by the local day, the spend file by the UTC day.
    const today = folder.key === "audit" ? `audit-${localDate(now)}.jsonl` : `${now.toISOString().slice(0, 10)}.jsonl`;
    let seen = 0;
    let inUse = this.opts.sessionsInUse();
    for await (const entry of dir) {
      if (this.stopping) break;
      if (++seen % BATCH === 0) {
        await nextTurn();
        inUse = this.opts.sessionsInUse();
      }
      if (!entry.isFile()) continue;
      const name = entry.name;
      const path = join(folder.dir, name);
      try {
        if (folder.any) {
          if (await this.removeIfOld(path, cutoff)) report[folder.key]++;
          continue;
        }
        if (folder.daily) {
          if (folder.daily.test(name) && name !== today && (await this.removeIfOld(path, cutoff))) report[folder.key]++;
          continue;
        }
        const sessionId = sessionIdOfFile(name);
        if (sessionId === undefined) continue;
        if (!inUse.has(sessionId) && (await this.removeIfOld(path, cutoff))) report[folder.key]++;
      } catch (err) {
        // Removed meanwhile: nothing left to do.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        report.failed++;
        errors.push(`${path}: ${(err as Error).message}`);
      }
    }
  }

  private async removeIfOld(path: string, cutoff: number): Promise<boolean> {
    if ((await lstat(path)).mtimeMs >= cutoff) return false;
    await unlink(path);
    return true;
  }
}

/** The folders of `<state_dir>/journal`: one per job, and the texts' (blobs). */
async function journalFolders(stateDir: string): Promise<string[]> {
  const root = join(stateDir, JOURNAL_DIR);
  try {
    return (await readdir(root, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => join(root, entry.name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
