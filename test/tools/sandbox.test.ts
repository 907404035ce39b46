import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { MemoryStore } from "../../src/memory/store.js";
import { openRuntime } from "../../src/runtime.js";
import { builtinTools } from "../../src/tools/builtin.js";
import { ToolRefusal } from "../../src/tools/paths.js";
import { bwrapArgs, detectSandbox, hiddenPaths } from "../../src/tools/sandbox.js";
import type { ExecOptions } from "../../src/tools/shell.js";
import { execOn, makeSandbox, type Sandbox } from "../support/sandbox.js";
import { hasSystemPackage } from "../support/system-package.js";
import { listenLoopback } from "../support/loopback.js";

const bwrapWorks = await hasSystemPackage("bubblewrap", import.meta.filename);

describe("bwrapArgs", () => {
  const spec = { workspace: "/srv/ws", cwd: "/srv/ws/sub", network: false, readOnly: ["/srv/inbox"], hidden: [] };

  it("binds the system read-only, the workspace read-write, a private /tmp, and no network", () => {
    const args = bwrapArgs(spec).join(" ");
    expect(args).toContain("--ro-bind / /");
    expect(args).toContain("--tmpfs /tmp");
    expect(args).toContain("--ro-bind-try /srv/inbox /srv/inbox");
    expect(args).toContain("--bind /srv/ws /srv/ws");
    expect(args).toContain("--unshare-all");
    expect(args).not.toContain("--share-net");
    expect(args).toContain("--die-with-parent");
    expect(args).toContain("--chdir /srv/ws/sub");
    // The workspace is bound after the private /tmp, or a workspace under /tmp would vanish.
    expect(args.indexOf("--bind /srv/ws")).toBeGreaterThan(args.indexOf("--tmpfs /tmp"));
  });

  it("shares the network only when asked, and masks hidden folders and files after the workspace bind", () => {
    const args = bwrapArgs({
      ...spec,
      network: true,
      hidden: [
        { path: "/srv/ws/.state", isDir: true },
        { path: "/etc/countd.yaml", isDir: false },
      ],
    }).join(" ");
    expect(args).toContain("--share-net");
    expect(args).toContain("--tmpfs /srv/ws/.state");
    expect(args).toContain("--ro-bind /dev/null /etc/countd.yaml");
    expect(args.indexOf("--tmpfs /srv/ws/.state")).toBeGreaterThan(args.indexOf("--bind /srv/ws"));
  });

  it("refuses to hide a folder that holds the workspace", () => {
    expect(() => bwrapArgs({ ...spec, hidden: [{ path: "/srv", isDir: true }] })).toThrow(
      "exec: the hidden path /srv contains the workspace /srv/ws",
    );
  });
});

describe("hiddenPaths", () => {
  it("hides the entries of a folder that holds the workspace or a read-only root, down to them, and survives a link loop", async () => {
    const base = await realpath(await mkdtemp(join(tmpdir(), "countd-hide-")));
    await mkdir(join(base, "data", "workspace"), { recursive: true });
    await mkdir(join(base, "data", "other"));
    await mkdir(join(base, "inbox"));
    await mkdir(join(base, "jobs"));
    await writeFile(join(base, ".env"), "KEY=x\n");
    await symlink(base, join(base, "data", "loop"));
    const hidden = await hiddenPaths([base], [join(base, "data", "workspace"), join(base, "inbox")]);
    expect(hidden.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: join(base, ".env"), isDir: false },
      { path: join(base, "data", "other"), isDir: true },
      { path: join(base, "jobs"), isDir: true },
    ]);
    await rm(base, { recursive: true });
  });
});

describe("hiddenPaths of linked files", () => {
  it("hides the targets of a hidden folder's links, but not a kept path, and passes over dangling links and loops", async () => {
    const base = await realpath(await mkdtemp(join(tmpdir(), "countd-hide-links-")));
    await mkdir(join(base, "jobs"));
    await mkdir(join(base, "checkout", "more"), { recursive: true });
    await mkdir(join(base, "workspace"));
    await writeFile(join(base, "checkout", "hook.yaml"), "x\n");
    await symlink(join(base, "checkout", "hook.yaml"), join(base, "jobs", "hook.yaml"));
    await symlink(join(base, "checkout", "more"), join(base, "jobs", "more"));
    await symlink(join(base, "workspace"), join(base, "jobs", "ws"));
    await symlink(join(base, "nowhere"), join(base, "jobs", "dangling.yaml"));
    await symlink(join(base, "jobs", "loop.yaml"), join(base, "jobs", "loop.yaml"));
    const hidden = await hiddenPaths([join(base, "jobs")], [join(base, "workspace")]);
    expect(hidden.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: join(base, "checkout", "hook.yaml"), isDir: false },
      { path: join(base, "checkout", "more"), isDir: true },
      { path: join(base, "jobs"), isDir: true },
    ]);
    await rm(base, { recursive: true });
  });
});

describe("detectSandbox", () => {
  let savedPath: string | undefined;
  beforeEach(() => {
    savedPath = process.env.PATH;
  });
  afterEach(() => {
    process.env.PATH = savedPath;
  });

  it("none means no sandbox, with a warning for every start", async () => {
    expect(await detectSandbox("none")).toEqual({
      kind: "none",
      warning:
        "exec runs without a sandbox (tools.exec.sandbox: none): the command check is a guard rail, not a boundary; " +
        "a command can read and change whatever the countd user can",
    });
  });

  it("auto without bwrap fails closed: exec is unavailable, saying why and how to fix it; bwrap without it is an error", async () => {
    process.env.PATH = "/nonexistent";
    expect(await detectSandbox("auto")).toEqual({
      kind: "unavailable",
      reason:
        'exec is not offered to the agent: tools.exec.sandbox is "auto" and bwrap (Debian package bubblewrap) not found. ' +
        "Install bubblewrap (apt-get install bubblewrap) so commands run sandboxed, or set tools.exec.sandbox: none " +
        "to run them without a sandbox, or tools.exec.enabled: false to silence this",
    });
    await expect(detectSandbox("bwrap")).rejects.toThrow('exec.sandbox is "bwrap" but bwrap (Debian package bubblewrap) not found');
  });

  it("auto without bwrap: the runtime does not offer exec, says why, and a job naming exec is told so", async () => {
    process.env.PATH = "/nonexistent";
    const dir = await mkdtemp(join(tmpdir(), "countd-no-bwrap-"));
    const env = { OPENAI_API_KEY: "sk-test" };
    const runtime = await openRuntime(await loadConfig({ cwd: dir, env }), env);
    try {
      expect(runtime.toolNames).not.toContain("exec");
      expect(runtime.toolNames).toContain("read_file");
      expect(runtime.warnings).toEqual([expect.stringContaining("exec is not offered to the agent")]);
      expect(() => runtime.loop({ toolNames: ["read_file", "exec"] })).toThrow(
        "the exec tool is not offered: no sandbox is available to it",
      );
    } finally {
      await runtime.close();
    }
  });

  it("auto without bwrap: the exec tool itself refuses to run a command", async () => {
    process.env.PATH = "/nonexistent";
    const sb = await makeSandbox();
    const before = await sb.snapshot();
    const err = await execOn(sb.workspace, { sandbox: "auto" })
      .execute(
        { command: `echo pwned > ${sb.outside}/secret.txt` },
        { sessionId: "test", workspace: sb.workspace, signal: new AbortController().signal },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolRefusal);
    expect((err as Error).message).toMatch(/^refused: exec is not offered to the agent/);
    expect(await sb.snapshot()).toBe(before);
  });

  it.runIf(bwrapWorks)("picks bwrap when it can create a sandbox", async () => {
    expect(await detectSandbox("auto")).toEqual({ kind: "bwrap" });
    expect(await detectSandbox("bwrap")).toEqual({ kind: "bwrap" });
  });
});

describe.runIf(bwrapWorks)("exec inside bwrap", () => {
  let sb: Sandbox;
  beforeEach(async () => {
    sb = await makeSandbox();
  });

  /** The workspace restriction is off, so what is tested is the sandbox, not the command check. */
  function exec(command: string, overrides: Partial<ExecOptions> = {}) {
    return execOn(sb.workspace, { restrict: false, sandbox: "bwrap", ...overrides }).execute(
      { command },
      { sessionId: "test", workspace: sb.workspace, signal: new AbortController().signal },
    );
  }

  it("can write inside the workspace", async () => {
    expect(await exec("echo inside > made.txt && cat made.txt")).toBe("inside\n[exit code 0]");
    expect(await readFile(join(sb.workspace, "made.txt"), "utf8")).toBe("inside\n");
  });

  it("cannot write outside the workspace: not in the sentinel folder, not in the read-only system", async () => {
    const before = await sb.snapshot();
    const out = await exec(`echo pwned > ${sb.outside}/secret.txt; rm -f ${sb.outside}/nested/deep.txt; touch ${sb.outside}/new`);
    expect(out).not.toMatch(/\[exit code 0\]$/);
    expect(await sb.snapshot()).toBe(before);

    // Outside /tmp (which is private in the sandbox), the host's files are visible but read-only.
    const host = await mkdtemp(join("/var/tmp", "countd-readonly-"));
    try {
      await writeFile(join(host, "keep.txt"), "host sentinel\n");
      const attempt = await exec(`cat ${host}/keep.txt; echo pwned > ${host}/keep.txt; touch ${host}/new`);
      expect(attempt).toContain("host sentinel");
      expect(attempt).toContain("Read-only file system");
      expect(await readdir(host)).toEqual(["keep.txt"]);
      expect(await readFile(join(host, "keep.txt"), "utf8")).toBe("host sentinel\n");
    } finally {
      await rm(host, { recursive: true });
    }
  });

  it("has a private /tmp: a file written there never reaches the host's /tmp", async () => {
    const name = `countd-sandbox-probe-${process.pid}-${Date.now()}`;
    expect(await exec(`echo x > /tmp/${name} && cat /tmp/${name}`)).toBe("x\n[exit code 0]");
    await expect(readFile(join("/tmp", name))).rejects.toThrow(/ENOENT/);
    // The host's /tmp (which holds the sentinel) is not visible either.
    expect(await exec(`ls ${sb.outside}`)).toMatch(/No such file or directory/);
  });

  it("hides the state folder and the config file", async () => {
    // Outside /tmp, which is hidden anyway, so the mask itself is what is tested.
    const base = await mkdtemp(join("/var/tmp", "countd-hidden-"));
    try {
      const state = join(base, "state");
      const config = join(base, "countd.yaml");
      await mkdir(state);
      await writeFile(join(state, "runs.json"), "STATE SENTINEL");
      await writeFile(config, "apiKey: CONFIG SENTINEL");
      const command = `ls ${state}; cat ${config}`;
      const visible = await exec(command);
      expect(visible).toContain("runs.json");
      expect(visible).toContain("CONFIG SENTINEL");
      const hidden = await exec(command, { hiddenPaths: [state, config] });
      expect(hidden).not.toContain("runs.json");
      expect(hidden).not.toContain("SENTINEL");
    } finally {
      await rm(base, { recursive: true });
    }
  });

  it("hides a state folder even inside the workspace", async () => {
    await mkdir(join(sb.workspace, ".state"));
    await writeFile(join(sb.workspace, ".state", "runs.json"), "STATE SENTINEL");
    expect(await exec("cat .state/runs.json", { hiddenPaths: [join(sb.workspace, ".state")] })).toMatch(/No such file or directory/);
  });

  it("hides the jobs folder and the configuration's folder, keeping the workspace inside it visible", async () => {
    // The default layout, outside /tmp (hidden anyway): countd.yaml, .env, jobs/ and workspace/ side by side.
    const base = await realpath(await mkdtemp(join("/var/tmp", "countd-layout-")));
    try {
      // The workspace restriction is off, so what is tested is the sandbox, not the command check.
      await writeFile(join(base, "countd.yaml"), "tools:\n  restrict_to_workspace: false\n  exec:\n    sandbox: bwrap\n");
      await writeFile(join(base, ".env"), "OPENAI_API_KEY=ENV SENTINEL\n");
      await mkdir(join(base, "jobs"));
      await writeFile(join(base, "jobs", "hook.yaml"), "deliver: {webhook: 'https://hooks.example/JOBS SENTINEL'}\n");
      await writeFile(join(base, "notes.txt"), "NOTES SENTINEL\n");
      const config = await loadConfig({ cwd: base, env: {} });
      const exec = builtinTools(config, new MemoryStore(config.paths.workspace)).get("exec")!;
      await mkdir(config.paths.workspace, { recursive: true });
      await writeFile(join(config.paths.workspace, "mine.txt"), "WORKSPACE FILE\n");
      const out = await exec.execute(
        {
          command: `cat ${base}/.env ${base}/jobs/hook.yaml ${base}/notes.txt ${base}/countd.yaml; echo "jobs: [$(ls -A ${base}/jobs)]"; cat mine.txt`,
        },
        { sessionId: "test", workspace: config.paths.workspace, signal: new AbortController().signal },
      );
      expect(out).not.toContain("SENTINEL");
      expect(out).toContain("jobs: []");
      expect(out).not.toContain("sandbox: bwrap");
      expect(out).toContain("WORKSPACE FILE");
    } finally {
      await rm(base, { recursive: true });
    }
  });

  it("hides the job files the jobs folder links to, where they really are, and every other link's target there", async () => {
    // Job files kept in a checkout and linked into the jobs folder: the links load, so their
    // targets hold the same webhook URLs. Outside /tmp (hidden anyway), so the mask is what is tested.
    const base = await realpath(await mkdtemp(join("/var/tmp", "countd-linked-jobs-")));
    try {
      await mkdir(join(base, "etc"));
      await mkdir(join(base, "jobs"));
      await mkdir(join(base, "checkout", "more"), { recursive: true });
      await writeFile(
        join(base, "etc", "countd.yaml"),
        `jobs_dir: ${base}/jobs\nworkspace: ${base}/ws\ntools:\n  restrict_to_workspace: false\n  exec:\n    sandbox: bwrap\n`,
      );
      await writeFile(join(base, "checkout", "hook.yaml"), "deliver: {webhook: 'https://hooks.example/LINKED SENTINEL'}\n");
      await writeFile(join(base, "checkout", "more", "other.yaml"), "deliver: {webhook: 'https://hooks.example/FOLDER SENTINEL'}\n");
      await writeFile(join(base, "checkout", "README.md"), "CHECKOUT README\n");
      await symlink(join(base, "checkout", "hook.yaml"), join(base, "jobs", "hook.yaml"));
      await symlink(join(base, "checkout", "more"), join(base, "jobs", "more"));
      const config = await loadConfig({ file: join(base, "etc", "countd.yaml"), env: {} });
      await mkdir(config.paths.workspace, { recursive: true });
      const exec = builtinTools(config, new MemoryStore(config.paths.workspace)).get("exec")!;
      const out = await exec.execute(
        {
          command: `ls -A ${base}/jobs; cat ${base}/jobs/hook.yaml ${base}/checkout/hook.yaml ${base}/checkout/more/other.yaml ${base}/checkout/README.md`,
        },
        { sessionId: "test", workspace: config.paths.workspace, signal: new AbortController().signal },
      );
      expect(out).not.toContain("SENTINEL");
      // Only the targets are hidden, not the folder that holds them.
      expect(out).toContain("CHECKOUT README");
    } finally {
      await rm(base, { recursive: true });
    }
  });

  describe("network", () => {
    let server: Server;
    let port: number;
    let received: string[];
    beforeEach(async () => {
      received = [];
      server = createServer((socket) => socket.on("data", (data) => received.push(data.toString())));
      port = await listenLoopback(server);
    });
    afterEach(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("cannot reach a loopback server when the network is off", async () => {
      const out = await exec(`echo hello > /dev/tcp/127.0.0.1/${port}`);
      expect(out).not.toMatch(/\[exit code 0\]$/);
      expect(received).toEqual([]);
    });

    it("reaches it when the network is allowed", async () => {
      expect(await exec(`echo hello > /dev/tcp/127.0.0.1/${port}`, { network: true })).toBe("(no output)\n[exit code 0]");
      await vi.waitFor(() => expect(received.join("")).toBe("hello\n"));
    });
  });

  it("cannot read countd's environment through /proc: the sandbox has its own process namespace", async () => {
    process.env.COUNTD_TEST_PARENT_SECRET = "sk-parent-environment-sentinel";
    try {
      const out = await exec("cat /proc/$PPID/environ; for f in /proc/[0-9]*/environ; do cat $f; done; echo; ls /proc | grep -c '^[0-9]'");
      expect(out).not.toContain("sk-parent-environment-sentinel");
      // Only the sandbox's own few processes are visible, not the host's.
      expect(Number(/(\d+)\n\[exit code 0\]$/.exec(out)?.[1])).toBeLessThan(10);
    } finally {
      delete process.env.COUNTD_TEST_PARENT_SECRET;
    }
  });

  it("leaves nothing running after the call, not even a process started with setsid -f or nohup", async () => {
    const marker = `${5000 + (process.pid % 1000)}.25`;
    expect(await exec(`setsid -f sleep ${marker}; (nohup sleep ${marker} >/dev/null 2>&1 &); echo started`)).toBe("started\n[exit code 0]");
    await vi.waitFor(async () => expect(await processesRunning(`sleep\0${marker}`)).toBe(0), { timeout: 10_000 });
  });

  it("stops every process of the sandbox at the timeout", async () => {
    const marker = `${4000 + (process.pid % 1000)}.5`;
    const out = await exec(`sleep ${marker} & sleep ${marker}`, { timeoutMs: 1000 });
    expect(out).toMatch(/\[timed out after 1 s/);
    await vi.waitFor(async () => expect(await processesRunning(`sleep\0${marker}`)).toBe(0), { timeout: 10_000 });
  });
});

/** Live (non-zombie) processes whose command line contains `needle`. */
async function processesRunning(needle: string): Promise<number> {
  let count = 0;
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    if (cmdline.includes(needle) && !/\) Z /.test(stat)) count++;
  }
  return count;
}
