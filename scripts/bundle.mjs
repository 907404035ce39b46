/*
 * Bundles the command line into dist/ after tsc has built it: dist/cli.js, the file bin/countd.js
 * loads, becomes one small entry with a chunk per command (each command's dynamic import() stays a
 * chunk of its own, loaded only when that command runs). Node loading some 220 modules one file
 * at a time, zod's 95 among them, cost a command ten times a bare Node start; a handful of chunks
 * cost little more than one.
 *
 * The chunks sit in dist/ itself, one folder below the package, as tsc's top-level files do: the
 * paths countd finds from its own file (PACKAGE_DIR, the HTML worker beside its caller) resolve
 * the same from a chunk. Running tsc alone afterwards writes an unbundled dist/cli.js again,
 * which works on its own: the chunks it no longer loads are left unused.
 */
import { build } from "esbuild";
import { readFile, readdir, rm } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Packages loaded from node_modules at run time, not bundled; each says why. */
export const EXTERNAL = [
  // Loads its Lua scripts from its own folder; heavy, and loaded only by a cluster.
  "bullmq",
  // BullMQ's own connection class: one copy, shared with bullmq, so its checks of the client hold.
  "ioredis",
  // Its transports (pino-pretty) and thread-stream run in worker threads, found by file path.
  "pino",
  "pino-pretty",
  // The provider SDKs, the MCP SDK and nodemailer: heavy, loaded by the first call that needs them.
  "openai",
  "@anthropic-ai/sdk",
  "@modelcontextprotocol/sdk",
  "nodemailer",
  // Loaded with createRequire on first use (the price table, the JSON Schema validators, JSONPath).
  "@pydantic/genai-prices",
  "ajv",
  "ajv-formats",
  "jsonpath-plus",
  // The demo's LLM simulator: reads its own files, and only `countd demo` loads it.
  "@copilotkit/aimock",
];

/**
 * Bundled CommonJS packages call require() for Node's own modules; an ES module has no require
 * of its own, so each chunk makes one.
 */
const REQUIRE = 'import { createRequire as __countdRequire } from "node:module"; const require = __countdRequire(import.meta.url);';

/**
 * esbuild keeps every export of a namespace that is imported by name: `import { z } from "zod"`
 * brings all of zod, its 40 locales among them, into the chunk every command loads (three times
 * the code to compile). Throws, naming the files, when a source imports zod that way.
 */
async function checkZodImports(metafile) {
  const bundled = Object.values(metafile.outputs).flatMap((output) =>
    Object.entries(output.inputs).flatMap(([input, { bytesInOutput }]) => (bytesInOutput > 0 ? [input] : [])),
  );
  if (!bundled.some((input) => /zod\/v4\/locales\/(?!en\.js)/.test(input))) return;
  const sources = Object.keys(metafile.inputs).filter((input) => input.startsWith("src/"));
  const named = [];
  for (const source of sources)
    if (/import\s*\{\s*z\s*\}\s*from\s*"zod"/.test(await readFile(`${ROOT}${source}`, "utf8"))) named.push(source);
  throw new Error(
    `all of zod's locales are in the bundle: import zod as \`import * as z from "zod"\`, not \`import { z } from "zod"\`` +
      (named.length > 0 ? ` (in ${named.join(", ")})` : ""),
  );
}

/** How the command line is bundled into `outdir`; test/cli/light-commands.test.ts reads what each chunk holds. */
export function bundleOptions(outdir) {
  return {
    absWorkingDir: ROOT,
    entryPoints: { cli: "src/cli.ts", worker: "src/html/worker.ts" },
    outdir,
    // All in dist/ itself, named apart from what tsc writes there (no src/chunk-*.ts, no src/worker.ts).
    chunkNames: "chunk-[name]-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20.19",
    external: EXTERNAL,
    banner: { js: REQUIRE },
    sourcemap: true,
    // Stack traces need only the mappings; the sources are in the repository, not the package.
    sourcesContent: false,
    metafile: true,
    logLevel: "warning",
  };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dist = `${ROOT}dist`;
  // Chunks of an earlier build would pile up: their names carry a hash of their contents.
  for (const name of await readdir(dist)) if (name.startsWith("chunk-")) await rm(`${dist}/${name}`);
  const { metafile } = await build(bundleOptions(dist));
  await checkZodImports(metafile);
}
