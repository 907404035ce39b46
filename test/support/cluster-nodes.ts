import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { runCountd, spawnDaemon, type DaemonProcess } from "./daemon-process.js";

/**
 * A cluster node's folder, as on a machine of its own: countd.yaml joining the cluster at `redis`
 * as `node` (with `settings`, more lines of countd.yaml), and jobs/ with `jobs` (name → text).
 */
export async function nodeFolder(redis: string, node: string, jobs: Record<string, string>, settings: string[] = []): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `countd-${node}-`));
  const config = ["runner:", "  shutdown_grace: 2s", "tools:", "  exec:", "    sandbox: none", ...settings, "cluster:", `  redis: ${redis}`, `  node: ${node}`, ""];
  await writeFile(join(dir, "countd.yaml"), config.join("\n"));
  await mkdir(join(dir, "jobs"));
  for (const [name, text] of Object.entries(jobs)) await writeFile(join(dir, "jobs", `${name}.yaml`), text);
  return dir;
}

/** What `countd history --json` lists on the node whose folder is `dir`: the cluster's runs of `job`. */
export async function nodeHistory(dir: string, job: string, env: Record<string, string>): Promise<RunRecord[]> {
  const listed = await runCountd(["history", job, "--json", "-n", "1000"], { cwd: dir, env });
  expect(listed).toMatchObject({ code: 0, stderr: "" });
  return JSON.parse(listed.stdout) as RunRecord[];
}

/**
 * `countd start` in each folder, kept in `into` as soon as spawned (so a test that fails stops them
 * all), resolved once each said it started: on a loaded machine three starts at once take a while.
 */
export async function startNodes(dirs: string[], env: Record<string, string>, into: DaemonProcess[]): Promise<void> {
  into.push(...dirs.map((dir) => spawnDaemon(dir, env)));
  await vi.waitFor(
    () => {
      for (const daemon of into) {
        if (daemon.child.exitCode !== null) throw new Error(`countd start exited ${daemon.child.exitCode}:\n${daemon.output()}`);
        if (!daemon.output().includes('"countd started"')) throw new Error("not started yet");
      }
    },
    { timeout: 60_000, interval: 100 },
  );
}
