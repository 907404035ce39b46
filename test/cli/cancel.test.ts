import { afterEach, describe, expect, it, vi } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { countdFolder, countdIn, llmEnv, spawnCountd, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { chunk, startSseServer, type SseServer } from "../support/sse-server.js";

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd cancel", { timeout: 90_000 }, () => {
  let daemon: DaemonProcess | undefined;
  let llm: SseServer | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    await llm?.close();
    daemon = undefined;
    llm = undefined;
  });

  it("cancels a run in progress in the daemon, recorded cancelled; a run no longer in progress or unknown is named", async () => {
    // The answer stops after its first words: the run is in progress until it is cancelled.
    llm = await startSseServer([{ events: [chunk({ role: "assistant", content: "Working on it" })], after: "stall" }]);
    const dir = await countdFolder({ slow: "prompt: slow report\n", other: "prompt: other\n" });
    const env = llmEnv(llm.baseURL);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    const run = spawnCountd(dir, env, ["run", "slow"]);
    await vi.waitFor(() => expect(run.stdout()).toBe("Working on it"), { timeout: 15_000, interval: 50 });
    const [active] = (JSON.parse((await countd(["status", "--json"])).stdout) as StatusView).running;
    const id = active!.id;

    const cancelled = await countd(["cancel", id]);
    expect(cancelled).toMatchObject({ code: 0, stdout: `cancelling run ${id} of slow: countd show ${id} tells how it ended\n` });
    // The `countd run` that watched it ends as a run cancelled by Ctrl-C does.
    expect(await run.closed).toBe(130);
    expect(run.stderr()).toMatch(new RegExp(`^countd: run ${id} cancelled: `, "m"));
    const [record] = JSON.parse((await countd(["history", "slow", "--json"])).stdout) as RunRecord[];
    expect(record).toMatchObject({ id, status: "cancelled", error: expect.stringContaining("countd cancel") });

    expect(await countd(["cancel", id])).toMatchObject({ code: 1, stderr: `countd: run ${id} of slow is not in progress (cancelled)\n` });
    expect(await countd(["cancel", id, "--job", "other"])).toMatchObject({
      code: 1,
      stderr: `countd: no run with id "${id}" in job "other"\n`,
    });
  });
});
