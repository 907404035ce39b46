import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireLock, LockHeld } from "../../src/store/lock.js";

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
        await acquireLock(roundDir, dead);
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
