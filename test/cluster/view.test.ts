import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import { countdIn, spawnCountd, startDaemon, type CountdProcess } from "../support/cli-daemon.js";
import { logLines } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Three daemons, each a `countd start` process in a folder of its own (as on three machines),
 * share one real redis-server. A run is started on node n1 (`countd run` there, a manual fire,
 * which runs where it is asked); what is checked is what a user at node n2 sees of it through
 * n2's commands: `countd follow`, `show`, `status`, `cancel`. No timing is asserted.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];
const WAIT = { timeout: 60_000, interval: 250 };

describe.skipIf(!hasRedis)("one view of a cluster's runs from any node", { timeout: 180_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;
  let commands: CountdProcess[] = [];
  /** Lets held LLM calls answer, so the mock server can stop. */
  let release = () => {};

  afterEach(async (context) => {
    if (context.task.result?.state === "fail") {
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-6_000)}\n`);
      for (const command of commands) process.stderr.write(`--- command:\n${command.stdout()}\n${command.stderr()}\n`);
    }
    release();
    for (const command of commands) if (command.child.exitCode === null) command.child.kill("SIGINT");
    await Promise.all(commands.map((command) => command.closed));
    commands = [];
    await cluster.stopDaemons();
  });

  /** The three nodes' folders with `jobs`, the daemons of the first `started` of them started. */
  async function startNodes(jobs: Record<string, string>, started = NODES.length): Promise<string[]> {
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, jobs)));
    cluster.daemons = await Promise.all(dirs.slice(0, started).map((dir) => startDaemon(dir, cluster.env)));
    return dirs;
  }

  /** An LLM call with `prompt` is held until the test ends. */
  function hold(prompt: string, answer: string): void {
    const held = new Promise<void>((resolve) => (release = resolve));
    mock.onMessage(prompt, async () => {
      await held;
      return { content: answer };
    });
  }

  const spawn = (dir: string, args: string[]) => {
    const command = spawnCountd(dir, cluster.env, args);
    commands.push(command);
    return command;
  };

  async function runningOn(dir: string, job: string): Promise<RunRecord> {
    let run: RunRecord | undefined;
    await vi.waitFor(async () => {
      run = (await nodeHistory(dir, job, cluster.env)).find((record) => record.status === "running");
      expect(run).toBeDefined();
    }, WAIT);
    return run!;
  }

  it("a run on n1: `countd follow` on n2 sees it start and end (on n1), and `countd show` on n2 shows its transcript", async () => {
    mock.onMessage("say hello", { content: "hello from the far node" });
    const [a, b] = await startNodes({ talk: "prompt: say hello\n" });
    const follow = spawn(b!, ["follow"]);
    await vi.waitFor(() => expect(follow.stderr()).toContain("following every job"), WAIT);

    const ran = await countdIn(a!, cluster.env)(["run", "talk"]);
    expect(ran.code).toBe(0);
    const [run] = await nodeHistory(b!, "talk", cluster.env);
    expect(run).toMatchObject({ status: "ok", node: "n1" });

    await vi.waitFor(() => {
      expect(follow.stdout()).toContain(`[talk] run ${run!.id} started (manual, on n1)`);
      expect(follow.stdout()).toContain("[talk] hello from the far node");
      expect(follow.stdout()).toMatch(new RegExp(`\\[talk\\] run ${run!.id} ok \\(`));
    }, WAIT);

    // The transcript is stored once n1's audit log wrote the run's lines: until then show says it is not there.
    let shown = "";
    await vi.waitFor(async () => {
      const show = await countdIn(b!, cluster.env)(["show", run!.id]);
      expect(show.code).toBe(0);
      shown = show.stdout;
      expect(shown).not.toContain("incomplete");
      expect(shown).toContain("hello from the far node");
    }, WAIT);
    expect(shown).toContain("node       n1");
    expect(shown).toContain("say hello");
    expect(shown).toMatch(/^  LLM \S+  /m);
    process.stderr.write(`cluster view: run ${run!.id} on n1 followed and shown on n2\n`);
  });

  it("a long run on n1: `countd status` on n3, started after the run, lists it with its node, and `countd cancel` on n2 ends it cancelled", async () => {
    hold("hold long", "too late");
    const [a, b, c] = await startNodes({ long: "prompt: hold long\n" }, 2);
    const runner = spawn(a!, ["run", "long"]);
    const run = await runningOn(b!, "long");
    expect(run.node).toBe("n1");
    // n3 was not listening when the run started: it asks the others for their runs in progress.
    cluster.daemons.push(await startDaemon(c!, cluster.env));

    await vi.waitFor(async () => {
      const status = await countdIn(c!, cluster.env)(["status"]);
      expect(status.stdout).toMatch(new RegExp(`long  ${run.id}  on n1  since`));
    }, WAIT);

    const cancel = await countdIn(b!, cluster.env)(["cancel", run.id]);
    expect(cancel).toMatchObject({ code: 0, stdout: `cancelling run ${run.id} of long: countd show ${run.id} tells how it ended\n` });
    await vi.waitFor(async () => {
      expect(await nodeHistory(c!, "long", cluster.env)).toEqual([
        expect.objectContaining({ id: run.id, node: "n1", status: "cancelled", error: "cancelled with countd cancel" }),
      ]);
    }, WAIT);
    // `countd run` on n1 saw its run end cancelled.
    expect(await runner.closed).not.toBe(0);
    const again = await countdIn(b!, cluster.env)(["cancel", run.id]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("is not in progress");
  });

  it("overlap: replace: a new fire of a job running on another node cancels that run there, and the newer one runs once it stopped", async () => {
    // Every run is held: each one runs until the next fire replaces it.
    hold("replace me", "the held run's answer");
    const dirs = await startNodes({ swap: 'schedule: "*/4 * * * * *"\noverlap: replace\nprompt: replace me\n' });

    // Which node takes a slot is BullMQ's choice: the fires go on until one node replaced a run another node held.
    let across: { by: string; runId: string; node: string } | undefined;
    await vi.waitFor(
      () => {
        const replaced = cluster.daemons.flatMap((daemon, i) =>
          logLines(daemon.output(), "a newer fire replaces the run in progress (overlap: replace)").map((line) => ({
            by: NODES[i]!,
            runId: String(line["runId"]),
            node: String(line["node"]),
          })),
        );
        across = replaced.find((replace) => replace.by !== replace.node);
        expect(across).toBeDefined();
      },
      { timeout: 150_000, interval: 500 },
    );

    let runs: RunRecord[] = [];
    await vi.waitFor(async () => {
      runs = await nodeHistory(dirs[0]!, "swap", cluster.env);
      expect(runs.find((run) => run.id === across!.runId)).toMatchObject({
        node: across!.node,
        status: "cancelled",
        error: "replaced by a newer run",
      });
    }, WAIT);
    const ended = runs.filter((run) => run.status !== "running");
    expect(ended.length).toBeGreaterThanOrEqual(1);
    for (const run of ended) expect(run).toMatchObject({ status: "cancelled", error: "replaced by a newer run" });
    // Runs of a replace job never overlap: each started once the one before had stopped.
    for (const [i, run] of runs.entries())
      if (i > 0) expect(Date.parse(run.startedAt)).toBeGreaterThanOrEqual(Date.parse(runs[i - 1]!.finishedAt!));
    process.stderr.write(
      `cluster replace: ${across!.by} replaced the run ${across!.runId} on ${across!.node}; ${ended.length} run(s) replaced in all\n`,
    );
  }, 240_000);
});
