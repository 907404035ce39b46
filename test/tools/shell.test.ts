import { mkdir, readFile, realpath, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { PathGuard, ToolRefusal } from "../../src/tools/paths.js";
import type { ExecOptions } from "../../src/tools/shell.js";
import { execOn, makeSandbox, type Sandbox } from "../support/sandbox.js";

let sb: Sandbox;

beforeEach(async () => {
  sb = await makeSandbox();
});

function tool(overrides: Partial<ExecOptions> = {}) {
  return execOn(sb.workspace, overrides);
}

function exec(
  args: { command: string; working_dir?: string; timeout?: number },
  overrides: Partial<ExecOptions> = {},
  signal = new AbortController().signal,
) {
  return tool(overrides).execute(args, { sessionId: "test", workspace: sb.workspace, signal });
}

/** True while a process with this pid exists (a zombie included). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Zombies wait for their parent to reap them; dead for the test's purpose. */
async function running(pid: number): Promise<boolean> {
  if (!alive(pid)) return false;
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  return stat !== "" && !/^\d+ \(.*\) Z/.test(stat);
}

describe("exec: normal use", () => {
  it("returns stdout and stderr together with the exit code, and a non-zero exit is a normal result", async () => {
    const out = await exec({ command: "echo hello; echo oops >&2; exit 3" });
    expect(out).toContain("hello");
    expect(out).toContain("oops");
    expect(out).toMatch(/\[exit code 3\]$/);
  });

  it("runs in the workspace, with HOME set to it, and in a working_dir inside it", async () => {
    await mkdir(join(sb.workspace, "sub"));
    expect(await exec({ command: "pwd; echo $HOME" })).toBe(`${sb.workspace}\n${sb.workspace}\n[exit code 0]`);
    expect(await exec({ command: "pwd", working_dir: "sub" })).toBe(`${join(sb.workspace, "sub")}\n[exit code 0]`);
    await exec({ command: "echo made > here.txt", working_dir: "sub" });
    expect(await readFile(join(sb.workspace, "sub", "here.txt"), "utf8")).toBe("made\n");
  });

  it("refuses a working_dir outside the workspace, even with the workspace restriction off", async () => {
    const unrestricted = { guard: new PathGuard({ workspace: sb.workspace, restrictToWorkspace: false, readOnlyRoots: [] }) };
    for (const overrides of [{}, unrestricted]) {
      const err = await exec({ command: "ls", working_dir: sb.outside }, overrides).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ToolRefusal);
      expect((err as Error).message).toMatch(/^refused: .*is outside the workspace/);
    }
    await expect(exec({ command: "ls", working_dir: "../outside" })).rejects.toThrow(/outside the workspace/);
  });

  it("says so when the working_dir does not exist", async () => {
    await expect(exec({ command: "ls", working_dir: "missing" })).rejects.toThrow(
      'working_dir "missing" is not an existing folder in the workspace',
    );
  });

  it("reports (no output) and a command killed by a signal", async () => {
    expect(await exec({ command: "true" })).toBe("(no output)\n[exit code 0]");
    expect(await exec({ command: "kill -9 $$" })).toMatch(/\[killed by signal SIGKILL\]$/);
  });

  it("caps the output, keeping its start and end, and says how much was cut", async () => {
    const out = await exec({ command: "seq 1 100000" }, { maxOutputChars: 1000 });
    const total = (await exec({ command: "seq 1 100000 | wc -c" })).split("\n")[0]!;
    expect(out.startsWith("1\n2\n3\n")).toBe(true);
    expect(out).toMatch(/99999\n100000\n\[exit code 0\]$/);
    expect(out).toContain(`[... ${Number(total) - 1000} characters cut from the middle of the output ...]`);
    expect(out.length).toBeLessThan(1200);
  });

  it("stops a command at its timeout, with everything it started in the background", async () => {
    const out = await exec({ command: "sleep 100 & echo $!; sleep 200", timeout: 1 });
    expect(out).toMatch(/\[timed out after 1 s: the command and everything it started were stopped\]$/);
    const grandchild = Number(out.split("\n")[0]);
    expect(grandchild).toBeGreaterThan(0);
    await vi.waitFor(async () => expect(await running(grandchild)).toBe(false));
  });

  it("caps a requested timeout at the configured limit", async () => {
    const out = await exec({ command: "sleep 100", timeout: 3600 }, { timeoutMs: 1000 });
    expect(out).toMatch(/\[timed out after 1 s/);
  });

  it("leaves no background process behind once the command has finished", async () => {
    const out = await exec({ command: "sleep 100 >/dev/null 2>&1 & echo $!" });
    expect(out).toMatch(/\[exit code 0\]$/);
    const background = Number(out.split("\n")[0]);
    await vi.waitFor(async () => expect(await running(background)).toBe(false));
  });

  it("stops the command and its process group when the run is cancelled", async () => {
    const cancel = new AbortController();
    const pending = exec({ command: "sleep 100 & echo $! > bg.pid; wait" }, {}, cancel.signal);
    const pidFile = join(sb.workspace, "bg.pid");
    const pid = await vi.waitFor(async () => Number(await readFile(pidFile, "utf8")));
    expect(await running(pid)).toBe(true);
    cancel.abort();
    await expect(pending).rejects.toThrow("cancelled: the command and everything it started were stopped");
    await vi.waitFor(async () => expect(await running(pid)).toBe(false));
  });

  it("passes only allow-listed environment variables, plus the configured names", async () => {
    const env = { PATH: process.env.PATH, LANG: "C.UTF-8", OPENAI_API_KEY: "sk-never-shown", COUNTD_TEST_EXTRA: "passed" };
    const out = await exec({ command: "env | sort" }, { env, envNames: ["COUNTD_TEST_EXTRA"] });
    expect(out).not.toContain("sk-never-shown");
    expect(out).toContain("LANG=C.UTF-8");
    expect(out).toContain("COUNTD_TEST_EXTRA=passed");
    expect(out).toContain(`HOME=${sb.workspace}`);
  });

  it("rejects configured names it cannot honour, and an invalid deny pattern, when the tool is built", () => {
    expect(() => tool({ envNames: ["HOME"] })).toThrow('exec.env: "HOME" cannot be passed through');
    expect(() => tool({ envNames: ["NOT-A-NAME"] })).toThrow('exec.env: "NOT-A-NAME" is not an environment variable name');
    expect(() => tool({ denyPatterns: ["(unclosed"] })).toThrow('exec.denyPatterns: "(unclosed" is not a valid regular expression');
  });

  it("refuses before running: the refusal is a ToolRefusal and nothing ran", async () => {
    const err = await exec({ command: "touch ran.txt; rm -rf build" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolRefusal);
    expect((err as Error).message).toBe("refused: rm -rf build (rm with -r and -f is on the deny-list)");
    await expect(readFile(join(sb.workspace, "ran.txt"))).rejects.toThrow(/ENOENT/);
  });

  it("applies configured deny patterns to the raw line and to each unquoted command", async () => {
    await expect(exec({ command: "git push --force" }, { denyPatterns: ["git\\s+push"] })).rejects.toThrow(
      "refused: git push --force (matches the configured deny pattern /git\\s+push/)",
    );
    await expect(exec({ command: "g'i't pu\"sh\"" }, { denyPatterns: ["git\\s+push"] })).rejects.toThrow(/configured deny pattern/);
  });

  it("runs only allow-listed programs in allow-list mode", async () => {
    await writeFile(join(sb.workspace, "a.txt"), "alpha\n");
    expect(await exec({ command: "cat a.txt | grep alpha" }, { allowList: ["cat", "grep"] })).toBe("alpha\n[exit code 0]");
    await expect(exec({ command: "cat a.txt | wc -l" }, { allowList: ["cat", "grep"] })).rejects.toThrow(
      "refused: wc (not in the allow-list: cat, grep)",
    );
  });

  it("works with the workspace given through a symbolic link", async () => {
    const link = join(sb.root, "ws-link");
    await symlink(sb.workspace, link);
    const out = await exec({ command: "pwd" }, { guard: new PathGuard({ workspace: link, restrictToWorkspace: true, readOnlyRoots: [] }) });
    expect(out).toBe(`${await realpath(sb.workspace)}\n[exit code 0]`);
  });
});
