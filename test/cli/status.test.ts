import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

/** A PATH with node's folder only: no bwrap on it, whatever the machine has installed. */
const NO_BWRAP = { PATH: "/nonexistent" };

async function setup(yaml: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "countd-status-"));
  await writeFile(join(dir, "countd.yaml"), yaml);
  await mkdir(join(dir, "jobs"));
  await writeFile(join(dir, "jobs", "a.yaml"), "prompt: hello\nschedule: '0 9 * * *'\n");
  await writeFile(join(dir, "jobs", "b.yaml"), "prompt: hello\nenabled: false\n");
  return dir;
}

let daemon: DaemonProcess | undefined;
afterEach(async () => {
  daemon?.child.kill("SIGTERM");
  await daemon?.exited;
  daemon = undefined;
});

describe("countd status", () => {
  it("with sandbox: auto and no working bwrap says exec is not offered, why, and how to fix it", async () => {
    const dir = await setup("provider: {preset: openai}\n");
    const run = await runCountd(["status"], { cwd: dir, env: NO_BWRAP });
    // 3 when no daemon runs, as systemctl status says of a stopped unit (the console issue's requirement).
    expect(run.code).toBe(3);
    expect(run.stdout).toContain("daemon:  not running");
    expect(run.stdout).toContain(`jobs:    2 in ${join(dir, "jobs")} (1 disabled)\n`);
    expect(run.stdout).toContain(
      'sandbox: unavailable: exec is not offered to the agent: tools.exec.sandbox is "auto" and bwrap (Debian package bubblewrap) not found. Install bubblewrap (apt-get install bubblewrap)',
    );
    expect(run.stdout).toContain("or set tools.exec.sandbox: none");
  });

  it("with sandbox: none says commands run without a sandbox", async () => {
    const dir = await setup("tools: {exec: {sandbox: none}}\n");
    const run = await runCountd(["status"], { cwd: dir, env: NO_BWRAP });
    expect(run.stdout).toContain(
      "sandbox: none: exec runs without a sandbox (tools.exec.sandbox: none): the command check is a guard rail, not a boundary",
    );
  });

  it("names the running daemon, started with its API key read from a systemd credential only", async () => {
    // A free port for the console: tests running at once must not compete for 7420.
    const dir = await setup("tools: {exec: {sandbox: none}}\nconsole: {listen: '127.0.0.1:0'}\n");
    const credentials = join(dir, "credentials");
    await mkdir(credentials);
    await writeFile(join(credentials, "OPENAI_API_KEY"), "sk-from-a-credential-file\n");
    daemon = spawnDaemon(dir, { ...NO_BWRAP, CREDENTIALS_DIRECTORY: credentials });
    await vi.waitFor(() => expect(daemon!.output()).toContain("countd started"), { timeout: 15_000 });
    // At every start, not only when auto falls back.
    expect(daemon.output()).toContain("exec runs without a sandbox (tools.exec.sandbox: none)");
    // The key was never in the environment the process was started with.
    expect(await readFile(`/proc/${daemon.child.pid}/environ`, "utf8")).not.toContain("sk-from-a-credential-file");

    const run = await runCountd(["status"], { cwd: dir, env: NO_BWRAP });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`daemon:  running (pid ${daemon.child.pid})`);
  });

  it("a daemon without the key in its environment or a credential does not start", async () => {
    const dir = await setup("tools: {exec: {sandbox: none}}\n");
    const run = await runCountd(["start"], { cwd: dir, env: { ...NO_BWRAP, CREDENTIALS_DIRECTORY: join(dir, "jobs") } });
    expect(run.code).toBe(78);
    expect(run.stderr).toContain("OPENAI_API_KEY");
  });
});
