import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, startConsoleDaemon, writeJob } from "../support/console-daemon.js";
import { runCountd } from "../support/daemon-process.js";

/*
 * A run whose tool call waits for a person's yes, as the commands a user types show it: countd
 * run (beside a daemon and alone), countd status, countd history and GET /api/status.
 */

const TIDY = 'prompt: list the files\napprove:\n  rules:\n    - tool: "list_dir"\n';

describe("a run waiting for an answer", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let env: Record<string, string>;

  beforeEach(() => {
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-waiting-runs-key" };
    mock.addFixture({
      match: { userMessage: "list the files", hasToolResult: false },
      response: { content: "Listing the workspace.", toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] },
    });
    mock.addFixture({ match: { userMessage: "list the files", hasToolResult: true }, response: { content: "two files" } });
  });
  afterEach(() => daemons.cleanup());

  it("ends countd run with exit 75 and the command that answers it, and shows in status, history and /api/status", async () => {
    const dir = await consoleFolder({ extra: "timezone: UTC\n" });
    await writeJob(dir, "tidy", TIDY);
    const console = await startConsoleDaemon(dir, env);
    daemons.started.push(console);

    const run = await runCountd(["run", "tidy"], { cwd: dir, env });
    const { approvals } = await console.get<{ approvals: Array<{ id: string; run: string; expires_at: string }> }>("/api/approvals");
    expect(approvals).toHaveLength(1);
    const [approval] = approvals;
    expect(run.stderr).toContain(`countd: run ${approval!.run} waiting for approval ${approval!.id}: countd approve ${approval!.id}\n`);
    expect(run.code).toBe(75);

    const status = await console.get<StatusView>("/api/status");
    expect(status.running).toEqual([]);
    expect(status.waiting).toEqual([
      {
        job: "tidy",
        run: approval!.run,
        approval: approval!.id,
        tool: "list_dir",
        asked_at: expect.any(String),
        expires_at: approval!.expires_at,
      },
    ]);

    const shown = await runCountd(["status"], { cwd: dir, env });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain("waiting: 1 run for an answer: countd approvals\n");
    expect(shown.stdout).toContain(
      `tidy  ${approval!.run}  list_dir  expires ${approval!.expires_at.slice(0, 10)} ${approval!.expires_at.slice(11, 19)} +00:00  (approval ${approval!.id})\n`,
    );

    const history = await runCountd(["history", "tidy"], { cwd: dir, env });
    expect(history.code).toBe(0);
    const [row] = history.stdout.trimEnd().split("\n").slice(1);
    expect(row).toMatch(/ tidy +manual +waiting +- +.*waits for an answer: countd approvals$/);
  });

  it("says no run waits in countd status when none does", async () => {
    const dir = await consoleFolder();
    const console = await startConsoleDaemon(dir, env);
    daemons.started.push(console);
    expect((await console.get<StatusView>("/api/status")).waiting).toEqual([]);
    expect((await runCountd(["status"], { cwd: dir, env })).stdout).toContain("waiting: no run waits for an answer\n");
  });

  it("ends countd run without a daemon with exit 75 and the command that answers it", async () => {
    const dir = await consoleFolder();
    await writeJob(dir, "tidy", TIDY);
    const run = await runCountd(["run", "tidy"], { cwd: dir, env });
    expect(run.stderr).toMatch(/countd: run \S+ waiting for approval (\S+): countd approve \1\n/);
    expect(run.code).toBe(75);
    const listed = await runCountd(["approvals", "--json"], { cwd: dir, env });
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ job: "tidy", tool: "list_dir", status: "waiting" })]);
  });
});
