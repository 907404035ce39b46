import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { PACKAGE_DIR } from "../package.js";

export interface Asset {
  type: string;
  body: Buffer;
}

/** The page's own files, in the package's console/ folder. */
const PAGE_DIR = join(PACKAGE_DIR, "console");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  // Preact ships its ES modules as .mjs: a browser runs a module script only with a JavaScript type.
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

/** The page's files and the libraries it imports, by URL path: served from the package, so the console works with no network. The page imports them by these paths. */
const PAGE_FILES: Record<string, string> = {
  "/": "index.html",
  "/assets/style.css": "style.css",
  "/assets/app.js": "app.js",
  "/assets/api.js": "api.js",
  "/assets/live.js": "live.js",
  "/assets/ui.js": "ui.js",
  "/assets/charts.js": "charts.js",
  "/assets/overview.js": "overview.js",
  "/assets/job.js": "job.js",
  "/assets/run.js": "run.js",
  "/assets/rehearsal.js": "rehearsal.js",
  "/assets/outbox.js": "outbox.js",
  "/assets/approvals.js": "approvals.js",
};

const require = createRequire(import.meta.url);
/** From the package's main file up to its folder: htm's exports do not include package.json. */
const packageFile = (pkg: string, file: string) => {
  const main = require.resolve(pkg);
  return join(main.slice(0, main.lastIndexOf(`/node_modules/${pkg}/`) + `/node_modules/${pkg}/`.length), file);
};

const VENDOR_FILES: Record<string, string> = {
  "/assets/vendor/preact.js": packageFile("preact", "dist/preact.mjs"),
  "/assets/vendor/preact-hooks.js": packageFile("preact", "hooks/dist/hooks.mjs"),
  "/assets/vendor/htm.js": packageFile("htm", "dist/htm.module.js"),
  "/assets/vendor/uplot.js": packageFile("uplot", "dist/uPlot.esm.js"),
  "/assets/vendor/uplot.css": packageFile("uplot", "dist/uPlot.min.css"),
};

/** Read once when the console starts: a few hundred kilobytes, served from memory. */
export async function loadAssets(): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const all = [...Object.entries(PAGE_FILES).map(([path, file]) => [path, join(PAGE_DIR, file)] as const), ...Object.entries(VENDOR_FILES)];
  for (const [path, file] of all) {
    const type = TYPES[file.slice(file.lastIndexOf("."))] ?? "application/octet-stream";
    let body = await readFile(file);
    // The hooks import "preact" by its bare name, which a browser resolves only through an import
    // map, an inline script the page's Content-Security-Policy refuses: point it at the file.
    if (path === "/assets/vendor/preact-hooks.js")
      body = Buffer.from(body.toString("utf8").replaceAll('from"preact"', 'from"./preact.js"'));
    assets.set(path, { type, body });
  }
  return assets;
}
