import { silentLogger, type Logger } from "../log.js";
import type { Stats } from "node:fs";
import { realpath } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import { watch, type FSWatcher } from "chokidar";
import picomatch from "picomatch";
import type { EventBus } from "../events.js";
import type { Job, WatchEvent } from "../jobs/types.js";
import type { FireRequest } from "../runner/types.js";
import { jobOfSession } from "../runner/session-ids.js";
import { isInside, relativeInside } from "../inside.js";
import { errorText } from "../text.js";

export interface WatchTriggerOptions {
  fire: (req: FireRequest) => void;
  events: EventBus;
  log?: Logger;
  /** How long a file's size must stay unchanged before its event counts (chokidar's awaitWriteFinish). */
  stabilityMs?: number;
}

/** A batch waits at most this many debounce periods, so a never-ending trickle of events still runs. */
const MAX_WAIT_DEBOUNCES = 10;
/** How long a file a job's run wrote stays its own if chokidar never reports the write. */
const OWN_WRITE_MS = 10_000;

/** One glob of a job, split where its first glob character starts. */
interface Pattern {
  /** Absolute, real path of the fixed folders (or the file) in front of the glob. */
  base: string;
  /** The nearest existing folder at or above `base`: what chokidar watches. */
  watchFrom: string;
  /** Tests a path relative to `base`; undefined: `base` names a file or a whole folder. */
  match?: (rel: string) => boolean;
  /** How many folders below `base` a match can lie; Infinity for globstars, braces and extglobs. */
  maxFolderDepth: number;
  signature: string;
}

interface WatchedJob {
  name: string;
  events: ReadonlySet<WatchEvent>;
  debounceMs: number;
  patterns: Pattern[];
}

/** Changed files waiting to become one run of a job. */
interface Batch {
  files: Set<string>;
  firstAt: number;
  lastAt: number;
  timer?: NodeJS.Timeout;
}

interface RootWatcher {
  watcher: FSWatcher;
  /** The globs it was set up for: its `ignored` filter decided which files chokidar tracks. */
  signature: string;
}

/**
 * Fires watch jobs when files matching their globs are added, changed or removed. chokidar 5
 * has no globs, so each glob is split into a fixed base folder and a picomatch pattern; one
 * chokidar watcher per outermost folder, whose `ignored` filter keeps chokidar from tracking
 * files no glob matches and from descending into folders that cannot hold a match.
 */
export class WatchTrigger {
  private readonly fire: (req: FireRequest) => void;
  private readonly log: Logger;
  private readonly stabilityMs: number;
  private readonly unsubscribe: () => void;
  private jobs = new Map<string, WatchedJob>();
  private watchers = new Map<string, RootWatcher>();
  private readonly batches = new Map<string, Batch>();
  /** Per job: files its own runs wrote, until chokidar reports that write (or the mark expires). */
  private readonly ownWrites = new Map<string, Map<string, number>>();
  private configuring: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(opts: WatchTriggerOptions) {
    this.fire = opts.fire;
    this.log = (opts.log ?? silentLogger).child({ component: "watch" });
    this.stabilityMs = opts.stabilityMs ?? 500;
    this.unsubscribe = opts.events.on("file.written", ({ sessionId, path }) => this.ownWrite(sessionId, path));
  }

  /** Takes the current job list (start-up and every hot reload); resolves once the watchers are live. */
  set(jobs: Job[]): Promise<void> {
    const applied = this.configuring.then(() => this.apply(jobs));
    this.configuring = applied.catch(() => {});
    return applied;
  }

  /** Stops watching; batches still waiting are dropped. */
  async close(): Promise<void> {
    this.closed = true;
    await this.configuring;
    this.unsubscribe();
    for (const batch of this.batches.values()) clearTimeout(batch.timer);
    this.batches.clear();
    await Promise.all([...this.watchers.values()].map(({ watcher }) => watcher.close()));
    this.watchers.clear();
  }

  private async apply(jobs: Job[]): Promise<void> {
    if (this.closed) return;
    const next = new Map<string, WatchedJob>();
    for (const job of jobs) {
      if (!job.enabled || !job.watch || job.watch.paths.length === 0) continue;
      next.set(job.name, {
        name: job.name,
        events: new Set(job.watch.events),
        debounceMs: job.watch.debounceMs,
        patterns: await Promise.all(job.watch.paths.map((glob) => this.pattern(job.name, glob))),
      });
    }
    for (const name of this.jobs.keys()) {
      if (!next.has(name)) this.forget(name);
    }
    this.jobs = next;
    await this.rewatch();
  }

  private async pattern(job: string, glob: string): Promise<Pattern> {
    const scan = picomatch.scan(resolve(glob), { unescape: true });
    const { real, missing } = await nearestReal(scan.base);
    if (missing) {
      this.log.warn(
        { job, glob, missing: join(real, missing), watching: real },
        "the folder in front of the glob does not exist yet; watching the nearest existing one for it to appear",
      );
    }
    return {
      base: join(real, missing),
      watchFrom: real,
      match: scan.glob ? picomatch(scan.glob) : undefined,
      maxFolderDepth: scan.glob && !/\*\*|[{(]/.test(scan.glob) ? scan.glob.split("/").length - 1 : Infinity,
      signature: `${join(real, missing)}\0${scan.glob}`,
    };
  }

  /** Starts a watcher for every outermost folder, keeps the unchanged ones, closes the rest. */
  private async rewatch(): Promise<void> {
    const patterns = [...this.jobs.values()].flatMap((job) => job.patterns);
    const froms = [...new Set(patterns.map((p) => p.watchFrom))].sort((a, b) => a.length - b.length);
    const roots: string[] = [];
    for (const from of froms) {
      if (!roots.some((root) => isInside(from, root))) roots.push(from);
    }
    const previous = this.watchers;
    const current = new Map<string, RootWatcher>();
    const starting: Promise<void>[] = [];
    for (const root of roots) {
      const under = patterns.filter((p) => isInside(p.watchFrom, root));
      const signature = [...new Set(under.map((p) => p.signature))].sort().join("\n");
      const kept = previous.get(root);
      if (kept?.signature === signature) {
        current.set(root, kept);
        continue;
      }
      const watcher = this.startWatcher(root, under);
      current.set(root, { watcher, signature });
      starting.push(new Promise((ready) => watcher.once("ready", () => ready())));
    }
    this.watchers = current;
    await Promise.all(starting);
    const stopped = [...previous].filter(([root, entry]) => current.get(root) !== entry);
    await Promise.all(stopped.map(([, { watcher }]) => watcher.close()));
    if (starting.length > 0 || stopped.length > 0) {
      this.log.info({ folders: roots, jobs: this.jobs.size }, "watching folders for watch jobs");
    }
  }

  private startWatcher(root: string, patterns: Pattern[]): FSWatcher {
    const watcher = watch(root, {
      ignoreInitial: true,
      awaitWriteFinish: { stabilityThreshold: this.stabilityMs },
      // chokidar asks once without stats; only with them can a folder be told from a file.
      ignored: (path: string, stats?: Stats) => stats !== undefined && !wanted(patterns, path, stats),
    });
    watcher.on("add", (path) => this.fileEvent("add", path));
    watcher.on("change", (path) => this.fileEvent("change", path));
    watcher.on("unlink", (path) => this.fileEvent("unlink", path));
    watcher.on("error", (err) => this.log.error({ folder: root, error: errorText(err) }, "watching a folder failed"));
    return watcher;
  }

  private fileEvent(kind: WatchEvent, path: string): void {
    for (const job of this.jobs.values()) {
      if (!job.patterns.some((p) => matches(p, path))) continue;
      if (this.consumeOwnWrite(job.name, kind, path)) continue;
      if (job.events.has(kind)) this.collect(job, path);
    }
  }

  private ownWrite(sessionId: string, path: string): void {
    const name = jobOfSession(sessionId);
    const job = name === undefined ? undefined : this.jobs.get(name);
    if (!job || !job.patterns.some((p) => matches(p, path))) return;
    let writes = this.ownWrites.get(job.name);
    if (!writes) this.ownWrites.set(job.name, (writes = new Map()));
    const now = Date.now();
    for (const [written, until] of writes) {
      if (until < now) writes.delete(written);
    }
    writes.set(path, now + OWN_WRITE_MS + this.stabilityMs);
  }

  /**
   * The first add or change chokidar reports after a run wrote the file is that write; it is
   * dropped and the mark with it, so a later change by anyone else triggers again.
   */
  private consumeOwnWrite(job: string, kind: WatchEvent, path: string): boolean {
    const writes = this.ownWrites.get(job);
    const until = writes?.get(path);
    if (!writes || until === undefined) return false;
    writes.delete(path);
    if (writes.size === 0) this.ownWrites.delete(job);
    return kind !== "unlink" && until >= Date.now();
  }

  private collect(job: WatchedJob, path: string): void {
    const now = Date.now();
    let batch = this.batches.get(job.name);
    if (!batch) this.batches.set(job.name, (batch = { files: new Set(), firstAt: now, lastAt: now }));
    batch.files.add(path);
    batch.lastAt = now;
    this.arm(job.name, batch);
  }

  /** One timer per batch, re-armed when it wakes early, rather than reset on each of thousands of events. */
  private arm(name: string, batch: Batch): void {
    const job = this.jobs.get(name);
    if (!job || batch.timer) return;
    batch.timer = setTimeout(() => this.due(name, batch), Math.max(0, dueAt(job, batch) - Date.now()));
  }

  private due(name: string, batch: Batch): void {
    batch.timer = undefined;
    const job = this.jobs.get(name);
    if (!job || this.closed) return;
    if (dueAt(job, batch) > Date.now()) {
      this.arm(name, batch);
      return;
    }
    this.batches.delete(name);
    const files = [...batch.files].sort();
    this.log.info({ job: name, files: files.length }, "job fires for changed files");
    try {
      this.fire({ job: name, reason: "watch", scheduledAt: new Date(), files });
    } catch (err) {
      this.log.error({ job: name, error: errorText(err) }, "handing the job to the runner failed");
    }
  }

  private forget(name: string): void {
    clearTimeout(this.batches.get(name)?.timer);
    this.batches.delete(name);
    this.ownWrites.delete(name);
  }
}

function dueAt(job: WatchedJob, batch: Batch): number {
  return Math.min(batch.lastAt + job.debounceMs, batch.firstAt + MAX_WAIT_DEBOUNCES * job.debounceMs);
}

function matches(p: Pattern, path: string): boolean {
  const rel = relativeInside(path, p.base);
  return rel !== undefined && (p.match === undefined || p.match(rel));
}

/** Whether chokidar should track this path: a file some glob matches, or a folder on the way to one. */
function wanted(patterns: Pattern[], path: string, stats: Stats): boolean {
  if (stats.isFile()) return patterns.some((p) => matches(p, path));
  if (!stats.isDirectory()) return true;
  return patterns.some((p) => {
    if (isInside(p.base, path)) return true;
    const rel = relativeInside(path, p.base);
    return rel !== undefined && rel.split(sep).length <= p.maxFolderDepth;
  });
}

/** The real path of the nearest existing folder at or above `path`, and the part below it that is missing. */
async function nearestReal(path: string): Promise<{ real: string; missing: string }> {
  try {
    return { real: await realpath(path), missing: "" };
  } catch (err) {
    const parent = dirname(path);
    if (parent === path) throw err;
    const found = await nearestReal(parent);
    return { real: found.real, missing: join(found.missing, basename(path)) };
  }
}
