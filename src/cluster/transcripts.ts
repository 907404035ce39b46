import type { Redis } from "ioredis";
import type { Redactor } from "../audit/redact.js";
import { silentLogger, type Logger } from "../log.js";
import type { JournalEntry } from "../store/journal-entries.js";
import { access } from "node:fs/promises";
import { blobsOf, fileSink, fitLines, journalFile, readJournalFile, type JournalReading, type ReadJournal } from "../store/run-journal.js";
import { RUNS_KEPT_PER_JOB } from "../store/run-history.js";
import type { RunRecord } from "../store/run-record.js";
import { readTranscript, transcriptOf, type Transcript } from "../store/transcript.js";
import type { TranscriptStore } from "../store/transcripts.js";
import { errorText } from "../text.js";

/** A run's journal in Redis: `countd:journal:<job>:<run id>`, its lines as written; job names hold no ":", run ids neither. */
const journalsOf = (job: string) => `countd:journal:${job}:`;
const journalKey = (job: string, id: string) => `${journalsOf(job)}${id}`;
/** A text journals reference by hash (a system prompt, a rendered prompt), kept once for every run that uses it. */
const blobKey = (hash: string) => `countd:journal-blob:${hash}`;
/** A job's stored journals by start time, to keep the newest RUNS_KEPT_PER_JOB as its records are. */
const orderKey = (job: string) => `countd:journals:${job}`;

/**
 * Stores a journal and its texts for keepMs and drops the job's oldest past the cap, in one step.
 * KEYS: journal, order; ARGV: lines, keepMs, run id, start time (ms), cap, the job's key prefix, then hash and text pairs.
 */
const SAVE = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
for i = 7, #ARGV, 2 do redis.call('SET', 'countd:journal-blob:' .. ARGV[i], ARGV[i + 1], 'PX', ARGV[2]) end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do redis.call('DEL', ARGV[6] .. id) end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 0
`;

/**
 * The most a journal stored in Redis takes: entries past it are left out (its end always kept),
 * and its transcript says so. Tool results are whole, bounded by the tools' own output caps.
 */
export const STORED_JOURNAL_BYTES = 4_000_000;

/**
 * The transcripts of a cluster: a run of this node is read from its journal file, as a daemon
 * alone does; a run of another node from Redis, where that node stored the run's journal when the
 * run ended (save()). A stored journal is redacted again with the secrets as configured then; it
 * goes after retention.sessions, the age at which the node's own journal file goes, or once it is
 * not among the job's newest RUNS_KEPT_PER_JOB, as a run record goes.
 */
export class RedisTranscripts implements TranscriptStore {
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    /** `moveAside`: this node's daemon, which moves its journals' misfit lines to the quarantine file. */
    private readonly opts: { node: string; state: () => string; log?: Logger; moveAside?: boolean },
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "transcripts" });
  }

  private get reading(): JournalReading {
    return { log: this.log, moveAside: this.opts.moveAside === true };
  }

  async read(run: RunRecord): Promise<Transcript> {
    if (run.node === undefined || run.node === this.opts.node) return readTranscript(this.opts.state(), run, this.reading);
    // In progress on its node: its live messages are on the stream; its journal is stored when it ends.
    if (run.status === "running") return { steps: [] };
    if (run.status === "skipped") return transcriptOf(run, undefined);
    let text: string | null;
    let blobs: Array<string | null> = [];
    let entries: JournalEntry[] = [];
    let problems: string[] = [];
    try {
      text = await this.redis.get(journalKey(run.job, run.id));
      if (text !== null) {
        const fitted = fitLines(text.split("\n"), `Redis ${journalKey(run.job, run.id)}`);
        entries = fitted.entries;
        problems = fitted.misfits.map((misfit) => `${misfit.file} ${misfit.where}: ${misfit.problem}`);
        for (const misfit of fitted.misfits)
          this.log.warn(
            { job: run.job, runId: run.id, where: misfit.where, problem: misfit.problem },
            "journal entry in Redis cannot be used",
          );
        const hashes = blobsOf(entries);
        blobs = hashes.length > 0 ? await this.redis.mget(hashes.map(blobKey)) : [];
      }
    } catch (err) {
      return { steps: [], incomplete: `this run ran on node ${run.node}; its journal could not be read from Redis: ${errorText(err)}` };
    }
    if (text === null) {
      // Cancelled while it waited: it never started, so there is no journal to store.
      if (run.status === "cancelled" && run.iterations === 0) return { steps: [] };
      return {
        steps: [],
        incomplete: `this run ran on node ${run.node} and its journal is not in Redis: its node stores it as the run ends and it goes after retention.sessions; a node stopped before storing it leaves none`,
      };
    }
    const journal: ReadJournal = { entries, blobs: new Map(), problems };
    blobsOf(entries).forEach((hash, i) => {
      const blob = blobs[i];
      if (blob !== null && blob !== undefined) journal.blobs.set(hash, blob);
      else problems.push(`the text ${hash} it references is not in Redis`);
    });
    return transcriptOf(run, journal);
  }

  /**
   * A run that waited for an answer on another node goes on here: its journal so far, stored when
   * it began to wait, becomes this node's file first, so the run's journal reads as one.
   */
  async continueHere(job: string, id: string): Promise<void> {
    const file = journalFile(this.opts.state(), job, id);
    if (
      await access(file).then(
        () => true,
        () => false,
      )
    )
      return;
    const text = await this.redis.get(journalKey(job, id));
    if (text === null) return;
    const { entries } = fitLines(text.split("\n"), `Redis ${journalKey(job, id)}`);
    const hashes = blobsOf(entries);
    const blobs = hashes.length > 0 ? await this.redis.mget(hashes.map(blobKey)) : [];
    const sink = fileSink(this.opts.state(), job, id);
    try {
      for (const [index, hash] of hashes.entries()) if (blobs[index] != null) await sink.blob(hash, blobs[index]);
      await sink.append(`${text}\n`);
    } finally {
      sink.release();
    }
  }

  /** Stores the journal of a run of this node that ended, for `keepMs`; a failure is logged, never the run's. */
  async save(run: RunRecord, keepMs: number, redactor: Redactor): Promise<void> {
    try {
      const journal = await readJournalFile(this.opts.state(), run.job, run.id, this.reading);
      if (!journal) return;
      const lines = bounded(journal.entries).map((entry) => JSON.stringify(redactor.redactStrings(entry)));
      const texts = [...journal.blobs].flatMap(([hash, blob]) => [hash, redactor.redact(blob)]);
      const args = [lines.join("\n"), keepMs, run.id, Date.parse(run.startedAt), RUNS_KEPT_PER_JOB, journalsOf(run.job), ...texts];
      await this.redis.eval(SAVE, 2, journalKey(run.job, run.id), orderKey(run.job), ...args);
    } catch (err) {
      this.log.warn(
        { job: run.job, runId: run.id, error: errorText(err) },
        "could not store the run's journal in Redis; other nodes cannot show it",
      );
    }
  }
}

/** The entries Redis keeps: in order up to STORED_JOURNAL_BYTES, then the end; a note entry says what was left out. */
function bounded(entries: readonly JournalEntry[]): JournalEntry[] {
  let bytes = 0;
  const kept: JournalEntry[] = [];
  for (const [index, entry] of entries.entries()) {
    bytes += Buffer.byteLength(JSON.stringify(entry)) + 1;
    if (bytes > STORED_JOURNAL_BYTES) {
      const end = entries.at(-1)?.kind === "end" ? entries.at(-1) : undefined;
      const left = entries.length - index - (end ? 1 : 0);
      const note = `[${left} of the journal's ${entries.length} entries are not shown: it passed the ${STORED_JOURNAL_BYTES} bytes kept in Redis (the journal file on the run's node has them all)]`;
      return [...kept, { v: entry.v, at: entry.at, kind: "note", text: note }, ...(end ? [end] : [])];
    }
    kept.push(entry);
  }
  return kept;
}
