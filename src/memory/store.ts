import { appendFile, mkdir, open, readFile } from "node:fs/promises";
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

  append(source: string, text: string, date: Date = new Date()): Promise<void> {
    const entryText = foldLines(text);
    if (entryText === "") return Promise.reject(new Error("memory entry text is empty"));
    const entrySource = foldLines(source).replaceAll("|", "/");
    const line = `${localDate(date)}|${entrySource}|${entryText}\n`;
    return this.serialise(async () => {
      await mkdir(this.workspace, { recursive: true });
      // A user-edited file may lack a final newline; without one the entry would glue onto their last line.
      await appendFile(this.path, (await this.endsWithoutNewline()) ? `\n${line}` : line, "utf8");
    });
  }

  /** The last n entries, oldest first. */
  lastEntries(n: number): Promise<MemoryEntry[]> {
    return this.serialise(async () => {
      if (n <= 0) return [];
      let content: string;
      try {
        content = await readFile(this.path, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw err;
      }
      const entries: MemoryEntry[] = [];
      content.split(/\r?\n/).forEach((raw, i) => {
        const m = ENTRY.exec(raw);
        if (m) entries.push({ line: i + 1, date: m[1]!, source: m[2]!, text: m[3]! });
      });
      return entries.slice(-n);
    });
  }

  private serialise<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async endsWithoutNewline(): Promise<boolean> {
    let handle;
    try {
      handle = await open(this.path, "r");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw err;
    }
    try {
      const { size } = await handle.stat();
      if (size === 0) return false;
      const last = Buffer.alloc(1);
      await handle.read(last, 0, 1, size - 1);
      return last[0] !== 0x0a;
    } finally {
      await handle.close();
    }
  }
}
