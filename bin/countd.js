#!/usr/bin/env node
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const cli = new URL("../dist/cli.js", import.meta.url);
// A clone installed with --omit=dev has no compiler, so nothing built dist/: say how, instead of ERR_MODULE_NOT_FOUND.
if (!existsSync(cli)) {
  const folder = fileURLToPath(new URL("..", import.meta.url));
  process.stderr.write(
    `countd is not built: ${fileURLToPath(cli)} is missing. In ${folder} run: npm ci && npm run build\n` +
      "(npm ci --omit=dev installs no TypeScript to build with; the tarball npm pack makes ships dist/ built)\n",
  );
  process.exit(1);
}
await import(cli.href);
