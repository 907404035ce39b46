#!/usr/bin/env node
import { existsSync } from "node:fs";
import module from "node:module";
import { fileURLToPath } from "node:url";

const cli = new URL("../dist/cli.js", import.meta.url);
const args = process.argv.slice(2);
if (existsSync(cli) && args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  // Scripts ask this to check what is installed: it is answered before the command line loads.
  const { VERSION } = await import(new URL("../dist/package.js", import.meta.url).href);
  process.stdout.write(`${VERSION}\n`);
} else if (existsSync(cli)) {
  // Node 22.1+ keeps the compiled code of the modules below on disk, so later commands skip
  // compiling them (NODE_DISABLE_COMPILE_CACHE=1 turns it off); Node 20 has no such cache.
  module.enableCompileCache?.();
  await import(cli.href);
} else {
  // A clone after `npm ci` has dist/ only once `npm test`, `npm run build` or `npm pack` built it:
  // until then its sources run through tsx, a devDependency. A build script run by npm ci would
  // ship in the tarball as an install script, which npm warns about and will not run.
  let register;
  try {
    ({ register } = await import("tsx/esm/api"));
  } catch {
    const folder = fileURLToPath(new URL("..", import.meta.url));
    process.stderr.write(
      `countd is not built: ${fileURLToPath(cli)} is missing. In ${folder} run: npm ci && npm run build\n` +
        "(tsx, which runs the sources until then, is not installed; the tarball npm pack makes ships dist/ built)\n",
    );
    process.exit(1);
  }
  register();
  await import(new URL("../src/cli.ts", import.meta.url).href);
}
