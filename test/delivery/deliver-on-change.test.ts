import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { startDaemon, stopDaemon } from "../support/cli-daemon.js";
import { runCountd, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * deliver_when: changed through the built CLI (dist/): each `countd run` is a process of its own,
 * so every run after the first compares with what an earlier process delivered, as after a restart.
 */

const PROMPT = "Any new orders?";

describe("deliver_when: changed", () => {
  const mock = useAimock();
  let dir: string;
  let hook: WebhookReceiver;
  let daemon: DaemonProcess | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-changed-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    hook = await startWebhookReceiver();
  });
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
    await hook.close();
    await rm(dir, { recursive: true, force: true });
  });

  const llm = () => ({ OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-changed-test-key" });
  const countd = (args: string[]) => runCountd(args, { cwd: dir, env: llm() });

  async function job(extra = ""): Promise<void> {
    await writeFile(
      join(dir, "jobs", "orders.yaml"),
      `prompt: ${PROMPT}\ndeliver_when: changed\n${extra}deliver:\n  - webhook: { url: '${hook.url}' }\n`,
    );
  }

  /** One `countd run` answering `answer`; resolves with its record. */
  async function runAnswering(answer: string): Promise<RunRecord> {
    mock.clearFixtures();
    mock.onMessage(PROMPT, { content: answer });
    const run = await countd(["run", "orders"]);
    expect(run.code, run.stderr).toBe(0);
    const runs = await (await StateStore.open(join(dir, "state"))).runs("orders");
    return runs.at(-1)!;
  }

  const delivered = () => hook.requests.map((request) => (JSON.parse(request.body) as { result: string }).result);

  it("delivers A, A, B twice, in three processes, and the second run says since which run it is unchanged", async () => {
    await job();
    const first = await runAnswering("Two new orders: #41 and #42.");
    // The same words, written out differently: not news.
    const second = await runAnswering("Two new orders:\r\n  #41 and #42.\n");
    const third = await runAnswering("Three new orders: #41, #42 and #43.");

    expect(delivered()).toEqual(["Two new orders: #41 and #42.", "Three new orders: #41, #42 and #43."]);
    expect([first.notDelivered, second.notDelivered, third.notDelivered]).toEqual([
      undefined,
      `unchanged since run ${first.id}`,
      undefined,
    ]);
    expect(second.status).toBe("ok");

    const shown = await countd(["show", second.id]);
    expect(shown.stdout).toContain(`Deliveries\n  not delivered: unchanged since run ${first.id}\n`);
    const json = JSON.parse((await countd(["show", second.id, "--json"])).stdout) as { run: RunRecord };
    expect(json.run.notDelivered).toBe(`unchanged since run ${first.id}`);
    expect((await countd(["history", "orders"])).stdout).toContain(`not delivered: unchanged since run ${first.id}`);
    const journal = await readFile(join(dir, "state", "journal", "orders", `${second.id}.jsonl`), "utf8");
    const end = journal
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .at(-1);
    expect(end).toMatchObject({ kind: "end", status: "ok", not_delivered: `unchanged since run ${first.id}` });
  });

  it("with changed_on, compares the ids it selects as a set: a reordered list is not delivered, a new id is", async () => {
    await job("changed_on: $.items[*].id\n");
    const first = await runAnswering('{"items": [{"id": "a1", "title": "Lamp"}, {"id": "b2", "title": "Desk"}]}');
    // Same ids, other order, other titles.
    const reordered = await runAnswering('```json\n{"items": [{"id": "b2", "title": "Desk (oak)"}, {"id": "a1"}]}\n```');
    const added = await runAnswering('{"items": [{"id": "a1"}, {"id": "b2"}, {"id": "c3", "title": "Chair"}]}');

    expect(hook.requests).toHaveLength(2);
    expect(delivered()[1]).toContain('"c3"');
    expect([reordered.notDelivered, added.notDelivered]).toEqual([`unchanged since run ${first.id}`, undefined]);
  });

  it("delivers the same answer again when every delivery of the last one went dead", async () => {
    await job();
    hook.script(400);
    const lost = await runAnswering("Two new orders.");
    const again = await runAnswering("Two new orders.");
    const quiet = await runAnswering("Two new orders.");

    expect(hook.requests.map((request) => request.status)).toEqual([400, 200]);
    expect([lost.notDelivered, again.notDelivered, quiet.notDelivered]).toEqual([undefined, undefined, `unchanged since run ${again.id}`]);
  });

  it("holds across daemons: what countd run delivered alone, a daemon compares with, also after its restart", async () => {
    await job();
    const alone = await runAnswering("No new orders.");
    daemon = await startDaemon(dir, { PATH: process.env["PATH"] ?? "", ...llm() });
    const inDaemon = await runAnswering("No new orders.");
    expect(await stopDaemon(daemon)).toBe(0);
    daemon = await startDaemon(dir, { PATH: process.env["PATH"] ?? "", ...llm() });
    const restarted = await runAnswering("No new orders.");
    const news = await runAnswering("One new order: #44.");

    expect(delivered()).toEqual(["No new orders.", "One new order: #44."]);
    expect([inDaemon.notDelivered, restarted.notDelivered, news.notDelivered]).toEqual([
      `unchanged since run ${alone.id}`,
      `unchanged since run ${alone.id}`,
      undefined,
    ]);
  });
});
