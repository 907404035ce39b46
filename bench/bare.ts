/**
 * What a start is measured against: a bare `node -e 0`, and the same plus the three libraries
 * every countd command that reads countd.yaml, and the daemon, loads and uses (zod, yaml,
 * commander), bundled the way scripts/bundle.mjs bundles countd. The second is a floor no change
 * to countd's own code can go below while it validates countd.yaml with zod.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { BuildOptions } from "esbuild";

/**
 * The environment both sides of a start's ratio run in. Inheriting the shell's would measure the
 * machine: with NODE_EXTRA_CA_CERTS set, as on the machine the figures in docs/benchmarks.md
 * come from, every Node process reads the certificates first, which took a bare start from
 * 22 ms to 58 ms and made any ratio to it look better than it is.
 */
export function bareEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env["PATH"] ?? "" };
}

/** GNU time, which reports a process's peak RSS; where it is missing, peaks are left out. */
export const TIME = "/usr/bin/time";

/** A process's spawn to exit, and its peak RSS where TIME measured it. */
export interface Timed {
  ms: number;
  peakMb: number | undefined;
}

/**
 * Spawn to exit of `node ...args` in bareEnv(), in `cwd`; throws, with its stderr, when its exit
 * code is not `exit`. With `peakFile`, it runs under TIME, which writes its peak RSS there.
 */
export async function timeNode(args: string[], opts: { cwd?: string; exit?: number; peakFile?: string } = {}): Promise<Timed> {
  const { cwd, exit = 0, peakFile } = opts;
  const [file, argv] = peakFile ? [TIME, ["-f", "%M", "-o", peakFile, process.execPath, ...args]] : [process.execPath, args];
  const started = performance.now();
  let stderr = "";
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(file, argv, { cwd, env: bareEnv(), stdio: ["ignore", "ignore", "pipe"] });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("exit", resolve);
  });
  const ms = performance.now() - started;
  if (code !== exit) throw new Error(`bench: node ${args.join(" ")} exited ${code}, not ${exit}:\n${stderr}`);
  if (!peakFile) return { ms, peakMb: undefined };
  // GNU time writes "Command exited with non-zero status N" before the figure when the exit code is not 0.
  const kb = Number((await readFile(peakFile, "utf8")).trim().split("\n").at(-1));
  return { ms, peakMb: kb / 1024 };
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Each library used once, the least a command does with it: a document parsed, a schema checked, a command line read. */
const PROBE = `import * as z from "zod";
import { parseDocument } from "yaml";
import { Command } from "commander";
z.object({ timezone: z.string() }).parse(parseDocument("timezone: UTC\\n").toJS());
new Command("countd").parse([], { from: "user" });
`;

/** The probe bundled into a temporary folder: run `node <file>`; remove() deletes it. */
export async function libraryProbe(): Promise<{ file: string; remove(): Promise<void> }> {
  const { build } = await import("esbuild");
  const { bundleOptions } = (await import(pathToFileURL(join(ROOT, "scripts/bundle.mjs")).href)) as {
    bundleOptions: (outdir: string) => BuildOptions;
  };
  const dir = await mkdtemp(join(tmpdir(), "countd-bench-probe-"));
  const file = join(dir, "probe.js");
  const { entryPoints: _entries, outdir: _outdir, ...options } = bundleOptions(dir);
  await build({
    ...options,
    stdin: { contents: PROBE, resolveDir: ROOT, loader: "js", sourcefile: "probe.js" },
    outfile: file,
    splitting: false,
    sourcemap: false,
    metafile: false,
  });
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}
