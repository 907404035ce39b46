import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The installed package's folder: its example jobs, workspace, demo files and package.json. */
export const PACKAGE_DIR = resolve(fileURLToPath(import.meta.url), "../..");

/** package.json's version, the one `countd --version` prints. */
export const VERSION = (JSON.parse(readFileSync(resolve(PACKAGE_DIR, "package.json"), "utf8")) as { version: string }).version;
