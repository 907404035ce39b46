import { execFile, spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, readdir, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import { ANY_CONSOLE_PORT, logLines } from "../support/daemon-process.js";

const ROOT = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/**
 * The environment a user's shell has: no npm lifecycle variables from `npm test`, and no
 * node_modules/.bin on PATH, so no compiler but what the package brings itself.
 */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith("npm_")));
  const path = (process.env["PATH"] ?? "").split(delimiter).filter((entry) => !entry.includes("node_modules"));
  return { ...env, PATH: [dirname(process.execPath), ...path].join(delimiter), ...extra };
}

/** A temporary folder removed after the test: a clone, a tarball and an install come to hundreds of MB. */
async function scratch(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `countd-${name}-`));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function sh(file: string, args: string[], cwd: string, env = userEnv()): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === "number" ? failed.code : -1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
}

/** This checkout as a fresh clone has it: the sources, without node_modules, dist/ or what countd wrote. */
async function cloneOfCheckout(): Promise<string> {
  const clone = join(await scratch("clone"), "countd");
  const left = new Set(["node_modules", "dist", ".git", "state", "logs"]);
  await cp(ROOT, clone, {
    recursive: true,
    filter: (source) => source === ROOT || !left.has(source.slice(ROOT.length + 1).split("/")[0]!),
  });
  return clone;
}

/** A user's own folder, nowhere near the package: countd.yaml and one job. */
async function userFolder(): Promise<string> {
  const folder = join(await scratch("user"), "my-agents");
  await mkdir(join(folder, "jobs"), { recursive: true });
  await writeFile(join(folder, "countd.yaml"), "timezone: UTC\n");
  await writeFile(
    join(folder, "jobs", "daily-report.yaml"),
    'schedule: "0 9 * * 1-5"\nprompt: Summarise the notes.\ntools: [list_dir, read_file]\n',
  );
  return folder;
}

const VERSION = (JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("countd installed as a user installs it", () => {
  it("bundles every dependency, so that installing the tarball asks no registry", async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as {
      dependencies: object;
      bundleDependencies: string[];
    };
    expect(manifest.bundleDependencies).toEqual(Object.keys(manifest.dependencies));
  });

  it("npm install -g of the packed tarball, offline, puts a working countd on PATH without a compiler", { timeout: 600_000 }, async () => {
    const clone = await cloneOfCheckout();
    // A clone after `npm ci`: node_modules as real folders (hard links: fast), since the tarball bundles them.
    const modules = await realpath(join(ROOT, "node_modules"));
    if ((await sh("cp", ["-al", modules, join(clone, "node_modules")], clone)).code !== 0)
      await sh("cp", ["-a", modules, join(clone, "node_modules")], clone);
    const out = await scratch("pack");
    const packed = await sh("npm", ["pack", "--pack-destination", out], clone);
    expect(packed, packed.output).toMatchObject({ code: 0 });
    const [tarball] = (await readdir(out)).filter((name) => name.endsWith(".tgz"));
    expect(tarball).toBe(`countd-${VERSION}.tgz`);

    const prefix = await scratch("prefix");
    const installed = await sh(
      "npm",
      ["install", "-g", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", join(out, tarball!)],
      out,
    );
    expect(installed, installed.output).toMatchObject({ code: 0 });
    // Nothing runs at install time: no compiler, and npm has no install script of countd's to ask about.
    expect(installed.output).not.toMatch(/install-scripts|tsc/);
    const pkg = join(prefix, "lib", "node_modules", "countd");
    await expect(stat(join(pkg, "node_modules", "typescript"))).rejects.toThrow(/ENOENT/);
    await expect(stat(join(pkg, "dist", "cli.js"))).resolves.toBeTruthy();
    // prepack bundled the command line: its HTML conversion worker is a file of its own beside the chunks.
    await expect(stat(join(pkg, "dist", "worker.js"))).resolves.toBeTruthy();

    const folder = await userFolder();
    const env = userEnv({ PATH: `${join(prefix, "bin")}${delimiter}${userEnv()["PATH"]}` });
    const version = await sh("countd", ["--version"], folder, env);
    expect(version).toEqual({ code: 0, output: `${VERSION}\n` });
    const validated = await sh("countd", ["validate"], folder, env);
    expect(validated).toEqual({ code: 0, output: "1 job valid in jobs/\n" });

    // `cd ~/my-agents && countd start`: that folder's countd.yaml and jobs/, not the package's.
    const daemon = spawn("countd", ["start"], { cwd: folder, env: { ...env, ...ANY_CONSOLE_PORT, OPENAI_API_KEY: "sk-install-test" } });
    let output = "";
    daemon.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    daemon.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    const exited = new Promise<number | null>((done) => daemon.on("exit", (code) => done(code)));
    await expect
      .poll(() => logLines(output, "countd started"), { timeout: 30_000 })
      .toEqual([expect.objectContaining({ jobs: 1, dir: join(folder, "jobs") })]);
    daemon.kill("SIGTERM");
    expect(await exited).toBe(0);
    await expect(stat(join(folder, "state"))).resolves.toBeTruthy();
  });

  it("a clone after npm ci runs countd from its sources until dist/ is built", { timeout: 120_000 }, async () => {
    const clone = await cloneOfCheckout();
    await symlink(await realpath(join(ROOT, "node_modules")), join(clone, "node_modules"));
    const version = await sh(process.execPath, ["bin/countd.js", "--version"], clone);
    expect(version).toEqual({ code: 0, output: `${VERSION}\n` });
    const validated = await sh(process.execPath, ["bin/countd.js", "validate"], clone);
    expect(validated).toEqual({ code: 0, output: "2 jobs valid in jobs/\n" });
  });

  it("npm ci --omit=dev in a clone installs, and countd then runs from its sources", { timeout: 300_000 }, async () => {
    const clone = await cloneOfCheckout();
    const installed = await sh("npm", ["ci", "--omit=dev", "--offline", "--no-audit", "--no-fund"], clone);
    expect(installed, installed.output).toMatchObject({ code: 0 });
    // Nothing built dist/; tsx, which the demo's LLM simulator brings in, runs the sources.
    const version = await sh(process.execPath, ["bin/countd.js", "--version"], clone);
    expect(version).toEqual({ code: 0, output: `${VERSION}\n` });
  });
});
