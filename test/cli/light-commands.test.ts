import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type BuildOptions, type Metafile } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN } from "../support/daemon-process.js";

/*
 * The commands people type by hand and in scripts load only what they use: none of the modules
 * that only the daemon, a cluster, a provider call, MCP or mail need. Node's module hooks list
 * every module each command loads, so a gain here cannot silently come undone. The built CLI is
 * bundled (scripts/bundle.mjs): countd's own modules and its light packages are in its chunks,
 * and only the packages it keeps external show up here by name, so those checked must be external.
 */

/** Packages `countd --version`, `jobs` and `status` must not load. */
const HEAVY = ["bullmq", "ioredis", "openai", "@anthropic-ai/sdk", "@modelcontextprotocol/sdk", "nodemailer"];

/** The built entry bin/countd.js loads: the trace holds it whenever the command line loaded. */
const BUILT_CLI = pathToFileURL(join(import.meta.dirname, "../../dist/cli.js")).href;

/** A module hook that appends each module's URL, as it loads, to the file named by COUNTD_TRACE. */
const HOOKS = `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  appendFileSync(process.env.COUNTD_TRACE, url + "\\n");
  return next(url, context);
}`;
/**
 * The hook above sees what is imported; on Node 20 it does not see what CommonJS code loads with
 * require (createRequire: the price table, the JSON Schema validators), which goes through here.
 */
const REGISTER = `import Module, { register } from "node:module";
import { appendFileSync } from "node:fs";
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});
const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (!Module.isBuiltin(request)) {
    try { appendFileSync(process.env.COUNTD_TRACE, Module._resolveFilename(request, parent, isMain) + "\\n"); } catch {}
  }
  return load.apply(this, arguments);
};`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-light-"));
  await writeFile(join(dir, "countd.yaml"), "timezone: UTC\n");
  await mkdir(join(dir, "jobs"));
  for (let i = 0; i < 10; i++) await writeFile(join(dir, "jobs", `job-${i}.yaml`), `schedule: "0 9 * * *"\nprompt: report ${i}\n`);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * The packages under node_modules the command loaded, and its exit code. `until`: a line of its
 * output after which it is sent SIGTERM (a daemon, stopped once it started).
 */
async function loaded(
  args: string[],
  until?: string,
  env: Record<string, string> = {},
  cwd = dir,
): Promise<{ code: number | null; output: string; packages: Set<string>; builtins: Set<string>; builtCli: boolean }> {
  const trace = join(cwd, `trace-${args.join("-")}.txt`);
  await writeFile(trace, "");
  let output = "";
  const code = await new Promise<number | null>((done) => {
    const child = spawn(process.execPath, ["--import", `data:text/javascript,${encodeURIComponent(REGISTER)}`, BIN, ...args], {
      cwd,
      env: { PATH: process.env["PATH"] ?? "", COUNTD_TRACE: trace, ...env },
      stdio: ["ignore", "pipe", "ignore"],
    });
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      if (until !== undefined && output.includes(until)) child.kill("SIGTERM");
    });
    child.on("exit", done);
  });
  const urls = (await readFile(trace, "utf8")).split("\n").filter(Boolean);
  const packages = new Set(urls.flatMap((url) => [...url.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)\//g)].map((match) => match[1]!)));
  const builtins = new Set(urls.filter((url) => url.startsWith("node:")));
  return { code, output, packages, builtins, builtCli: urls.includes(BUILT_CLI) };
}

describe("the commands typed by hand", () => {
  it("the bundle keeps the daemon's, the providers', MCP's and mail's packages external, so the trace names them", async () => {
    const { EXTERNAL } = (await import(pathToFileURL(join(import.meta.dirname, "../../scripts/bundle.mjs")).href)) as {
      EXTERNAL: string[];
    };
    expect(HEAVY.filter((name) => !EXTERNAL.includes(name))).toEqual([]);
  });

  it("countd --version and -V answer before the command line loads: no package at all", async () => {
    const version = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    for (const flag of ["--version", "-V"]) {
      const { code, output, packages } = await loaded([flag]);
      expect({ code, output }).toEqual({ code: 0, output: `${version.version}\n` });
      expect([...packages]).toEqual([]);
    }
  });

  it.each([
    [["jobs"], 0],
    // No daemon runs here: status says so and exits 3, having loaded what it needs to look.
    [["status"], 3],
  ])("countd %j loads none of the daemon's, the providers', MCP's or mail's packages", async (args, exit) => {
    const { code, packages, builtCli } = await loaded(args);
    expect(code).toBe(exit);
    // The trace works: the command's own modules are in it.
    expect(builtCli).toBe(true);
    expect(HEAVY.filter((name) => packages.has(name))).toEqual([]);
  });
});

/** Node 22.1+ can keep compiled code on disk; Node 20 cannot (and @types/node, Node 20's, does not name it). */
const compileCache = "enableCompileCache" in (await import("node:module")).default;

/** `countd jobs` with TMPDIR, where Node keeps its compile cache, a folder of its own; `look` reads it before it is removed. */
async function jobsWithTmpdir(env: Record<string, string>, look: (temp: string) => Promise<void>): Promise<void> {
  const temp = await mkdtemp(join(tmpdir(), "countd-compile-cache-"));
  try {
    const { code } = await loaded(["jobs"], undefined, { TMPDIR: temp, ...env });
    expect(code).toBe(0);
    await look(temp);
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

describe("Node's compile cache", () => {
  it.runIf(compileCache)("countd jobs leaves its compiled modules there for the next command", async () => {
    await jobsWithTmpdir({}, async (temp) => {
      const [version] = await readdir(join(temp, "node-compile-cache"));
      expect((await readdir(join(temp, "node-compile-cache", version!))).length).toBeGreaterThan(10);
    });
  });

  it.runIf(compileCache)("and leaves none when NODE_DISABLE_COMPILE_CACHE is set", async () => {
    await jobsWithTmpdir({ NODE_DISABLE_COMPILE_CACHE: "1" }, async (temp) => {
      expect(await readdir(temp)).toEqual([]);
    });
  });
});

/** `loaded(args)` in a folder of its own holding these job files (name: YAML), removed after. */
async function loadedWithJobs(args: string[], jobs: Record<string, string>): ReturnType<typeof loaded> {
  const folder = await mkdtemp(join(tmpdir(), "countd-light-jobs-"));
  try {
    await writeFile(join(folder, "countd.yaml"), "timezone: UTC\n");
    await mkdir(join(folder, "jobs"));
    for (const [name, yaml] of Object.entries(jobs)) await writeFile(join(folder, "jobs", `${name}.yaml`), yaml);
    return await loaded(args, undefined, {}, folder);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

describe("what only some job files use", () => {
  it("countd jobs loads no JSON Schema validator when no job has an output: schema", async () => {
    const { code, packages, builtCli } = await loaded(["jobs"]);
    expect(code).toBe(0);
    expect(builtCli).toBe(true);
    expect(["ajv", "ajv-formats"].filter((name) => packages.has(name))).toEqual([]);
  });

  it("and loads one when a job has: the trace sees what is loaded with require", async () => {
    const { code, packages } = await loadedWithJobs(["jobs"], {
      typed: 'schedule: "0 9 * * *"\nprompt: count\noutput:\n  schema:\n    type: object\n    properties:\n      n: { type: integer }\n',
    });
    expect(code).toBe(0);
    expect(packages.has("ajv")).toBe(true);
  });
});

describe("a JSONPath, which only some job files hold", () => {
  it("countd jobs loads no JSONPath evaluator when no job selects a path", async () => {
    const { code, packages, builtCli } = await loaded(["jobs"]);
    expect(code).toBe(0);
    expect(builtCli).toBe(true);
    expect(packages.has("jsonpath-plus")).toBe(false);
  });

  it("and loads one to check a job's changed_on:, refusing a path it cannot read", async () => {
    const { code, output, packages } = await loadedWithJobs(["jobs"], {
      ids: 'schedule: "0 9 * * *"\nprompt: ids\ndeliver_when: changed\nchanged_on: "$.items[*].id"\n',
      broken: 'schedule: "0 9 * * *"\nprompt: ids\ndeliver_when: changed\nchanged_on: "$[?(@.a"\n',
    });
    expect(code).toBe(1);
    expect(packages.has("jsonpath-plus")).toBe(true);
    expect(output).toMatch(/^ids +cron 0 9/m);
    expect(output).toMatch(/^broken +- .*not loaded: .*changed_on: not a JSONPath/m);
  });
});

describe("what the commands that read state leave unloaded", () => {
  it.each([
    [["jobs"], 0],
    [["history"], 0],
    [["status"], 3],
  ])("countd %j loads no logger: it writes no log line, so pino and its stream workers stay unloaded", async (args, exit) => {
    const { code, packages, builtCli } = await loaded(args);
    expect(code).toBe(exit);
    expect(builtCli).toBe(true);
    expect(packages.has("pino")).toBe(false);
  });

  it("countd status with no daemon opens no HTTP client to learn so, and starts no worker thread", async () => {
    const { code, output, builtins, builtCli } = await loaded(["status"]);
    expect(code).toBe(3);
    expect(output).toMatch(/^daemon: +not running \(no lock in /m);
    expect(builtCli).toBe(true);
    expect(["node:http", "node:worker_threads"].filter((name) => builtins.has(name))).toEqual([]);
  });

  /**
   * The sources in the chunks a command's chunk imports, with its own, as scripts/bundle.mjs
   * splits them: what Node compiles before the command runs (a dynamic import() is left out).
   */
  async function compiledFor(metafile: Metafile, command: string): Promise<string[]> {
    const outputs = metafile.outputs;
    const entry = Object.keys(outputs).find((file) => outputs[file]!.entryPoint === `src/cli/${command}.ts`)!;
    const cli = Object.keys(outputs).find((file) => outputs[file]!.entryPoint === "src/cli.ts")!;
    const seen = new Set<string>();
    const queue = [entry, cli];
    for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
      if (seen.has(file)) continue;
      seen.add(file);
      for (const imported of outputs[file]!.imports)
        if (imported.kind === "import-statement" && outputs[imported.path]) queue.push(imported.path);
    }
    return [...seen].flatMap((file) =>
      Object.entries(outputs[file]!.inputs).flatMap(([input, { bytesInOutput }]) => (bytesInOutput > 0 ? [input] : [])),
    );
  }

  it("countd jobs, history and status compile none of the tools' code, the shell parser, the Markdown lexer or the outbox", async () => {
    const { bundleOptions } = (await import(pathToFileURL(join(import.meta.dirname, "../../scripts/bundle.mjs")).href)) as {
      bundleOptions: (outdir: string) => BuildOptions;
    };
    const { metafile } = await build({ ...bundleOptions(join(dir, "bundle")), write: false, sourcemap: false });
    // Checking a job's tools: needs their names only; the checklist is read only beside a running heartbeat;
    // the run history is read without the outbox, the spend ledger, the approvals or the run journals.
    const unused = [
      /^src\/tools\/(filesystem|shell|shell-scan|shell-runners|web|memory)\.ts$/,
      /node_modules\/marked\//,
      /^src\/delivery\/outbox\.ts$/,
      /^src\/store\/(outbox-store|spend-ledger|journal-entries)\.ts$/,
      /^src\/approvals\/file-store\.ts$/,
    ];
    for (const command of ["jobs", "reports", "status"]) {
      const compiled = await compiledFor(metafile!, command);
      expect(compiled).toContain(`src/cli/${command}.ts`);
      expect({ command, unused: compiled.filter((input) => unused.some((pattern) => pattern.test(input))) }).toEqual({
        command,
        unused: [],
      });
    }
  });
});

describe("the daemon's start-up", () => {
  it("loads neither the MCP SDK with no mcp_servers nor a provider SDK before the first LLM call", async () => {
    const { output, packages, builtCli } = await loaded(["start"], '"countd started"', {
      OPENAI_API_KEY: "sk-unused",
      COUNTD_CONSOLE_LISTEN: "127.0.0.1:0",
    });
    expect(output).toContain('"countd started"');
    expect(builtCli).toBe(true);
    expect(["@modelcontextprotocol/sdk", "openai", "@anthropic-ai/sdk"].filter((name) => packages.has(name))).toEqual([]);
  });
});
