import { mkdir, realpath, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";

/*
 * Files dropped into a paused watch job's folder, with a real daemon and its real watcher: the
 * skipped fire records them, and resuming the job runs them once, as one batch.
 */
describe("a watch job's files while it is paused", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  it("are recorded with the skipped run, shown by show and history, and run once at resume", async () => {
    mock.onMessage("New files", { content: "filed them" });
    const dir = await countdFolder({});
    const inbox = join(await realpath(dir), "inbox");
    await mkdir(inbox);
    await writeFile(
      join(dir, "jobs", "inbox.yaml"),
      `prompt: "New files:\\n{{files}}"\nwatch:\n  paths: ["${inbox}/*.txt"]\n  debounce: 200ms\n`,
    );
    const countd = countdIn(dir, llmEnv(`${mock.url}/v1`));
    const runs = async () => JSON.parse((await countd(["history", "inbox", "--json"])).stdout) as RunRecord[];
    daemon = await startDaemon(dir, llmEnv(`${mock.url}/v1`));
    expect((await countd(["pause", "inbox"])).code).toBe(0);

    await writeFile(join(inbox, "a.txt"), "first\n");
    await writeFile(join(inbox, "b.txt"), "second\n");
    const files = [join(inbox, "a.txt"), join(inbox, "b.txt")];
    await vi.waitFor(async () => expect((await runs()).flatMap((run) => run.files ?? []).sort()).toEqual(files), {
      timeout: 20_000,
      interval: 300,
    });
    const skipped = await runs();
    for (const run of skipped) expect(run).toMatchObject({ status: "skipped", error: "paused", reason: "watch" });
    expect(mock.getRequests()).toEqual([]);

    const shown = await countd(["show", skipped[0]!.id]);
    expect(shown.stdout).toMatch(/^ {2}files {6}.*a\.txt/m);
    expect(shown.stdout).toContain("kept for the run at countd resume");
    expect((await countd(["history", "inbox"])).stdout).toContain(`paused (files: ${skipped[0]!.files![0]}`);

    expect(await countd(["resume", "inbox"])).toMatchObject({ code: 0, stdout: "resumed inbox\n" });
    await vi.waitFor(async () => expect((await runs()).map((run) => run.status)).toContain("ok"), { timeout: 20_000, interval: 300 });
    const ran = (await runs()).filter((run) => run.status === "ok");
    expect(ran).toEqual([expect.objectContaining({ reason: "watch", files })]);
    const prompts = mock.getRequests().map((req) => JSON.stringify(req.body));
    expect(prompts).toHaveLength(1);
    expect(prompts[0]).toContain("a.txt");
    expect(prompts[0]).toContain("b.txt");

    // Held once: a second resume, or a restart, does not run them again.
    await countd(["resume", "inbox"]);
    expect(await stopDaemon(daemon)).toBe(0);
    daemon = await startDaemon(dir, llmEnv(`${mock.url}/v1`));
    expect((await countd(["status"])).code).toBe(0);
    expect((await runs()).filter((run) => run.status === "ok")).toHaveLength(1);
  });

  it("dropped while countd is stopped and the job paused, run when the daemon starts after an offline resume", async () => {
    mock.onMessage("New files", { content: "filed them" });
    const dir = await countdFolder({});
    const inbox = join(await realpath(dir), "inbox");
    await mkdir(inbox);
    await writeFile(
      join(dir, "jobs", "inbox.yaml"),
      `prompt: "New files:\\n{{files}}"\nwatch:\n  paths: ["${inbox}/*.txt"]\n  debounce: 200ms\n`,
    );
    const countd = countdIn(dir, llmEnv(`${mock.url}/v1`));
    const runs = async () => JSON.parse((await countd(["history", "inbox", "--json"])).stdout) as RunRecord[];
    daemon = await startDaemon(dir, llmEnv(`${mock.url}/v1`));
    await countd(["pause", "inbox"]);
    await writeFile(join(inbox, "c.txt"), "third\n");
    await vi.waitFor(async () => expect((await runs()).map((run) => run.status)).toEqual(["skipped"]), { timeout: 20_000, interval: 300 });
    expect(await stopDaemon(daemon)).toBe(0);

    expect((await countd(["resume", "inbox"])).code).toBe(0);
    daemon = await startDaemon(dir, llmEnv(`${mock.url}/v1`));
    await vi.waitFor(
      async () =>
        expect((await runs()).filter((run) => run.status === "ok")).toEqual([expect.objectContaining({ files: [join(inbox, "c.txt")] })]),
      {
        timeout: 20_000,
        interval: 300,
      },
    );
  });
});
