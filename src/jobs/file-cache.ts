import { createHash } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { deserialize, serialize } from "node:v8";
import { PACKAGE_DIR, VERSION } from "../package.js";
import type { JobFile } from "./schema.js";

/*
 * What parsing and checking the schema made of each job file, kept in the state folder by the
 * file's exact text: parsing YAML and checking the schema is most of what a start-up spends on a
 * file, and a file that did not change gives the same result. Only what depends on the text
 * alone is kept; the checks against countd.yaml, the environment, the clock and the file system
 * (load.ts's toJob) run again at every read. It is countd's own file, as trusted as the state
 * folder it sits in: the agent cannot write there (docs/security.md).
 */

/** What a file's text gave: its job's fields as the schema returned them, and where its keys are. */
export interface ParsedJobFile {
  data: JobFile;
  /** `:line:col` of the `name:` value, after the file's shown name. */
  nameAt: string;
  /** `:line:col` of the `after:` key, when the job has one. */
  afterAt?: string;
}

interface Entry {
  text: string;
  parsed: ParsedJobFile;
}

interface Stored {
  key: string;
  entries: Map<string, Entry>;
}

/** Under `<state_dir>`. */
export const JOB_FILE_CACHE = "job-files.cache";

const DIGEST_BYTES = 32;

/**
 * The files of one scan of the jobs folder: looked up and added to while it reads, then written
 * back holding only the files it read, so a removed file's entry goes with it. A scan reads each
 * file once, and saves before anything uses the jobs it made: what get gives and put takes is
 * built on, not copied (a copy of every file's fields cost a first start a fifth more).
 */
export class JobFileCache {
  private readonly entries: Map<string, Entry>;
  private changed = false;

  private constructor(
    private readonly file: string,
    private readonly key: string,
    entries: Map<string, Entry>,
  ) {
    this.entries = entries;
  }

  /**
   * The cache at `file` for the code whose identity is `key`. A missing, unreadable or damaged
   * file, or one another build of countd wrote, is an empty cache: it is only ever a shortcut.
   */
  static async open(file: string, key: string): Promise<JobFileCache> {
    let entries = new Map<string, Entry>();
    try {
      const bytes = await readFile(file);
      const body = bytes.subarray(DIGEST_BYTES);
      if (bytes.length > DIGEST_BYTES && createHash("sha256").update(body).digest().equals(bytes.subarray(0, DIGEST_BYTES))) {
        const stored = deserialize(body) as Stored;
        if (stored.key === key) entries = stored.entries;
      }
    } catch {
      // Absent or unreadable: every file is parsed, and the cache written anew.
    }
    return new JobFileCache(file, key, entries);
  }

  /** What `file` gave when its text was exactly `text`. */
  get(file: string, text: string): ParsedJobFile | undefined {
    const entry = this.entries.get(file);
    return entry !== undefined && entry.text === text ? entry.parsed : undefined;
  }

  /** `parsed.data`: what the schema returned for `text`, unchanged. */
  put(file: string, text: string, parsed: ParsedJobFile): void {
    this.entries.set(file, { text, parsed });
    this.changed = true;
  }

  /**
   * Keeps the entries of `files` (the scan's), and writes the cache when that changed it; an
   * error is returned, not thrown: without the file, the next start parses every file again.
   */
  async save(files: readonly string[]): Promise<Error | undefined> {
    const keep = new Set(files);
    for (const file of this.entries.keys()) {
      if (keep.has(file)) continue;
      this.entries.delete(file);
      this.changed = true;
    }
    if (!this.changed) return undefined;
    const body = serialize({ key: this.key, entries: this.entries } satisfies Stored);
    const temp = `${this.file}.${process.pid}.tmp`;
    try {
      // The digest first: a file cut short or damaged is read as no cache, never as another job.
      await writeFile(temp, Buffer.concat([createHash("sha256").update(body).digest(), body]), { mode: 0o600 });
      await rename(temp, this.file);
      this.changed = false;
      return undefined;
    } catch (err) {
      await rm(temp, { force: true });
      return err as Error;
    }
  }
}

/**
 * The identity of the running code, or undefined when it is not the bundle (sources run through
 * tsx, or tsc's unbundled output), whose files keep their names as their code changes. The
 * bundle's chunks are named by a hash of their contents, so their names, the entry's size and
 * time, and the version change with any change to how a file is read.
 */
export function codeKey(): string | undefined {
  const dist = path.join(PACKAGE_DIR, "dist");
  if (path.dirname(fileURLToPath(import.meta.url)) !== dist) return undefined;
  const chunks = readdirSync(dist).filter((name) => name.startsWith("chunk-") && name.endsWith(".js"));
  const entry = statSync(path.join(dist, "cli.js"));
  return createHash("sha256")
    .update([VERSION, entry.size, entry.mtimeMs, ...chunks.sort()].join("\n"))
    .digest("hex");
}

/** The cache in `stateDir` for the running code; none when it is not the bundle (codeKey). */
export async function openJobFileCache(stateDir: string, key = codeKey()): Promise<JobFileCache | undefined> {
  return key === undefined ? undefined : JobFileCache.open(path.join(stateDir, JOB_FILE_CACHE), key);
}
