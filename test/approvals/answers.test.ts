import { access, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, SLOW, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { allRuns } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * Every answer to an approval other than "yes, by the link", through a real daemon (in this
 * process): the request reaches a webhook receiver with its signed links, and the answer is
 * given as a person or a mail scanner would give it.
 */

interface AskedApproval {
  id: string;
  tool: string;
  arguments: unknown;
  approve_url: string;
  deny_url: string;
}

describe("approvals answered otherwise than yes", () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let hooks: WebhookReceiver;
  let dir: string;
  let countd: ConsoleDaemon;

  beforeEach(async () => {
    hooks = await startWebhookReceiver();
    dir = await consoleFolder();
  });
  afterEach(async () => {
    await daemons.cleanup();
    await hooks.close();
  });

  const start = async () => {
    countd = await startConsoleDaemon(dir, { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-approval-answers" });
    daemons.started.push(countd);
  };
  /** A job whose agent wants to run `command`, which needs a yes, then answers `final` whatever it was told. */
  const job = async (name: string, command: string, final: string, settings: string[] = []) => {
    mock.addFixture({
      match: { userMessage: `${name}, please`, hasToolResult: false },
      response: { content: `Running ${command} now.`, toolCalls: [{ name: "exec", arguments: JSON.stringify({ command }) }] },
    });
    mock.addFixture({ match: { userMessage: `${name}, please`, hasToolResult: true }, response: { content: final } });
    await writeJob(
      dir,
      name,
      [
        `prompt: ${name}, please`,
        `deliver:\n  - webhook: { url: "${hooks.url}" }`,
        `on_failure:\n  - webhook: { url: "${hooks.url}" }`,
        ...settings,
        "",
      ].join("\n"),
    );
  };
  const approveBlock = (rule: string, extra: string[] = []) =>
    ["approve:", "  rules:", `    - exec: "${rule}"`, `  ask:\n    - webhook: { url: "${hooks.url}" }`, ...extra.map((l) => `  ${l}`)].join(
      "\n",
    );

  const bodies = () => hooks.requests.map((request) => JSON.parse(request.body) as Record<string, any>);
  /** The approval request the receiver got for a job's run. */
  const asked = async (job: string): Promise<AskedApproval> => {
    let found: AskedApproval | undefined;
    await vi.waitFor(() => {
      found = bodies().find((body) => body["job"] === job && body["approval"])?.["approval"];
      expect(found).toBeDefined();
    }, SLOW);
    return found!;
  };
  const fire = async (job: string): Promise<string> => {
    const { status, body } = await countd.post(`/api/jobs/${job}/run`);
    expect(status).toBe(202);
    return body.run_id as string;
  };
  const runOf = async (job: string, id: string): Promise<RunRecord> => (await countd.get(`/api/runs/${id}?job=${job}`)).run;
  const statusBecomes = async (job: string, id: string, status: RunRecord["status"]) => {
    await vi.waitFor(async () => expect((await runOf(job, id)).status).toBe(status), SLOW);
    return runOf(job, id);
  };
  const exists = (file: string) =>
    access(join(dir, "workspace", file)).then(
      () => true,
      () => false,
    );
  /** The tool results the model was sent, each once (every later request repeats them). */
  const toolResultsSent = () =>
    mock
      .getRequests()
      .flatMap((request) => (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>)
      .filter((message) => message.role === "tool" && typeof message.content === "string")
      .map((message) => message.content as string)
      .filter((content, index, all) => all.indexOf(content) === index);
  const delivered = (job: string) => bodies().filter((body) => body["job"] === job && body["type"] === "run.completed");
  /** A browser posting the form of a link's page. */
  const postLink = (link: string, note?: string) => {
    const url = new URL(link);
    const form = new URLSearchParams({ answer: url.searchParams.get("answer")!, token: url.searchParams.get("token")! });
    if (note) form.set("note", note);
    return fetch(`${url.origin}${url.pathname}`, { method: "POST", body: form });
  };

  describe("deny", () => {
    const answers = {
      "the deny link's page": async (approval: AskedApproval) => {
        const answered = await postLink(approval.deny_url, "not on a Friday");
        expect(answered.status).toBe(200);
        expect(await answered.text()).toContain("Denied.");
      },
      "POST /api/approvals/:id/deny with a reason": async (approval: AskedApproval) => {
        const answered = await countd.api(`/api/approvals/${approval.id}/deny`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ reason: "not on a Friday" }),
        });
        expect(answered.status).toBe(200);
      },
    };
    for (const [how, answer] of Object.entries(answers)) {
      it(
        `by ${how}: the call does not run, the agent is told why, and the run goes on to its answer`,
        async () => {
          await job("tidy", "touch marker", "Left the folder as it was.", [approveBlock("touch *")]);
          await start();
          const id = await fire("tidy");
          const approval = await asked("tidy");
          expect(approval.arguments).toEqual({ command: "touch marker" });
          expect((await runOf("tidy", id)).status).toBe("waiting");

          await answer(approval);
          const run = await statusBecomes("tidy", id, "ok");
          // What the agent said before it waited begins the answer, as in a run that never stopped.
          expect(run.resultExcerpt).toBe("Running touch marker now.Left the folder as it was.");
          expect(await exists("marker")).toBe(false);
          const told = toolResultsSent();
          expect(told).toHaveLength(1);
          expect(told[0]).toMatch(/^Error: not run, a person denied it \(.+\): not on a Friday\.$/);
          await vi.waitFor(() => expect(delivered("tidy")).toHaveLength(1), SLOW);
          expect(delivered("tidy")[0]!["result"]).toContain("Left the folder as it was.");
        },
        SLOW.timeout * 2,
      );
    }
  });

  it("starts a retry of a resumed run afresh: the call is asked about again, never run twice on one yes", async () => {
    mock.addFixture({
      match: { userMessage: "flaky, please", hasToolResult: false },
      response: { content: "Logging.", toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "echo once >> ran.log" }) }] },
    });
    mock.addFixture({
      match: { userMessage: "flaky, please", hasToolResult: true },
      response: { error: { message: "bad request", type: "invalid_request_error" }, status: 400 },
    });
    await writeJob(dir, "flaky", ["prompt: flaky, please", "retry:\n  attempts: 2\n  backoff: 1s", approveBlock("echo *"), ""].join("\n"));
    await start();
    const id = await fire("flaky");
    const first = await asked("flaky");
    const answered = await countd.api(`/api/approvals/${first.id}/approve`, { method: "POST" });
    expect(answered.status).toBe(200);

    await statusBecomes("flaky", id, "error");
    // The retry asks again: one yes let one call through.
    await vi.waitFor(() => expect(bodies().filter((body) => body["job"] === "flaky" && body["approval"])).toHaveLength(2), SLOW);
    const [, second] = bodies().filter((body) => body["job"] === "flaky" && body["approval"]);
    expect(second!["approval"]["id"]).not.toBe(first.id);
    expect(second!["run"]["id"]).not.toBe(id);
    expect((await readFile(join(dir, "workspace", "ran.log"), "utf8")).split("\n").filter(Boolean)).toEqual(["once"]);
  }, 30_000);

  it("says in the log that a run waits with nobody asked, when the job names no one", async () => {
    mock.addFixture({
      match: { userMessage: "lonely, please", hasToolResult: false },
      response: { toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "echo hi" }) }] },
    });
    await writeJob(dir, "lonely", ["prompt: lonely, please", "approve:", "  rules:", '    - exec: "echo *"', ""].join("\n"));
    await start();
    const id = await fire("lonely");
    await statusBecomes("lonely", id, "waiting");
    await vi.waitFor(
      () =>
        expect(countd.log.find((line) => line.msg.includes("nobody is asked"))).toMatchObject({
          level: "warn",
          fields: { job: "lonely", runId: id },
        }),
      SLOW,
    );
    expect(hooks.requests).toEqual([]);
  });

  describe("timeout", () => {
    it(
      "with on_timeout: deny, the call is denied for want of an answer and the run goes on",
      async () => {
        await job("tidy", "touch marker", "Nobody answered; left it.", [approveBlock("touch *", ["timeout: 1s", "on_timeout: deny"])]);
        await start();
        const id = await fire("tidy");
        const approval = await asked("tidy");

        const run = await statusBecomes("tidy", id, "ok");
        // What the agent said before it waited begins the answer, as in a run that never stopped.
        expect(run.resultExcerpt).toBe("Running touch marker now.Nobody answered; left it.");
        expect(await exists("marker")).toBe(false);
        expect(toolResultsSent()).toEqual([
          expect.stringMatching(/^Error: not run, no one answered its approval request by .+, so it is denied\.$/),
        ]);
        await vi.waitFor(() => expect(delivered("tidy")).toHaveLength(1), SLOW);
        // The request is answered: its links are refused from now on.
        const late = await postLink(approval.approve_url);
        expect(late.status).toBe(410);
        expect(await late.text()).toContain("This link has expired");
        expect(await exists("marker")).toBe(false);
      },
      SLOW.timeout * 2,
    );

    it(
      "with on_timeout: fail, the run ends error with the reason and on_failure is told once",
      async () => {
        await job("tidy", "touch marker", "unreachable", [approveBlock("touch *", ["timeout: 1s", "on_timeout: fail"])]);
        await start();
        const id = await fire("tidy");
        await asked("tidy");

        const run = await statusBecomes("tidy", id, "error");
        expect(run.error).toMatch(/no one answered its approval request by .+, and approve\.on_timeout is fail/);
        expect(await exists("marker")).toBe(false);
        const failed = () => bodies().filter((body) => body["job"] === "tidy" && body["type"] === "run.failed");
        await vi.waitFor(() => expect(failed()).toHaveLength(1), SLOW);
        expect(failed()[0]!["error"]).toContain("approve.on_timeout is fail");
        await new Promise((done) => setTimeout(done, 1_000));
        expect(failed()).toHaveLength(1);
        expect(delivered("tidy")).toHaveLength(0);
      },
      SLOW.timeout * 2,
    );
  });

  it(
    "refuses a reused, a forged and another call's link, and a scanner's GETs answer nothing",
    async () => {
      await job("first", "echo first >> ran.log", "Done first.", [approveBlock("echo *")]);
      await job("second", "echo second >> ran.log", "Done second.", [approveBlock("echo *")]);
      await start();
      const firstRun = await fire("first");
      const secondRun = await fire("second");
      const first = await asked("first");
      const second = await asked("second");
      const ran = async () => (await readFile(join(dir, "workspace", "ran.log"), "utf8").catch(() => "")).split("\n").filter(Boolean);

      // A mail scanner follows every link, many times, with GET and HEAD: nothing is answered.
      for (let i = 0; i < 5; i++)
        for (const link of [second.approve_url, second.deny_url])
          for (const method of ["GET", "HEAD"]) expect((await fetch(link, { method })).status).toBe(200);
      await new Promise((done) => setTimeout(done, 500));
      expect((await runOf("second", secondRun)).status).toBe("waiting");
      expect((await countd.get(`/api/approvals`)).approvals.find((a: { id: string }) => a.id === second.id).status).toBe("waiting");

      // The first request's approve token on the second request's address.
      const otherToken = new URL(first.approve_url).searchParams.get("token")!;
      const crossed = new URL(second.approve_url);
      crossed.searchParams.set("token", otherToken);
      const other = await postLink(crossed.toString());
      expect(other.status).toBe(403);
      expect(await other.text()).toContain("This link is for another call");

      // The second request's own token, one character of its signature changed.
      const token = new URL(second.approve_url).searchParams.get("token")!;
      const at = token.indexOf(".") + 5;
      const forgedToken = `${token.slice(0, at)}${token[at] === "A" ? "B" : "A"}${token.slice(at + 1)}`;
      const forgedUrl = new URL(second.approve_url);
      forgedUrl.searchParams.set("token", forgedToken);
      expect((await fetch(forgedUrl)).status).toBe(403);
      const forged = await postLink(forgedUrl.toString());
      expect(forged.status).toBe(403);
      expect(await forged.text()).toContain("This link is forged");
      expect((await runOf("second", secondRun)).status).toBe("waiting");
      expect(await ran()).toEqual([]);

      // The first link works once; the second POST is refused and nothing runs twice.
      expect((await postLink(first.approve_url)).status).toBe(200);
      await statusBecomes("first", firstRun, "ok");
      const reused = await postLink(first.approve_url);
      expect(reused.status).toBe(410);
      expect(await reused.text()).toContain("This request was already answered");
      await new Promise((done) => setTimeout(done, 1_000));
      expect(await ran()).toEqual(["first"]);
      expect(delivered("first")).toHaveLength(1);
      expect((await runOf("second", secondRun)).status).toBe("waiting");
    },
    SLOW.timeout * 2,
  );

  it(
    "does not count the waiting time against the run's timeout",
    async () => {
      await job("tidy", "touch marker", "Touched the marker.", ["timeout: 3s", approveBlock("touch *")]);
      await start();
      const id = await fire("tidy");
      const approval = await asked("tidy");
      await new Promise((done) => setTimeout(done, 4_000));
      expect((await runOf("tidy", id)).status).toBe("waiting");

      const answered = await countd.api(`/api/approvals/${approval.id}/approve`, { method: "POST" });
      expect(answered.status).toBe(200);
      const run = await statusBecomes("tidy", id, "ok");
      // What the agent said before it waited begins the answer, as in a run that never stopped.
      expect(run.resultExcerpt).toBe("Running touch marker now.Touched the marker.");
      expect(await exists("marker")).toBe(true);
    },
    SLOW.timeout * 2,
  );

  it(
    "counts a waiting run as running for overlap: skip",
    async () => {
      await job("tidy", "touch marker", "Touched the marker.", ['schedule: "* * * * * *"', "overlap: skip", approveBlock("touch *")]);
      await start();
      await asked("tidy");
      const runs = async () => (await allRuns(countd.daemon.config.paths.state)).filter((run) => run.job === "tidy");
      await vi.waitFor(async () => expect((await runs()).filter((run) => run.status === "skipped").length).toBeGreaterThanOrEqual(2), SLOW);
      const all = await runs();
      expect(all.filter((run) => run.status === "waiting")).toHaveLength(1);
      expect(all.filter((run) => run.status !== "waiting" && run.status !== "skipped")).toEqual([]);
      expect(all.find((run) => run.status === "skipped")!.error).toBe("a run of this job was still in progress (overlap: skip)");
      expect(bodies().filter((body) => body["approval"])).toHaveLength(1);
    },
    SLOW.timeout * 2,
  );
});
