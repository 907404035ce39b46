import { watch, type FSWatcher } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";

export interface FolderWatchOptions {
  dir: string;
  /** Which file names in the folder count; events for the others are dropped. */
  accept: (file: string) => boolean;
  /** A counted file was added or changed, or removed; called once its writes have settled. */
  onFile: (file: string, event: "changed" | "removed") => void;
  /** The folder appeared, went away or was replaced: every file is to be read again. */
  onFolder: () => void;
  onError: (err: Error) => void;
  /** How long a file must go without events before it is read: editors write in several steps. */
  settleMs?: number;
  /** How often a missing folder is looked for. */
  lookForMs?: number;
}

/**
 * Follows the files of one folder through a single inotify watch on the folder itself. chokidar
 * places one more watch on every file, so 10,000 job files would pass the common limit of 8,192
 * (`fs.inotify.max_user_watches`) and the daemon would stop seeing its own jobs. While the folder
 * is missing (not made yet, or removed by a checkout) it is looked for every `lookForMs` instead.
 */
export class FolderWatch {
  private watcher: FSWatcher | undefined;
  private lookFor: NodeJS.Timeout | undefined;
  private readonly settling = new Map<string, NodeJS.Timeout>();
  private readonly settleMs: number;
  private readonly lookForMs: number;
  private closed = false;

  constructor(private readonly opts: FolderWatchOptions) {
    this.settleMs = opts.settleMs ?? 100;
    this.lookForMs = opts.lookForMs ?? 1_000;
  }

  /** Watches from now on: a change made after start() returns is seen. */
  start(): void {
    this.attach();
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    clearTimeout(this.lookFor);
    for (const timer of this.settling.values()) clearTimeout(timer);
    this.settling.clear();
  }

  private attach(): boolean {
    try {
      const watcher = watch(this.opts.dir);
      watcher.on("change", (_kind, name) => this.event(typeof name === "string" ? name : undefined));
      watcher.on("error", (err) => {
        this.detach();
        this.opts.onError(err);
      });
      this.watcher = watcher;
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") this.opts.onError(err as Error);
      this.detach();
      return false;
    }
  }

  /** Drops the watch and looks for the folder until it is there again. */
  private detach(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.closed || this.lookFor) return;
    this.lookFor = setInterval(() => {
      if (!this.attach()) return;
      clearInterval(this.lookFor);
      this.lookFor = undefined;
      this.opts.onFolder();
    }, this.lookForMs);
  }

  private event(name: string | undefined): void {
    if (this.closed) return;
    // inotify names the folder itself when it is removed or moved; the watch is dead after that,
    // even when a folder of the same name is made at once (a checkout), so it is set up anew.
    if (name === undefined || name === path.basename(this.opts.dir)) {
      this.watcher?.close();
      this.watcher = undefined;
      this.attach();
      this.opts.onFolder();
      return;
    }
    if (!this.opts.accept(name)) return;
    const file = path.join(this.opts.dir, name);
    clearTimeout(this.settling.get(file));
    this.settling.set(
      file,
      setTimeout(() => {
        this.settling.delete(file);
        void this.settled(file);
      }, this.settleMs),
    );
  }

  private async settled(file: string): Promise<void> {
    const found = await stat(file).then(
      (stats) => stats.isFile(),
      () => false,
    );
    if (!this.closed) this.opts.onFile(file, found ? "changed" : "removed");
  }
}
