import { mkdir, mkdtemp, readFile, realpath, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";

const KEY = "sk-environ-sentinel-4711";

/**
 * Reads the start-up environment of every countd process started in `dir` (the daemon and any
 * parent it has), the way a command run with `sandbox: none` could, and keeps PATH and the key.
 */
const scan = (dir: string) =>
  'for p in /proc/[0-9]*; do case "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" in *countd.js*)' +
  ` test "$(readlink $p/cwd)" = "${dir}" && tr "\\0" "\\n" < $p/environ;; esac; done | grep -aE '^(PATH|OPENAI_API_KEY)=' > found.txt; echo scanned`;

describe("countd start with sandbox: none", () => {
  // The server answers only requests carrying the key: any other gets 401.
  const mock = useAimock({ auth: { apiKeys: [KEY] } });
  let dir: string;
  let daemon: DaemonProcess | undefined;

  beforeEach(async () => {
    dir = await realpath(await mkdtemp(join(tmpdir(), "countd-environ-")));
    await mkdir(join(dir, "jobs"));
    await writeFile(
      join(dir, "countd.yaml"),
      "runner:\n  shutdown_grace: 1s\ntools:\n  restrict_to_workspace: false\n  exec:\n    sandbox: none\n",
    );
    await writeFile(join(dir, "jobs", "scan.yaml"), 'schedule: "* * * * * *"\nprompt: scan the environment\noverlap: skip\n');
    mock.addFixture({
      match: { userMessage: "scan the environment", hasToolResult: false },
      response: { toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: scan(dir) }) }] },
    });
    mock.addFixture({ match: { userMessage: "scan the environment", hasToolResult: true }, response: { content: "Scanned." } });
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
  });

  it("hands no command the provider key through /proc/<pid>/environ, and still calls the LLM with it", async () => {
    daemon = spawnDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: KEY });
    const found = join(dir, "workspace", "found.txt");
    await vi
      .waitFor(() => readFile(found, "utf8"), { timeout: 20_000, interval: 200 })
      .catch((err: unknown) => {
        throw new Error(`${String(err)}\n${daemon!.output()}`);
      });
    await vi.waitFor(() => expect(mock.getRequests().length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 100 });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited, daemon.output()).toBe(0);

    // The scan did read the daemon's environment: PATH stays visible there, the key does not.
    const lines = (await readFile(found, "utf8")).trim().split("\n");
    expect(lines.length, lines.join("\n")).toBeGreaterThan(0);
    expect(
      lines.every((line) => line.startsWith("PATH=")),
      lines.join("\n"),
    ).toBe(true);
    expect(mock.getRequests().map((request) => request.response.status)).toEqual(mock.getRequests().map(() => 200));
  }, 60_000);

  it("leaves it out of /proc/<pid>/environ of countd run too, which runs the job itself when no daemon runs", async () => {
    const run = await runCountd(["run", "scan"], { cwd: dir, env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: KEY } });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("Scanned.");
    const lines = (await readFile(join(dir, "workspace", "found.txt"), "utf8")).trim().split("\n");
    expect(lines.length, lines.join("\n")).toBeGreaterThan(0);
    expect(
      lines.every((line) => line.startsWith("PATH=")),
      lines.join("\n"),
    ).toBe(true);
  }, 60_000);
});
