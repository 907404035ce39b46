import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { runCountd } from "../support/daemon-process.js";

/** The commands here refuse their input before any model is asked: no LLM server is needed. */
describe("countd usage errors and --version", () => {
  let cwd: string;
  beforeEach(async () => {
    cwd = await mkdtemp(join(tmpdir(), "countd-usage-"));
  });
  const countd = (args: string[]) => runCountd(args, { cwd, env: { OPENAI_API_KEY: "sk-usage-test-key" } });

  it("prints the version from package.json", async () => {
    const { version } = JSON.parse(await readFile(resolve(import.meta.dirname, "../../package.json"), "utf8")) as { version: string };
    expect(await countd(["--version"])).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: "" });
    expect(await countd(["-V"])).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it.each([
    [["history", "--limit", "abc"], /option '-n, --limit <n>' argument 'abc' is invalid\. expected a whole number of at least 1\./],
    [["history", "--limit", "0"], /argument '0' is invalid/],
    [["history", "-n", "-5"], /argument '-5' is invalid/],
    [["history", "-n", "2.5"], /argument '2\.5' is invalid/],
    [["ask", ""], /value '' is invalid for argument 'message'\. it is empty\./],
    [["ask", "  \n"], /is invalid for argument 'message'\. it is empty\./],
    [["history", "--bogus"], /unknown option '--bogus'/],
  ])("countd %j is a usage error: exit 2 and the reason on stderr", async (args, reason) => {
    const run = await countd(args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(reason);
  });

  it("names the known jobs when history is asked for one that does not exist", async () => {
    await mkdir(join(cwd, "jobs"));
    await writeFile(join(cwd, "jobs", "weekly.yaml"), "prompt: weekly\n");
    await writeFile(join(cwd, "jobs", "broken.yaml"), "prompt: broken\ntimeout: soon\n");
    const run = await countd(["history", "wekly"]);
    expect(run).toMatchObject({ code: 1, stdout: "", stderr: 'countd: no job named "wekly" (known: @heartbeat, broken, weekly)\n' });
    for (const known of ["weekly", "broken", "@heartbeat"]) {
      const listed = await countd(["history", known]);
      expect(listed).toMatchObject({ code: 0, stderr: "" });
      expect(listed.stdout).toMatch(/^STARTED\s+JOB\s+REASON/);
    }
    expect((await countd(["history", "weekly", "-n", "5"])).code).toBe(0);
  });
});
