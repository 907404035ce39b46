import { access } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { addJob, nodeFolder, nodeHistory, startNodes, useCluster } from "../support/cluster-nodes.js";
import { runCountd } from "../support/daemon-process.js";
import { hasSystemPackage } from "../support/system-package.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Two daemons share one real redis-server. A run waits for a person's yes on the node that took
 * its slot; that node is killed with SIGKILL; the answer is given on the other node with `countd
 * approve`, and the run goes on there: its call runs once, its answer is delivered once, and
 * `countd show` on that node reads the run whole, the part the killed node ran included.
 */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const NODES = ["n1", "n2"];
const SLOW = { timeout: 60_000, interval: 250 };

describe.skipIf(!hasRedis)("an approval answered on another node after the first was killed", { timeout: 180_000 }, () => {
  const cluster = useCluster();
  const { mock } = cluster;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    hooks = await startWebhookReceiver();
  });
  afterAll(async () => {
    await hooks?.close();
  });
  afterEach(async (context) => {
    if (context.task.result?.state === "fail")
      for (const [i, daemon] of cluster.daemons.entries()) process.stderr.write(`--- ${NODES[i]}:\n${daemon.output().slice(-6_000)}\n`);
    await cluster.stopDaemons();
  });

  it("resumes the run on the node still up, runs the call once there and delivers once", async () => {
    mock.addFixture({
      match: { userMessage: "mark the release", hasToolResult: false },
      response: {
        content: "Marking the release.",
        toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "touch released.txt" }) }],
      },
    });
    mock.addFixture({ match: { userMessage: "mark the release", hasToolResult: true }, response: { content: "Release marked." } });
    const dirs = await Promise.all(NODES.map((node) => nodeFolder(cluster.redis.url, node, {})));
    await startNodes(dirs, cluster.env, cluster.daemons);
    const at = `${new Date(Date.now() + 2_000).toISOString().slice(0, 19)}Z`;
    await addJob(
      dirs,
      cluster.daemons,
      "release",
      [
        `at: "${at}"`,
        "prompt: mark the release",
        `deliver:\n  - webhook: { url: "${hooks.url}" }`,
        `approve:\n  rules:\n    - exec: "touch *"\n  ask:\n    - webhook: { url: "${hooks.url}" }`,
        "",
      ].join("\n"),
    );

    const bodies = () =>
      hooks.requests.map(
        (request) => JSON.parse(request.body) as { type: string; run: { id: string }; approval?: { id: string }; result: string },
      );
    await vi.waitFor(() => expect(bodies().map((body) => body.type)).toEqual(["approval.requested"]), SLOW);
    const [request] = bodies();
    const waitingOn = cluster.daemons.findIndex((daemon) => daemon.output().includes(`"runId":"${request!.run.id}"`));
    expect(waitingOn).toBeGreaterThanOrEqual(0);
    const other = 1 - waitingOn;
    const [waiting] = await nodeHistory(dirs[other]!, "release", cluster.env);
    expect(waiting).toMatchObject({ id: request!.run.id, status: "waiting", node: NODES[waitingOn] });

    cluster.daemons[waitingOn]!.child.kill("SIGKILL");
    await cluster.daemons[waitingOn]!.exited;

    const approved = await runCountd(["approve", request!.approval!.id, "--note", "ship it"], { cwd: dirs[other]!, env: cluster.env });
    expect(approved).toMatchObject({ code: 0 });

    await vi.waitFor(
      async () => expect((await nodeHistory(dirs[other]!, "release", cluster.env)).map((run) => run.status)).toEqual(["ok"]),
      SLOW,
    );
    await vi.waitFor(() => expect(bodies().map((body) => body.type)).toEqual(["approval.requested", "run.completed"]), SLOW);
    expect(bodies()[1]).toMatchObject({ run: { id: request!.run.id }, result: "Marking the release.Release marked." });
    // The call ran on the node that went on, and only there.
    await access(join(dirs[other]!, "workspace", "released.txt"));
    await expect(access(join(dirs[waitingOn]!, "workspace", "released.txt"))).rejects.toThrow();

    const shown = await runCountd(["show", request!.run.id], { cwd: dirs[other]!, env: cluster.env });
    expect(shown.stdout).toContain("Marking the release.");
    expect(shown.stdout).toMatch(/approval asked for exec/);
    expect(shown.stdout).toMatch(/approval approved by \S+ \(cli\): ship it/);
    expect(shown.stdout).toContain("Release marked.");
    expect(shown.stdout).not.toContain("journal ends before");
  });
});
