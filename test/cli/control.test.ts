import { spawn } from "node:child_process";
import { chmod, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, spawnCountd, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { BIN, nodeForUser } from "../support/daemon-process.js";

const JOBS = {
  slow: "prompt: slow report\n",
  daily: "prompt: daily\nschedule: '0 9 * * *'\n",
  hourly: "prompt: hourly\nevery: 1h\n",
  broken: "prompt: broken\ntimeout: soon\n",
};

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd status and the control channel", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  it("with the daemon up shows its pid, version, uptime, jobs, the run in progress, outbox, next fires and today, and exits 0; 3 once it stopped", async () => {
    mock.onMessage("slow report", { content: "Finally." }, { latency: 60_000 });
    const dir = await countdFolder(JOBS);
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    expect(await countd(["pause", "daily"])).toMatchObject({ code: 0 });
    const run = spawnCountd(dir, env, ["run", "slow"]);

    let view: StatusView | undefined;
    await vi.waitFor(
      async () => {
        const json = await countd(["status", "--json"]);
        expect(json.code).toBe(0);
        view = JSON.parse(json.stdout) as StatusView;
        expect(view.running).toHaveLength(1);
      },
      { timeout: 15_000, interval: 200 },
    );
    const { version } = JSON.parse(await readFile(join(import.meta.dirname, "../../package.json"), "utf8")) as { version: string };
    expect(view).toMatchObject({
      up: true,
      pid: daemon.child.pid,
      version,
      jobs: { loaded: 3, invalid: 1, paused: 1, paused_all: false },
      running: [{ job: "slow", reason: "manual" }],
      outbox: { pending: 0, dead: 0 },
      today: { runs: 1 },
    });
    expect(view!.next_fires.map((fire) => fire.job).sort()).toEqual(["daily", "hourly"]);
    const runId = view!.running[0]!.id;

    const shown = await countd(["status"]);
    expect(shown.code).toBe(0);
    const lines = shown.stdout.split("\n");
    expect(lines[0]).toBe(`daemon:  running (pid ${daemon.child.pid})`);
    expect(shown.stdout).toMatch(
      new RegExp(
        `^version: ${version.replace(/\./g, "\\.")}, up \\d+(\\.\\d)?s \\(since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d [+-]\\d\\d:\\d\\d\\)$`,
        "m",
      ),
    );
    expect(shown.stdout).toContain("\nloaded:  3 jobs, 1 invalid, 1 paused\n");
    expect(shown.stdout).toContain("\nrunning: 1 run\n");
    expect(shown.stdout).toMatch(
      new RegExp(`^         slow  ${runId}  since \\S+ \\S+ \\S+  iteration \\d+  tokens 0 in / 0 out  \\$0\\.0000$`, "m"),
    );
    expect(shown.stdout).toContain("\noutbox:  0 pending, 0 dead\n");
    expect(shown.stdout).toMatch(/^next:    (daily|hourly)  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d\n {9}(daily|hourly)  /m);
    expect(shown.stdout).toMatch(/^today:   1 run, 0 failures, tokens 0 in \/ 0 out, \$0\.0000$/m);
    expect(shown.stdout).toMatch(/^budget:  \$0\.0000, 0 tokens on \d{4}-\d\d-\d\d \(.+\)$/m);

    run.child.kill("SIGINT");
    expect(await run.closed).toBe(130);
    expect(await countd(["pause", "--all"])).toMatchObject({ code: 0 });
    expect((await countd(["status"])).stdout).toContain("\nloaded:  3 jobs, 1 invalid, all paused (countd resume --all)\n");

    expect(await stopDaemon(daemon)).toBe(0);
    const down = await countd(["status"]);
    expect(down.code).toBe(3);
    expect(down.stdout).toMatch(/^daemon: {2}not running/);
    expect(down.stdout).not.toContain("version:");
    expect(await countd(["status", "--json"])).toMatchObject({ code: 3, stdout: '{\n  "up": false\n}\n' });
  });

  it("a daemon that was killed left its socket and console.json: every command says it is not running, exit 3", async () => {
    const dir = await countdFolder(JOBS);
    const env = llmEnv("http://127.0.0.1:9/v1");
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    daemon.child.kill("SIGKILL");
    await daemon.exited;
    await stat(join(dir, "state", "countd.sock"));
    await stat(join(dir, "state", "console.json"));

    const status = await countd(["status"]);
    expect(status.code).toBe(3);
    expect(status.stdout).toMatch(/^daemon: {2}not running \(the lock .* names pid \d+, which has exited\)$/m);
    for (const args of [["console"], ["cancel", "20261203T090000Z-abcd"], ["follow"]]) {
      const refused = await countd(args);
      expect(refused.code, args.join(" ")).toBe(3);
      expect(refused.stderr).toMatch(/^countd: .*not running with the state directory /);
    }
  });

  it("the control socket is its owner's alone: mode 0600, and another Unix user is refused", async () => {
    const dir = await countdFolder(JOBS);
    const env = llmEnv("http://127.0.0.1:9/v1");
    daemon = await startDaemon(dir, env);
    const socket = join(dir, "state", "countd.sock");
    const info = await stat(socket);
    expect(info.isSocket()).toBe(true);
    expect(info.mode & 0o777).toBe(0o600);
    expect(info.uid).toBe(process.getuid!());
    expect((await stat(join(dir, "state", "console.token"))).mode & 0o777).toBe(0o600);
    if (process.getuid!() !== 0) return;

    // Only the socket's mode stands in the way: the folders are opened to everyone.
    await chmod(dir, 0o755);
    await chmod(join(dir, "state"), 0o755);
    const node = nodeForUser(65534);
    expect(node, "a node binary user 65534 can run").toBeDefined();
    const other = spawn(node!, [BIN, "status"], { cwd: dir, env: { PATH: process.env["PATH"] ?? "", ...env }, uid: 65534, gid: 65534 });
    let stderr = "";
    other.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((done) => other.on("close", done));
    expect(code).toBe(1);
    expect(stderr).toContain(`countd: cannot open the control socket ${socket}: permission denied`);
  });
});
