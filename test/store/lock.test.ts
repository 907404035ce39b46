import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { acquireLock, LockHeld } from "../../src/store/lock.js";
import { captureLog } from "../support/log-capture.js";

let dir: string;
let sleeper: ChildProcess | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-lock-"));
});

afterEach(async () => {
  if (sleeper && sleeper.exitCode === null && sleeper.signalCode === null) {
    sleeper.kill();
    await once(sleeper, "exit");
  }
  sleeper = undefined;
});

/** The pid of a process that is alive for the whole test: another daemon, as far as the lock can tell. */
async function livePid(): Promise<number> {
  sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
  await once(sleeper, "spawn");
  return sleeper.pid!;
}

/** The pid of a process that has exited: a daemon that crashed and left its lock behind. */
async function deadPid(): Promise<number> {
  const child = spawn("true", { stdio: "ignore" });
  await once(child, "exit");
  return child.pid!;
}

const lockFile = () => join(dir, "countd.lock");
const REMOVED = "the lock file was removed while countd was running; this countd still holds the state directory and wrote it again";
const RENAMED = "the lock file no longer named this countd; this countd still holds the state directory and wrote it again";

describe("acquireLock", () => {
  it("refuses a second daemon while the first is alive, naming its pid and the state directory", async () => {
    const other = await livePid();
    await acquireLock(dir, other);
    const refusal = await acquireLock(dir).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(LockHeld);
    expect((refusal as LockHeld).message).toBe(`another countd (pid ${other}) is already running with the state directory ${dir}`);
    expect(await readFile(lockFile(), "utf8")).toBe(`${other}\n`);
    expect(await readdir(dir)).toEqual(["countd.lock"]);
  });

  it("refuses a second daemon that names the same state directory through a symlink, even without the file", async () => {
    const other = await livePid();
    await acquireLock(dir, other);
    const alias = `${dir}-alias`;
    await symlink(dir, alias);
    // Without the file, what refuses is the kernel lock, named after the real path.
    await rm(lockFile());
    const refusal = await acquireLock(alias).catch((err: unknown) => err);
    expect((refusal as LockHeld).message).toBe(`another countd (pid ${other}) is already running with the state directory ${alias}`);
    await rm(alias);
  });

  it("takes over a lock left by a process that no longer exists", async () => {
    const dead = await deadPid();
    await writeFile(lockFile(), `${dead}\n`);
    const release = await acquireLock(dir);
    expect(await readFile(lockFile(), "utf8")).toBe(`${process.pid}\n`);
    expect(await readdir(dir)).toEqual(["countd.lock"]);
    await release();
  });

  it("takes over a lock file that holds no pid", async () => {
    await writeFile(lockFile(), "");
    await acquireLock(dir);
    expect(await readFile(lockFile(), "utf8")).toBe(`${process.pid}\n`);
  });

  it("release removes the lock, so the next daemon starts", async () => {
    const other = await livePid();
    const release = await acquireLock(dir, other);
    await release();
    expect(await readdir(dir)).toEqual([]);
    await acquireLock(dir);
    expect(await readFile(lockFile(), "utf8")).toBe(`${process.pid}\n`);
  });

  it("creates the state directory when it does not exist yet", async () => {
    const nested = join(dir, "state", "countd");
    await acquireLock(nested);
    expect(await readFile(join(nested, "countd.lock"), "utf8")).toBe(`${process.pid}\n`);
  });

  it.each([
    ["a fresh directory", false],
    ["a directory with a stale lock", true],
  ])("lets exactly one of two daemons starting at once win, in %s", async (_, stale) => {
    const other = await livePid();
    const dead = stale ? await deadPid() : 0;
    for (let round = 0; round < 25; round++) {
      const roundDir = join(dir, `round${round}`);
      if (stale) {
        // As a crashed daemon leaves it: the file, and no process holding the kernel lock.
        await mkdir(roundDir);
        await writeFile(join(roundDir, "countd.lock"), `${dead}\n`);
        expect(await readFile(join(roundDir, "countd.lock"), "utf8")).toBe(`${dead}\n`);
      }
      const results = await Promise.allSettled([acquireLock(roundDir), acquireLock(roundDir, other)]);
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0]!.reason).toBeInstanceOf(LockHeld);
      const winner = results[0]!.status === "fulfilled" ? process.pid : other;
      expect(await readFile(join(roundDir, "countd.lock"), "utf8")).toBe(`${winner}\n`);
      expect(await readdir(roundDir)).toEqual(["countd.lock"]);
    }
  });
});

describe("acquireLock with a watch, as the daemon holds it", () => {
  function watcher() {
    const { log, lines } = captureLog();
    const taken: string[] = [];
    return { lines, taken, watch: { log, onTaken: (problem: string) => taken.push(problem) } };
  }

  it("still refuses a second daemon after the lock file is removed, and writes the file again", async () => {
    const other = await livePid();
    const { lines, taken, watch } = watcher();
    const release = await acquireLock(dir, other, watch);
    await rm(lockFile());
    const refusal = await acquireLock(dir).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(LockHeld);
    expect((refusal as LockHeld).message).toBe(`another countd (pid ${other}) is already running with the state directory ${dir}`);
    await vi.waitFor(async () => expect(await readFile(lockFile(), "utf8")).toBe(`${other}\n`), { timeout: 10_000, interval: 100 });
    expect(lines).toMatchObject([{ level: "warn", msg: REMOVED, fields: { component: "lock", lock: lockFile() } }]);
    expect(taken).toEqual([]);
    await release();
    expect(await readdir(dir)).toEqual([]);
  });

  it("writes the file again when it is emptied or names a process that no longer exists", async () => {
    const { lines, taken, watch } = watcher();
    const release = await acquireLock(dir, process.pid, watch);
    for (const content of ["", `${await deadPid()}\n`]) {
      await writeFile(lockFile(), content);
      await vi.waitFor(async () => expect(await readFile(lockFile(), "utf8")).toBe(`${process.pid}\n`), { timeout: 10_000, interval: 100 });
    }
    expect(lines).toMatchObject(
      Array.from({ length: 2 }, () => ({
        level: "warn",
        msg: RENAMED,
        fields: { component: "lock", lock: lockFile(), daemonPid: process.pid },
      })),
    );
    expect(taken).toEqual([]);
    await release();
  });

  it("says once that it cannot look while the state directory is unusable, and goes on looking after", async () => {
    const { lines, taken, watch } = watcher();
    const release = await acquireLock(dir, process.pid, watch);
    await rename(dir, `${dir}.aside`);
    await writeFile(dir, "");
    const cannot = () =>
      lines.filter(
        (line) =>
          line.level === "warn" &&
          line.msg === "could not check the lock file" &&
          line.fields["lock"] === lockFile() &&
          typeof line.fields["error"] === "string",
      );
    await vi.waitFor(() => expect(cannot()).toHaveLength(1), { timeout: 10_000, interval: 100 });
    // A few more looks fail the same way (one every 2 s) and add no line.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(cannot()).toHaveLength(1);
    await rm(dir);
    await rename(`${dir}.aside`, dir);
    await rm(lockFile());
    await vi.waitFor(async () => expect(await readFile(lockFile(), "utf8")).toBe(`${process.pid}\n`), { timeout: 10_000, interval: 100 });
    expect(lines.at(-1)).toMatchObject({ level: "warn", msg: REMOVED, fields: { lock: lockFile() } });
    expect(taken).toEqual([]);
    await release();
  });

  it("says once that the lock was taken when the file names another live process, and leaves that file alone", async () => {
    const other = await livePid();
    const { taken, watch } = watcher();
    const release = await acquireLock(dir, process.pid, watch);
    await writeFile(lockFile(), `${other}\n`);
    await vi.waitFor(
      () => expect(taken).toEqual([`the lock file ${lockFile()} now names pid ${other}: another process took the state directory ${dir}`]),
      {
        timeout: 10_000,
        interval: 100,
      },
    );
    await release();
    expect(await readFile(lockFile(), "utf8")).toBe(`${other}\n`);
    expect(taken).toHaveLength(1);
  });
});
