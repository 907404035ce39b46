import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { afterEach, beforeAll, expect, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "./aimock.js";
import { llmEnv, stopDaemon } from "./cli-daemon.js";
import { logLines, runCountd, spawnDaemon, type DaemonProcess } from "./daemon-process.js";
import type { RedisServer } from "./redis-server.js";
import { useRedis } from "./use-redis.js";

/**
 * A cluster node's folder, as on a machine of its own: countd.yaml joining the cluster at `redis`
 * as `node` (with `settings`, more lines of countd.yaml, and `hold`, its cluster.hold if given),
 * and jobs/ with `jobs` (name → text).
 */
export async function nodeFolder(
  redis: string,
  node: string,
  jobs: Record<string, string>,
  settings: string[] = [],
  options: { hold?: string } = {},
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `countd-${node}-`));
  const hold = options.hold ? [`  hold: ${options.hold}`] : [];
  const config = [
    "runner:",
    "  shutdown_grace: 2s",
    "tools:",
    "  exec:",
    "    sandbox: none",
    ...settings,
    "cluster:",
    `  redis: ${redis}`,
    `  node: ${node}`,
    ...hold,
    "",
  ];
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

/**
 * Job `name` (its `text`) added to each running node's jobs folder as an operator adds one: the
 * file written, then SIGHUP; resolved once every daemon logged the job added. A job whose time is
 * computed now (`at:`) need not wait out the daemons' start.
 */
export async function addJob(dirs: string[], daemons: DaemonProcess[], name: string, text: string): Promise<void> {
  await Promise.all(dirs.map((dir) => writeFile(join(dir, "jobs", `${name}.yaml`), text)));
  for (const daemon of daemons) daemon.child.kill("SIGHUP");
  await vi.waitFor(
    () => {
      for (const daemon of daemons) {
        const added = logLines(daemon.output(), "job list changed").some((line) => (line["added"] as string[] | undefined)?.includes(name));
        if (!added) throw new Error(`job ${name} not added yet:\n${daemon.output().slice(-2_000)}`);
      }
    },
    { timeout: 30_000, interval: 50 },
  );
}

export interface Cluster {
  /** The aimock LLM the daemons call (useAimock's: cleared before each test). */
  readonly mock: LLMock;
  /** The real redis-server the nodes share, started before the describe block's tests. */
  readonly redis: RedisServer;
  /** The environment the daemons and the commands get: the mock LLM's, with the `env` given. */
  readonly env: Record<string, string>;
  /** The test's daemons: a test sets the list or adds to it (startNodes); stopped after each test. */
  daemons: DaemonProcess[];
  /** SIGTERM to each daemon of the list, resolved once all exited; the list is emptied. */
  stopDaemons(): Promise<void>;
}

/**
 * The setup every test of `countd start` processes on one Redis shares, for the enclosing describe
 * block: a real redis-server (useRedis), a mock LLM (useAimock), the environment pointing the
 * daemons at it (with `env`), and the test's daemons, stopped after each test. A test's own
 * afterEach runs before this one (vitest runs after-hooks last registered first), so one that must
 * run while the daemons are up (printing their output on a failure, releasing held LLM calls) ends
 * with `stopDaemons()`, and one that must run once they stopped (flushing Redis) starts with it.
 */
export function useCluster(options: { env?: Record<string, string> } = {}): Cluster {
  const mock = useAimock();
  const redis = useRedis();
  let env: Record<string, string>;
  let daemons: DaemonProcess[] = [];

  async function stopDaemons(): Promise<void> {
    await Promise.all(daemons.map((daemon) => stopDaemon(daemon)));
    daemons = [];
  }

  beforeAll(() => {
    env = { ...llmEnv(`${mock.url}/v1`), ...options.env };
  });
  afterEach(async () => {
    await stopDaemons();
  });

  return {
    mock,
    get redis() {
      return redis.server;
    },
    get env() {
      return env;
    },
    get daemons() {
      return daemons;
    },
    set daemons(list) {
      daemons = list;
    },
    stopDaemons,
  };
}
