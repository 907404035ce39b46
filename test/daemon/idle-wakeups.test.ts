import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

/* The built daemon (dist/, `npm run build` first), idle: what `top` shows of it between fires. */

/** The times the event loop's thread went to sleep and was woken (proc(5)); machine load does not add to it. */
async function wakeups(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)![1]);
}

describe.skipIf(!existsSync("/proc/self/status"))("an idle daemon", () => {
  const mock = useAimock();
  let dir: string | undefined;
  let daemon: DaemonProcess | undefined;

  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("sleeps between its timers instead of waking a hundred times a second", async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-idle-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    enabled: false\n");
    // 1 January, 03:00: not during the test.
    await writeFile(join(dir, "jobs", "yearly.yaml"), 'schedule: "0 3 1 1 *"\nprompt: tick\n');
    daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-idle-test-key" });
    await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), { timeout: 15_000, interval: 100 });
    // Start-up's own work (the first retention pass, lazy compilation) is done by then.
    await sleep(1_000);
    const before = await wakeups(daemon.child.pid!);
    await sleep(2_000);
    // A sampling timer every 10 ms made it 200 and more; its own timers (the lock file every 2 s, the cron trigger) a handful.
    expect((await wakeups(daemon.child.pid!)) - before).toBeLessThan(40);
  });
});
