import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { countdIn, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";

/** New York's offset, winter or summer; the daemon's zone is Tokyo's, +09:00, all year. */
const NEW_YORK = /[0-9] -0[45]:00\b/;
const TOKYO = "+09:00";

// Every step is a countd process of its own, as a user runs it.
describe("times in countd's output", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  it("show a job's times in its zone with its offset in every command, and --json in UTC", async () => {
    mock.on({ userMessage: "Report the numbers" }, { content: "Numbers are fine." });
    const dir = await mkdtemp(join(tmpdir(), "countd-times-"));
    await writeFile(join(dir, "countd.yaml"), "timezone: Asia/Tokyo\ntools: {exec: {sandbox: none}}\nconsole: {listen: '127.0.0.1:0'}\n");
    await mkdir(join(dir, "jobs"));
    // Nothing listens on port 9: the delivery stays pending, with a next attempt to show.
    await writeFile(
      join(dir, "jobs", "ny.yaml"),
      "timezone: America/New_York\nschedule: '0 9 * * *'\nprompt: Report the numbers.\ndeliver:\n  - webhook: { url: 'http://127.0.0.1:9/hook' }\n",
    );
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-times-test" };
    daemon = await startDaemon(dir, env);
    const countd = countdIn(dir, env);
    expect((await countd(["run", "ny"])).code).toBe(0);

    const history = await countd(["history"]);
    const row = history.stdout.split("\n").find((line) => line.includes(" ny "));
    expect(row).toMatch(NEW_YORK);
    expect(row).not.toContain(TOKYO);
    const [record] = JSON.parse((await countd(["history", "--json"])).stdout) as Array<{ id: string; startedAt: string }>;
    expect(record!.startedAt).toMatch(/Z$/);

    let outbox = "";
    await vi.waitFor(
      async () => {
        outbox = (await countd(["outbox"])).stdout;
        expect(outbox).toContain("pending");
      },
      { timeout: 15_000, interval: 300 },
    );
    const pending = outbox.split("\n").find((line) => line.includes("pending"));
    expect(pending).toMatch(NEW_YORK);
    expect(pending).not.toContain(TOKYO);
    const [entry] = JSON.parse((await countd(["outbox", "--json"])).stdout) as Array<{ nextAttemptAt: string }>;
    expect(entry!.nextAttemptAt).toMatch(/Z$/);

    const status = await countd(["status"]);
    const next = status.stdout.split("\n").find((line) => line.startsWith("next:"));
    expect(next).toMatch(/ny {2}\d{4}-\d\d-\d\d 09:00:00 -0[45]:00$/);
    const statusJson = JSON.parse((await countd(["status", "--json"])).stdout) as { next_fires: Array<{ at: string }> };
    expect(statusJson.next_fires[0]!.at).toMatch(/T1[34]:00:00(\.000)?Z$/);

    const jobs = (await countd(["jobs"])).stdout.split("\n").find((line) => line.startsWith("ny "));
    expect(jobs).toMatch(/ 09:00 -0[45]:00/);
    expect(jobs).toMatch(/ok \d{4}-\d\d-\d\d \d\d:\d\d -0[45]:00/);
    expect(jobs).not.toContain(TOKYO);

    const show = await countd(["show", record!.id]);
    expect(show.stdout).toMatch(/^ {2}started {4}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d -0[45]:00$/m);
    expect(show.stdout).toMatch(
      /^ {2}json webhook at http:\/\/127\.0\.0\.1:9\S* +pending .*next \d{4}-\d\d-\d\d \d\d:\d\d:\d\d -0[45]:00/m,
    );
    expect(show.stdout).not.toContain(TOKYO);
  });
});
