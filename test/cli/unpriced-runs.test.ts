import { afterEach, describe, expect, it, vi } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { countdFolder, countdIn, llmEnv, spawnCountd, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { chunk, startSseServer, type SseServer } from "../support/sse-server.js";

/*
 * A model with no price is unpriced from a run's start: while it runs, and when it ends before
 * any call finished (cancelled mid-call), never $0.0000 as though it were free.
 */
describe("a run on an unpriced model", { timeout: 90_000 }, () => {
  let daemon: DaemonProcess | undefined;
  let llm: SseServer | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    await llm?.close();
    daemon = undefined;
    llm = undefined;
  });

  it("is unpriced while it runs and once cancelled mid-call, in status, history and show", async () => {
    llm = await startSseServer([{ events: [chunk({ role: "assistant", content: "Working on it" })], after: "stall" }]);
    // The openai preset prices its models by name: one it does not know has no price.
    const dir = await countdFolder({ local: "prompt: slow report\nmodel: house-llm-7b\n" });
    const env = llmEnv(llm.baseURL);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    const run = spawnCountd(dir, env, ["run", "local"]);
    await vi.waitFor(() => expect(run.stdout()).toBe("Working on it"), { timeout: 15_000, interval: 50 });

    const [active] = (JSON.parse((await countd(["status", "--json"])).stdout) as StatusView).running;
    expect(active).toMatchObject({ job: "local", cost: null });
    const status = await countd(["status"]);
    expect(status.stdout).toMatch(new RegExp(`local  ${active!.id} .* unpriced$`, "m"));
    // What the daily cap counts (budget:) is the priced calls' USD; today's runs are all unpriced.
    expect(status.stdout).toMatch(/^today: +1 run, 0 failures, tokens .*, 1 unpriced run$/m);

    expect(await countd(["cancel", active!.id])).toMatchObject({ code: 0 });
    expect(await run.closed).toBe(130);
    const [record] = JSON.parse((await countd(["history", "local", "--json"])).stdout) as RunRecord[];
    expect(record).toMatchObject({ id: active!.id, status: "cancelled", cost: null });
    const history = await countd(["history", "local"]);
    expect(history.stdout).toMatch(/cancelled .* unpriced /);
    expect(history.stdout).not.toContain("$0.0000");
    const shown = await countd(["show", active!.id]);
    expect(shown.stdout).toContain("unpriced");
    expect(shown.stdout).not.toContain("$0.0000");
  });
});
