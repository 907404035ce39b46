import { access, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatCompletionRequest } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";

/*
 * A fork of a run recorded with tools (`countd replay <id> --prompt|--model …`): the scripted
 * server answers the new prompt differently. The call the run made again is answered from the
 * journal (the counting command, which appends a line to a file outside the workspace, does not
 * run), a new call runs on a copy of the workspace (or is refused with --recorded-only), and the
 * report shows the answers' diff, both tool-call sequences and what each cost.
 */

const ORIGINAL = "Count the files and report";
const CHANGED = "Count the files and write a summary";
const COUNT_CALL = { name: "exec", arguments: JSON.stringify({ command: "node counter.mjs" }) };
const WRITE_CALL = { name: "write_file", arguments: JSON.stringify({ path: "summary.txt", content: "3 files\n" }) };

describe("countd replay, forked", { timeout: 120_000 }, () => {
  const mock = useAimock();
  let dir: string;
  const count = () => join(dir, "count.log");
  const counted = async () => (await readFile(count(), "utf8").catch(() => "")).split("\n").filter(Boolean).length;
  const countd = (args: string[]) =>
    runCountd(args, {
      cwd: dir,
      env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-fork-test" },
    });
  const exists = (path: string) =>
    access(path).then(
      () => true,
      () => false,
    );

  /** `countd run count` with the original prompt: one counting call, then the answer. Its run id. */
  async function recordRun(): Promise<string> {
    mock.on({ userMessage: ORIGINAL, sequenceIndex: 0 }, { toolCalls: [COUNT_CALL] });
    mock.on({ userMessage: ORIGINAL, sequenceIndex: 1 }, { content: "Counted: 3 files.\nNothing else to do.\nBye." });
    expect((await countd(["run", "count"])).code).toBe(0);
    expect(await counted()).toBe(1);
    const state = await StateStore.open(join(dir, "state"));
    const [run] = await state.runs("count");
    await state.close();
    return run!.id;
  }

  /** The changed prompt's answers: the same counting call, a new write, then a different answer. */
  function changedPrompt(): void {
    mock.on({ userMessage: CHANGED, sequenceIndex: 0 }, { toolCalls: [COUNT_CALL] });
    mock.on({ userMessage: CHANGED, sequenceIndex: 1 }, { toolCalls: [WRITE_CALL] });
    mock.on({ userMessage: CHANGED, sequenceIndex: 2 }, { content: "Counted: 3 files.\nWrote summary.txt.\nBye." });
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-fork-"));
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "workspace"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    await writeFile(join(dir, "jobs", "count.yaml"), `prompt: ${ORIGINAL}\ntools: [exec, write_file]\n`);
    // The counting tool: each run of the command adds a line to a file outside the workspace, which no copy of it holds.
    await writeFile(
      join(dir, "workspace", "counter.mjs"),
      `import { appendFileSync } from "node:fs";\nappendFileSync(${JSON.stringify(count())}, "run\\n");\n`,
    );
    await writeFile(join(dir, "new.txt"), `${CHANGED}\n`);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("with a new prompt reuses the recorded count, runs the new write on the copy and diffs the answers", async () => {
    const id = await recordRun();
    changedPrompt();
    const requests = mock.getRequests().length;

    const fork = await countd(["replay", id, "--prompt", "new.txt"]);

    expect(fork.code).toBe(0);
    // Three calls to the model, anew; the counting command did not run again, the write ran on the copy.
    expect(mock.getRequests().length - requests).toBe(3);
    expect(await counted()).toBe(1);
    expect(await exists(join(dir, "workspace", "summary.txt"))).toBe(false);
    const lines = fork.stdout.split("\n");
    expect(lines[0]).toBe(`Fork of run ${id} (count): 1 recorded tool result reused, 1 tool call run on the workspace copy.`);
    expect(fork.stdout).toMatch(
      new RegExp(
        `^answer:\\n--- ${id} \\(original\\)\\n\\+\\+\\+ \\S+ \\(fork\\)\\n@@ -1,3 \\+1,3 @@\\n Counted: 3 files\\.\\n-Nothing else to do\\.\\n\\+Wrote summary\\.txt\\.\\n Bye\\.\\n`,
        "m",
      ),
    );
    expect(fork.stdout).toContain(
      [
        "tool calls (original | fork):",
        '   1  exec {"command":"node counter.mjs"} | exec {"command":"node counter.mjs"}',
        '   2  -                                   | write_file {"path":"summary.txt","content":"3 files\\n"}',
      ].join("\n"),
    );
    expect(fork.stdout).toMatch(/^tokens and price: original \d+ in, \d+ out, \$\d+\.\d{4}; fork \d+ in, \d+ out, \$\d+\.\d{4}$/m);
    expect(fork.stderr).toMatch(/^\[tool\] write_file .* ok /m);
  });

  it("with --recorded-only refuses the new call and writes nothing", async () => {
    const id = await recordRun();
    changedPrompt();

    const fork = await countd(["replay", id, "--prompt", "new.txt", "--recorded-only"]);

    expect(fork.code).toBe(0);
    expect(fork.stdout).toMatch(/^Fork of run \S+ \(count\): 1 recorded tool result reused, 0 tool calls run on the workspace copy\.$/m);
    expect(await counted()).toBe(1);
    expect(await exists(join(dir, "workspace", "summary.txt"))).toBe(false);
    // The model heard why its call had no result.
    const refused = mock
      .getRequests()
      .flatMap((request) => (request.body as ChatCompletionRequest | null)?.messages ?? [])
      .filter((message) => message.role === "tool")
      .map((message) => String(message.content));
    expect(refused).toContainEqual(expect.stringContaining(`not run, run ${id} recorded no result for this call`));
    const forkRun = /countd show (\S+) shows the fork's transcript/.exec(fork.stdout)![1]!;
    const shown = await countd(["show", forkRun]);
    expect(shown.stdout).toMatch(/^ {2}reason +fork$/m);
    expect(shown.stdout).toContain("Error: not run, run");
  });

  it("with --model calls that model", async () => {
    const id = await recordRun();
    mock.on({ userMessage: ORIGINAL }, { content: "Another model: 3 files." });
    const requests = mock.getRequests().length;

    const fork = await countd(["replay", id, "--model", "other-model"]);

    expect(fork.code).toBe(0);
    const asked = mock.getRequests().slice(requests);
    expect(asked.map((request) => (request.body as ChatCompletionRequest | null)?.model)).toEqual(["other-model"]);
    expect(fork.stdout).toContain("-Counted: 3 files.\n-Nothing else to do.\n-Bye.\n+Another model: 3 files.\n");
    expect(fork.stdout).toMatch(/; fork \d+ in, \d+ out, unpriced$/m);
    expect(await counted()).toBe(1);
  });
});
