import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { logLines, spawnDaemon } from "../support/daemon-process.js";

it("a daemon started without its jobs folder logs the folder's full path", async () => {
  // As under systemd: the working directory is the configuration's folder, and jobs/ was never made.
  const dir = await mkdtemp(join(tmpdir(), "countd-nojobs-"));
  await writeFile(join(dir, "countd.yaml"), "timezone: UTC\n");
  const daemon = spawnDaemon(dir, { OPENAI_API_KEY: "sk-missing-jobs-test" });
  await expect.poll(() => logLines(daemon.output(), "countd started"), { timeout: 15_000 }).toHaveLength(1);
  daemon.child.kill("SIGTERM");
  await daemon.exited;
  expect(logLines(daemon.output()).filter((line) => line["level"] === 50)).toEqual([
    expect.objectContaining({ msg: `${join(dir, "jobs")}: no such folder` }),
  ]);
});
