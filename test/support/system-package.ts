import { execFile } from "node:child_process";
import { relative } from "node:path";
import { promisify } from "node:util";
import { detectSandbox } from "../../src/tools/sandbox.js";

/** Where Debian's chromium package puts the browser. */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * The Debian packages some tests need, each with how to tell that it works on this machine: the
 * reason it does not, or undefined. `.ci/run` installs every package named here.
 */
export const SYSTEM_PACKAGES = {
  // Installed is not enough: bwrap must be able to create a sandbox (user namespaces on).
  bubblewrap: () =>
    detectSandbox("bwrap").then(
      () => undefined,
      (err: unknown) => (err as Error).message.replace('exec.sandbox is "bwrap" but ', ""),
    ),
  // systemd-analyze, which verifies the shipped unit and rates its exposure.
  systemd: () =>
    promisify(execFile)("systemd-analyze", ["--version"]).then(
      () => undefined,
      () => "systemd-analyze not found",
    ),
  // Installed is not enough: the container must allow ptrace.
  strace: () =>
    promisify(execFile)("strace", ["-f", "-o", "/dev/null", "true"]).then(
      () => undefined,
      (err: NodeJS.ErrnoException & { stderr?: string }) =>
        err.code === "ENOENT" ? "strace not found" : `strace cannot trace here: ${err.stderr?.trim() ?? err.message}`,
    ),
  // Debian's Chromium, which the console's browser tests drive through playwright-core (never a downloaded browser).
  chromium: () =>
    promisify(execFile)(CHROMIUM, ["--version"]).then(
      () => undefined,
      (err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? `${CHROMIUM} not found` : `${CHROMIUM} does not start: ${err.message}`),
    ),
  // Debian's Redis, which the cluster's tests start on a loopback port of their own.
  "redis-server": () =>
    promisify(execFile)("/usr/bin/redis-server", ["--version"]).then(
      () => undefined,
      (err: NodeJS.ErrnoException) =>
        err.code === "ENOENT" ? "/usr/bin/redis-server not found" : `redis-server does not start: ${err.message}`,
    ),
  // git, which an approval's end-to-end test pushes with, to a bare remote in the workspace.
  git: () =>
    promisify(execFile)("git", ["--version"]).then(
      () => undefined,
      () => "git not found",
    ),
} satisfies Record<string, () => Promise<string | undefined>>;

export type SystemPackage = keyof typeof SYSTEM_PACKAGES;

/**
 * Whether the tests in `testFile` that need `pkg` can run here. A fresh machine with nothing but
 * Node must pass `npm test`, so there they are skipped, with one line on stderr naming the package
 * to install. Under CI=true a missing package fails the run instead: CI installs every package and
 * a sandbox test that silently stopped running would prove nothing.
 */
export async function hasSystemPackage(pkg: SystemPackage, testFile: string): Promise<boolean> {
  const problem = await SYSTEM_PACKAGES[pkg]();
  if (problem === undefined) return true;
  const what = `${relative(process.cwd(), testFile)} needs ${pkg} (apt-get install ${pkg}): ${problem}`;
  if (process.env["CI"] === "true") throw new Error(`CI=true and ${what}`);
  process.stderr.write(`skipped: ${what}\n`);
  return false;
}
