import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

/* The built daemon (dist/, `npm run build` first) and the state directory's lock. */

const SLOW = { timeout: 15_000, interval: 100 };

describe("countd start and the state directory's lock", () => {
  const mock = useAimock();
  let dir: string;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];
  let sleeper: ChildProcess | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-lock-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "runner:\n  shutdown_grace: 1s\ntools:\n  exec:\n    enabled: false\n");
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-lock-test-key" };
    mock.onMessage("tick", { content: "tock" });
    await writeFile(join(dir, "jobs", "ticker.yaml"), 'schedule: "* * * * * *"\nprompt: tick\n');
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
    sleeper?.kill();
    sleeper = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const lockFile = () => join(dir, "state", "countd.lock");

  async function started(): Promise<DaemonProcess> {
    const daemon = spawnDaemon(dir, env);
    daemons.push(daemon);
    await vi.waitFor(() => expect(daemon.output()).toContain("countd started"), SLOW);
    return daemon;
  }

  it("refuses a second daemon after the lock file is removed, and the first writes the file again", async () => {
    const first = await started();
    await rm(lockFile());
    const second = spawnDaemon(dir, env);
    daemons.push(second);
    expect(await second.exited).toBe(1);
    expect(second.output()).toContain(
      `countd: another countd (pid ${first.child.pid}) is already running with the state directory ${join(dir, "state")}`,
    );
    expect(second.output()).not.toContain("countd started");

    await vi.waitFor(async () => expect(await readFile(lockFile(), "utf8").catch(() => "")).toBe(`${first.child.pid}\n`), SLOW);
    expect(first.output()).toContain(
      "was removed while countd was running; this countd still holds the state directory and wrote it again",
    );
    // The first daemon goes on alone: it still fires, and stops as asked.
    const before = (await allRuns(join(dir, "state"))).length;
    await vi.waitFor(async () => expect((await allRuns(join(dir, "state"))).length).toBeGreaterThan(before), SLOW);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    await expect(readFile(lockFile())).rejects.toThrow(/ENOENT/);
  });

  it("stops cleanly and exits 1 when another live process puts its pid in the lock file, and leaves the file to it", async () => {
    const first = await started();
    sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
    await once(sleeper, "spawn");
    await writeFile(lockFile(), `${sleeper.pid}\n`);
    expect(await first.exited).toBe(1);
    expect(first.output()).toContain(
      `the lock file ${lockFile()} now names pid ${sleeper.pid}: another process took the state directory ${join(dir, "state")}; stopping`,
    );
    expect(first.output()).toContain("countd stopped");
    expect(await readFile(lockFile(), "utf8")).toBe(`${sleeper.pid}\n`);
    // No run of the stopped daemon is left running.
    expect((await allRuns(join(dir, "state"))).filter((r) => r.status === "running")).toEqual([]);
  });

  it("frees the lock when its daemon is killed: the next one starts, taking over the file left behind", async () => {
    const crashed = await started();
    crashed.child.kill("SIGKILL");
    await crashed.exited;
    expect(await readFile(lockFile(), "utf8")).toBe(`${crashed.child.pid}\n`);
    const next = await started();
    expect(await readFile(lockFile(), "utf8")).toBe(`${next.child.pid}\n`);
    next.child.kill("SIGTERM");
    expect(await next.exited).toBe(0);
  });
});
