import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/** Each `verify:` kind passing and failing, and what each `on_verify_fail` does, through `countd run` and a real receiver. */
describe("verify: checks run on the answer before any delivery", () => {
  const mock = useAimock();
  let dir: string;
  let hook: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-verify-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    hook = await startWebhookReceiver();
  });
  afterEach(async () => {
    await hook.close();
  });

  const countd = (args: string[]) =>
    runCountd(args, { cwd: dir, env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-verify-test-key" } });

  /** A job reporting "the numbers", delivered to the receiver as json, with `checks` (YAML lines) under verify:. */
  async function job(name: string, checks: string, more = ""): Promise<void> {
    await writeFile(
      join(dir, "jobs", `${name}.yaml`),
      `prompt: Report the numbers.\ndeliver:\n  - webhook: { url: '${hook.url}' }\nverify:\n${checks}${more}`,
    );
  }

  async function lastRun(name: string) {
    const runs = await (await StateStore.open(join(dir, "state"))).runs(name);
    return runs.at(-1)!;
  }

  it("command: passes with exit 0 and fails with its stderr as the reason, the run ending error and nothing sent", async () => {
    mock.onMessage("Report the numbers", { content: '{"status": "ok", "sources": ["a", "b", "c"]}' });
    await job("good", `  - command: grep -q '"status":"ok"' "$COUNTD_OUTPUT" && grep -q sources\n`);
    await job("bad", `  - command: echo "no fresh data in the answer" >&2; exit 1\n`);

    expect((await countd(["run", "good"])).code).toBe(0);
    await hook.waitFor(1);
    const bad = await countd(["run", "bad"]);
    expect(bad.code).toBe(1);
    expect(await lastRun("bad")).toMatchObject({ status: "error", error: expect.stringContaining("no fresh data in the answer") });
    expect(hook.requests).toHaveLength(1);

    const shown = await countd(["show", (await lastRun("bad")).id, "--job", "bad"]);
    expect(shown.stdout).toMatch(/check 1 command echo .* FAILED: no fresh data in the answer/);
  });

  it("expect: a JSONPath assertion passes, and a failing one names the value it found", async () => {
    mock.onMessage("Report the numbers", { content: '{"status": "ok", "sources": ["a"]}' });
    await job("good", `  - expect: '$.status == "ok"'\n`);
    await job("bad", `  - expect: ["$.status", "$.sources.length >= 3"]\n`);

    expect((await countd(["run", "good"])).code).toBe(0);
    const bad = await countd(["run", "bad"]);
    expect(bad.code).toBe(1);
    expect((await lastRun("bad")).error).toBe("failed checks: expect $.status; $.sources.length >= 3: $.sources.length is 1");
    expect(hook.requests).toHaveLength(1);
  });

  it("tools_called: a claimed send without the call fails; with the call made, it passes", async () => {
    mock.on(
      { userMessage: "Report the numbers", sequenceIndex: 0 },
      { toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "report.md", content: "numbers" }) }] },
    );
    mock.on({ userMessage: "Report the numbers", sequenceIndex: 1 }, { content: "I wrote the report." });
    mock.on({ userMessage: "Report the numbers", sequenceIndex: 2 }, { content: "I wrote the report." });
    await job("wrote", "  - tools_called: [write_*]\n");
    await job("claimed", "  - tools_called: [write_file]\n");

    expect((await countd(["run", "wrote"])).code).toBe(0);
    const claimed = await countd(["run", "claimed"]);
    expect(claimed.code).toBe(1);
    expect((await lastRun("claimed")).error).toBe("failed checks: tools_called write_file: no successful call of write_file");
    expect(hook.requests).toHaveLength(1);
  });

  it("retry: the second request carries the failed checks in the same conversation, and its passing answer is delivered", async () => {
    mock.onMessage("Report the numbers", { content: '{"count": 1}' });
    mock.onMessage("failed these checks", { content: '{"count": 3}' });
    await job("numbers", "  - expect: $.count >= 3\n", "on_verify_fail: retry\n");

    const run = await countd(["run", "numbers"]);
    expect(run.code).toBe(0);
    await hook.waitFor(1);
    expect(JSON.parse(hook.requests[0]!.body)).toMatchObject({ result: '{"count": 3}' });
    const requests = mock.getRequests();
    expect(requests).toHaveLength(2);
    const second = JSON.stringify(requests[1]!.body);
    expect(second).toContain('{\\"count\\": 1}');
    expect(second).toContain("expect $.count >= 3: $.count is 1");
  });

  it("deliver_flagged: the receiver gets the answer with the failed checks beside it", async () => {
    mock.onMessage("Report the numbers", { content: "Numbers are in." });
    await job("numbers", "  - tools_called: [web_fetch]\n", "on_verify_fail: deliver_flagged\n");

    expect((await countd(["run", "numbers"])).code).toBe(0);
    await hook.waitFor(1);
    expect(JSON.parse(hook.requests[0]!.body)).toMatchObject({
      result: "Numbers are in.",
      failedChecks: ["tools_called web_fetch: no successful call of web_fetch"],
    });
  });

  it("hold: nothing is sent, `countd outbox` lists it held after the run's process ended, and release sends it once", async () => {
    mock.onMessage("Report the numbers", { content: "Numbers are in." });
    await job("numbers", "  - expect: $.status\n", "on_verify_fail: hold\n");

    const run = await countd(["run", "numbers"]);
    expect(run.code).toBe(0);
    const { id: runId, status } = await lastRun("numbers");
    expect(status).toBe("ok");
    const [id] = run.stderr.match(/countd outbox release (\S+)/)!.slice(1);
    expect(id).toMatch(new RegExp(`^numbers\\.${runId}\\.`));

    const listed = await countd(["outbox"]);
    expect(listed.stdout).toMatch(
      new RegExp(`${id!.replace(/\./g, "\\.")}\\s+held\\s+.*failed checks: expect \\$\\.status: the answer is not JSON`),
    );
    expect(hook.requests).toHaveLength(0);
    // The run's transcript says the same: held, and why, not pending as if a retry were due.
    const shown = await countd(["show", runId]);
    expect(shown.stdout).toMatch(/held {2}failed checks: expect \$\.status: the answer is not JSON {2}countd outbox release /);

    const released = await countd(["outbox", "release", id!]);
    expect(released).toMatchObject({ code: 0, stdout: `${id} released and delivered\n` });
    const again = await countd(["outbox", "release", id!]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("a delivered message is not sent again");
    expect(hook.acknowledgedIds()).toEqual([id]);
  });
});
