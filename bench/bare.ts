/**
 * What a start is measured against: a bare `node -e 0`, and the same plus the three libraries
 * every countd command that reads countd.yaml, and the daemon, loads and uses (zod, yaml,
 * commander), bundled the way scripts/bundle.mjs bundles countd. The second is a floor no change
 * to countd's own code can go below while it validates countd.yaml with zod.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
