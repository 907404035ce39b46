import { randomBytes } from "node:crypto";
import { access, link, mkdir, readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { z } from "zod";
import { silentLogger, type Logger } from "../log.js";
import { syncFolder, writeFileDurably, writeSynced } from "../store/durable.js";
import type { ApprovalAnswer } from "./links.js";
import { ANSWERED_STATUS, answerShape, approvalShape, readStored, suspendedRunShape } from "./shapes.js";
import type { AnsweredBy, AnswerResult, Approval, ApprovalStore, SuspendedRun } from "./types.js";

/** In the state directory: one approval's files are `<id>.json`, `<id>.answer.json` and `<id>.run.json`. */
const APPROVALS_DIR = "approvals";

/** Answered approvals older than this are dropped at open, as sessions and journals are kept 30 days. */
const KEPT_MS = 30 * 86_400_000;

/** What newApprovalId makes: anything else (a path above all) names no approval. */
const ID = /^[A-Za-z0-9_-]+$/;

type Answer = z.infer<typeof answerShape>;

/**
 * The approvals of a daemon alone, in `<state_dir>/approvals/`, shared by the daemon and the CLI.
 * The request and its run are written once; the answer is a file of its own that only its first
 * writer creates, so the first answer wins across processes with no lock and no window where an
 * answer is on disk but the approval reads as waiting.
 */
export class FileApprovals implements ApprovalStore {
  /** Damaged files already warned of: the console lists often, and one warning per file says it. */
  private readonly reported = new Set<string>();

  private constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {}

  static async open(stateDir: string, opts: { log?: Logger } = {}): Promise<FileApprovals> {
    const dir = join(stateDir, APPROVALS_DIR);
    if ((await mkdir(dir, { recursive: true })) !== undefined) await syncFolder(stateDir);
    const store = new FileApprovals(dir, opts.log ?? silentLogger);
    await store.prune(Date.now() - KEPT_MS);
    return store;
  }

  async list(): Promise<Approval[]> {
    const approvals: Approval[] = [];
    for (const id of await this.ids()) {
      const approval = await this.get(id);
      if (approval) approvals.push(approval);
    }
    return approvals.sort((a, b) => Date.parse(b.askedAt) - Date.parse(a.askedAt) || a.id.localeCompare(b.id));
  }

  async get(id: string): Promise<Approval | undefined> {
    if (!ID.test(id)) return undefined;
    const approval = await this.read(this.file(id, ""), approvalShape);
    if (!approval) return undefined;
    const answer = await this.read(this.file(id, ".answer"), answerShape);
    return answer ? { ...approval, status: ANSWERED_STATUS[answer.answer], answer } : approval;
  }

  async add(approval: Approval, run: SuspendedRun): Promise<void> {
    if (!ID.test(approval.id))
      throw new Error(`an approval's id must be letters, digits, - and _ (newApprovalId), got ${JSON.stringify(approval.id)}`);
    // The run first: an approval that can be listed, and so answered, always has its run.
    await writeFileDurably(this.file(approval.id, ".run"), JSON.stringify(run));
    await writeFileDurably(this.file(approval.id, ""), JSON.stringify(approval, null, 2));
  }

  async answer(id: string, answer: ApprovalAnswer | "timeout", by: AnsweredBy, at: Date): Promise<AnswerResult> {
    const approval = await this.get(id);
    if (!approval) return { ok: false, why: "unknown" };
    if (approval.status !== "waiting") return { ok: false, why: "answered", approval };
    const kept: Answer = { answer, via: by.via, by: by.by, ...(by.note !== undefined ? { note: by.note } : {}), at: at.toISOString() };
    if (!(await this.createOnce(this.file(id, ".answer"), JSON.stringify(kept, null, 2)))) {
      const answered = await this.get(id);
      return answered ? { ok: false, why: "answered", approval: answered } : { ok: false, why: "unknown" };
    }
    return { ok: true, approval: { ...approval, status: ANSWERED_STATUS[answer], answer: kept } };
  }

  async suspended(id: string): Promise<SuspendedRun | undefined> {
    if (!ID.test(id)) return undefined;
    return this.read(this.file(id, ".run"), suspendedRunShape);
  }

  async resumed(id: string): Promise<boolean> {
    if (!ID.test(id)) return false;
    // unlink succeeds for one caller only, whichever process it is in.
    if (!(await removed(this.file(id, ".run")))) return false;
    await syncFolder(this.dir);
    return true;
  }

  /**
   * Writes `text` to `file` unless it exists: the text is written and synced under a temporary
   * name, then linked to `file`, which fails for every writer but the first and never shows a
   * half-written file. False when another writer was first.
   */
  private async createOnce(file: string, text: string): Promise<boolean> {
    const temp = `${file}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
    try {
      await writeSynced(temp, text, "wx");
      await link(temp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw new Error(`could not record the answer in ${file}: ${(err as Error).message}`, { cause: err });
    } finally {
      await unlink(temp).catch(() => {});
    }
    await syncFolder(this.dir);
    return true;
  }

  /** Drops approvals answered before `before`, and answers whose approval is gone (a drop a crash cut short). */
  private async prune(before: number): Promise<void> {
    const names = await readdir(this.dir);
    let changed = false;
    for (const id of await this.ids(names)) {
      const approval = await this.get(id);
      if (!approval?.answer || Date.parse(approval.answer.at) >= before) continue;
      // The approval first: an answer left without it is dropped below at the next open, while an
      // approval left without its answer would read as waiting again.
      for (const suffix of ["", ".answer", ".run"] as const) changed = (await removed(this.file(id, suffix))) || changed;
    }
    for (const name of names) {
      const id = /^([A-Za-z0-9_-]+)\.answer\.json$/.exec(name)?.[1];
      // Asked of the disk now, not of the listing: an answer is made only after its approval, and
      // one made while the folder was being listed may show there without its approval.
      if (id !== undefined && !(await exists(this.file(id, "")))) changed = (await removed(join(this.dir, name))) || changed;
    }
    if (changed) await syncFolder(this.dir);
  }

  private async ids(names?: string[]): Promise<string[]> {
    return (names ?? (await readdir(this.dir))).flatMap((name) => /^([A-Za-z0-9_-]+)\.json$/.exec(name)?.[1] ?? []);
  }

  private file(id: string, suffix: "" | ".answer" | ".run"): string {
    return join(this.dir, `${id}${suffix}.json`);
  }

  /** The file's value if it fits `shape`; undefined when it is missing, or damaged, which is warned of once. */
  private async read<T>(file: string, shape: z.ZodType<T>): Promise<T | undefined> {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      this.report(file, (err as Error).message);
      return undefined;
    }
    const read = readStored(text, shape);
    if ("value" in read) return read.value;
    this.report(file, read.problem);
    return undefined;
  }

  private report(file: string, problem: string): void {
    if (this.reported.has(file)) return;
    this.reported.add(file);
    this.log.warn({ file, problem }, "an approvals file cannot be read; skipped until it is repaired or removed");
  }
}

/** Removes `file`; false when it was already gone. */
async function removed(file: string): Promise<boolean> {
  try {
    await unlink(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}
