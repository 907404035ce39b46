import { describe, expect, it } from "vitest";
import { nodeFolder, nodeHistory, useCluster } from "../support/cluster-nodes.js";
import { startDaemon } from "../support/cli-daemon.js";
import { runCountd } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * Three daemons as separate processes, each in a folder of its own (its own state directory, as on
 * three machines), on one real redis-server. A `session: shared` job is run on each node in turn;
 * the scripted LLM keeps the messages of every request it gets.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2", "n3"];

type Sent = { role: string; content?: unknown };

describe.skipIf(!hasRedis)("a session: shared job on a cluster of three daemons", { timeout: 120_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;

  it("sends each run the exchanges its runs on the other nodes had, in order, also a run of `countd run` without a daemon", async () => {
    const requests: Sent[][] = [];
    mock.onMessage("Note what you know so far", (req) => {
      requests.push(req.messages as Sent[]);
      return { content: `fact ${requests.length}` };
    });
    const dirs = await Promise.all(
      NODES.map((node) => nodeFolder(cluster.redis.url, node, { notes: "prompt: Note what you know so far\nsession: shared\n" })),
    );
    cluster.daemons = await Promise.all(dirs.map((dir) => startDaemon(dir, cluster.env)));

    // `countd run` in a node's folder runs the job in that node's daemon.
    for (const [i, dir] of dirs.entries()) {
      const run = await runCountd(["run", "notes"], { cwd: dir, env: cluster.env });
      expect(run).toMatchObject({ code: 0, stdout: `fact ${i + 1}\n` });
    }

    const runs = await nodeHistory(dirs[0]!, "notes", cluster.env);
    expect(runs.map((run) => [run.node, run.status, run.resultExcerpt, run.sessionId])).toEqual([
      ["n1", "ok", "fact 1", "cron:notes"],
      ["n2", "ok", "fact 2", "cron:notes"],
      ["n3", "ok", "fact 3", "cron:notes"],
    ]);
    const conversation = (request: Sent[]) =>
      request.filter((message) => message.role !== "system").map((message) => [message.role, message.content]);
    const asked = ["user", "Note what you know so far"];
    expect(requests.map(conversation)).toEqual([
      [asked],
      [asked, ["assistant", "fact 1"], asked],
      [asked, ["assistant", "fact 1"], asked, ["assistant", "fact 2"], asked],
    ]);

    // `countd run` with no daemon on the node continues the same session.
    await cluster.stopDaemons();
    expect(await runCountd(["run", "notes"], { cwd: dirs[1]!, env: cluster.env })).toMatchObject({ code: 0, stdout: "fact 4\n" });
    expect(conversation(requests[3]!)).toEqual([
      asked,
      ["assistant", "fact 1"],
      asked,
      ["assistant", "fact 2"],
      asked,
      ["assistant", "fact 3"],
      asked,
    ]);
    process.stderr.write(
      `cluster sessions: 3 runs on ${NODES.join(", ")}; then 1 without a daemon on n2; request sizes ${requests.map((request) => request.length).join(", ")} messages\n`,
    );
  });
});
