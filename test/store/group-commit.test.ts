import { constants } from "node:fs";
import { mkdtemp, open, readFile, rm, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GroupCommit } from "../../src/store/group-commit.js";

/** Lines appended to a real file, each commit one synced write of those pending; commits are counted. */
class SyncedLines {
  pending: string[] = [];
  /** The lines each commit wrote, in order. */
  batches: string[][] = [];
  commits = 0;
  failNext = false;
  readonly group = new GroupCommit(() => this.commit());
  constructor(
    readonly file: string,
    private readonly handle: FileHandle,
  ) {}

  static async open(file: string): Promise<SyncedLines> {
    return new SyncedLines(file, await open(file, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_DSYNC));
  }

  request(line: string): Promise<void> {
    this.pending.push(`${line}\n`);
    return this.group.request();
  }

  async onDisk(): Promise<string[]> {
    return (await readFile(this.file, "utf8")).split("\n").filter((line) => line !== "");
  }

  close(): Promise<void> {
    return this.handle.close();
  }

  private async commit(): Promise<void> {
    this.commits++;
    const text = this.pending.join("");
    this.batches.push(this.pending.map((line) => line.trimEnd()));
    this.pending = [];
    if (this.failNext) {
      this.failNext = false;
      throw new Error("disk full");
    }
    await this.handle.write(text);
  }
}

let dir: string;
let lines: SyncedLines;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-group-commit-"));
  lines = await SyncedLines.open(join(dir, "journal.jsonl"));
});
afterEach(async () => {
  await lines.close();
  await rm(dir, { recursive: true, force: true });
});

describe("GroupCommit", () => {
  it("resolves each of 100 concurrent changes only once its line is in the file, and they share one commit", async () => {
    const seen: boolean[] = [];
    await Promise.all(
      Array.from({ length: 100 }, (_, n) =>
        lines.request(`change ${n}`).then(async () => seen.push((await lines.onDisk()).includes(`change ${n}`))),
      ),
    );
    expect(seen).toEqual(Array.from({ length: 100 }, () => true));
    expect(lines.commits).toBe(1);
    expect(await lines.onDisk()).toHaveLength(100);
  });

  it("puts every change made while a commit runs into the next one, and none in the running one", async () => {
    const first = lines.request("first");
    await Promise.resolve();
    await Promise.resolve();
    // The first commit is under way: these wait for the one after it.
    const later = Array.from({ length: 50 }, (_, n) => `later ${n}`);
    const seen = await Promise.all([
      first.then(async () => (await lines.onDisk()).includes("first")),
      ...later.map((line) => lines.request(line).then(async () => (await lines.onDisk()).includes(line))),
    ]);
    expect(seen).toEqual([true, ...later.map(() => true)]);
    expect(lines.batches).toEqual([["first"], later]);
  });

  it("rejects exactly the changes of a failed commit with its error; a change made meanwhile goes in the next commit", async () => {
    lines.failNext = true;
    const outcome = (p: Promise<void>) =>
      p.then(
        () => "resolved",
        (err: Error) => err.message,
      );
    const failed = [outcome(lines.request("a")), outcome(lines.request("b"))];
    await Promise.resolve();
    await Promise.resolve();
    const next = outcome(lines.request("c"));
    expect(await Promise.all([...failed, next])).toEqual(["disk full", "disk full", "resolved"]);
    expect(lines.batches).toEqual([["a", "b"], ["c"]]);
    expect(await lines.onDisk()).toEqual(["c"]);
  });

  it("idle() resolves once every commit asked for so far is on disk", async () => {
    void lines.request("first");
    await Promise.resolve();
    await Promise.resolve();
    void lines.request("second");
    await lines.group.idle();
    expect(await lines.onDisk()).toEqual(["first", "second"]);
    expect(lines.commits).toBe(2);
  });
});
