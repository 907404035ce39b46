import { appendFile, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";

export interface MemoryEntry {
  /** 1-based line number in MEMORY.md. */
  line: number;
  /** YYYY-MM-DD */
  date: string;
  source: string;
  text: string;
}

const ENTRY = /^(\d{4}-\d{2}-\d{2})\|([^|]*)\|(.*)$/;

const foldLines = (s: string): string => s.replace(/\s*[\r\n]+\s*/g, " ").trim();

/** Lines in a file's text; a final line break ends the last line rather than starting another. */
function countLines(content: string): number {
  if (content === "") return 0;
  return content.split("\n").length - (content.endsWith("\n") ? 1 : 0);
}

function localDate(date: Date): string {
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/**
 * The workspace's MEMORY.md: one `YYYY-MM-DD|source|text` entry per line. Lines in another shape
 * (headings or notes the user wrote) stay in the file and are simply not entries.
 */
export class MemoryStore {
  readonly path: string;
  /** Appends and reads run one after another, so concurrent appends never interleave. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly workspace: string) {
    this.path = join(workspace, "MEMORY.md");
  }

  /** Appends one entry and returns it with the line it landed on. */
  append(source: string, text: string, date: Date = new Date()): Promise<MemoryEntry> {
    const entryText = foldLines(text);
    if (entryText === "") return Promise.reject(new Error("memory entry text is empty"));
    const entrySource = foldLines(source).replaceAll("|", "/");
    const entry = { date: localDate(date), source: entrySource, text: entryText };
    const line = `${entry.date}|${entry.source}|${entry.text}\n`;
    return this.serialise(async () => {
      await mkdir(this.workspace, { recursive: true });
      const content = await this.content();
      // A user-edited file may lack a final newline; without one the entry would glue onto their last line.
      const gap = content !== "" && !content.endsWith("\n") ? "\n" : "";
      await appendFile(this.path, gap + line, "utf8");
      return { line: countLines(content + gap) + 1, ...entry };
    });
  }

  /** The last n entries, oldest first. */
  lastEntries(n: number): Promise<MemoryEntry[]> {
    return this.read({ last: n });
  }

  /**
   * Entries by their line in the file: `start`..`end` (inclusive, 1-based, either open-ended),
   * or the `last` n; oldest first.
   */
  read(range: { start?: number; end?: number } | { last: number }): Promise<MemoryEntry[]> {
    return this.serialise(async () => {
      const entries = await this.entries();
      if ("last" in range) return range.last > 0 ? entries.slice(-range.last) : [];
      const { start = 1, end = Infinity } = range;
      return entries.filter((e) => e.line >= start && e.line <= end);
    });
  }

  /**
   * Entries whose text or source holds the keywords (case-insensitive): any of them ("or") or
   * all of them ("and"); newest first, at most `limit`.
   */
  search(keywords: string[], opts: { mode: "or" | "and"; limit: number }): Promise<MemoryEntry[]> {
    const words = keywords.map((k) => k.trim().toLowerCase()).filter((k) => k !== "");
    if (words.length === 0) return Promise.reject(new Error("no keywords to search memory for"));
    return this.serialise(async () => {
      const hits = (await this.entries()).filter((e) => {
        const haystack = `${e.source}\n${e.text}`.toLowerCase();
        return opts.mode === "and" ? words.every((w) => haystack.includes(w)) : words.some((w) => haystack.includes(w));
      });
      // Dates order the entries; within one day, the later line was written later.
      hits.sort((a, b) => (a.date === b.date ? b.line - a.line : a.date < b.date ? 1 : -1));
      return hits.slice(0, Math.max(0, opts.limit));
    });
  }

  private async entries(): Promise<MemoryEntry[]> {
    const entries: MemoryEntry[] = [];
    (await this.content()).split(/\r?\n/).forEach((raw, i) => {
      const m = ENTRY.exec(raw);
      if (m) entries.push({ line: i + 1, date: m[1]!, source: m[2]!, text: m[3]! });
    });
    return entries;
  }

  /** MEMORY.md's text; "" before the first entry. */
  private async content(): Promise<string> {
    try {
      return await readFile(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
      throw err;
    }
  }

  private serialise<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
