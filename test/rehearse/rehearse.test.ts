import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { logLines, runCountd } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * `countd rehearse` as a user runs it, beside a real SMTP server, a real webhook receiver and the
 * scripted LLM server: it prints what a run would be, then runs the job with nothing sent (the
 * mail and the webhook request are written into the rehearsal's folder, the receivers count
 * nothing), its tools on a copy of the workspace, and nothing of the job's history, state or
 * metrics changed, while its spending shows in `countd cost`.
 */

const DRAFT = [
  'prompt: "Write the daily report for {{date}}"',
  'schedule: "0 9 * * 1-5"',
  "timezone: Europe/Berlin",
  "tools: [write_file]",
].join("\n");
const ANSWER = "All green on 2026-12-07.\nNo open tickets.";

describe("countd rehearse", { timeout: 120_000 }, () => {
  const mock = useAimock();
  let dir: string;
  let smtp: SmtpPeer;
  let receiver: WebhookReceiver;
  let daemon: DaemonProcess | undefined;
  const env = () => ({ OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-rehearse-test" });
  const countd = (args: string[]) => runCountd(args, { cwd: dir, env: env() });
  const exists = (path: string) =>
    access(path).then(
      () => true,
      () => false,
    );
  /** The rehearsal folders under state/rehearsals, oldest first. */
  const rehearsalFolders = async () => (await readdir(join(dir, "state", "rehearsals")).catch(() => [])).sort();
  /** The run id `countd rehearse` names on stderr. */
  const runIdOf = (stderr: string) => /^countd: rehearsal run (\S+) /m.exec(stderr)?.[1];
  /** The folder `countd rehearse` says holds what the rehearsal made. */
  const folderOf = (stderr: string) => join(dir, /; (\S+) holds what it made$/m.exec(stderr)![1]!);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-rehearse-"));
    smtp = await startSmtpPeer();
    receiver = await startWebhookReceiver();
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "drafts"));
    await mkdir(join(dir, "workspace", "inbox"), { recursive: true });
    await writeFile(
      join(dir, "countd.yaml"),
      [
        "tools:\n  exec:\n    sandbox: none",
        'console: { listen: "127.0.0.1:0" }',
        `smtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: countd@example.com`,
        "",
      ].join("\n"),
    );
  });
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
    await smtp.close();
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("previews a draft cron job, runs it on a copy of the workspace and writes, never sends, its mail and webhook", async () => {
    await writeFile(
      join(dir, "drafts", "daily.yaml"),
      `${DRAFT}\ndeliver:\n  - email: { to: [team@example.com], subject: "Daily {{date}}" }\n  - webhook: { url: "${receiver.url}" }\n`,
    );
    mock.on(
      { userMessage: "Write the daily report", sequenceIndex: 0 },
      { toolCalls: [{ name: "write_file", arguments: JSON.stringify({ path: "report.txt", content: "green\n" }) }] },
    );
    mock.on({ userMessage: "Write the daily report", sequenceIndex: 1 }, { content: ANSWER });

    const rehearsed = await countd(["rehearse", "drafts/daily.yaml", "--at", "2026-12-07T08:00:00+01:00"]);

    // A Monday, 08:00 in Berlin: that day's 09:00 and the four weekdays after it.
    expect(rehearsed.stdout).toContain(
      [
        "Job daily (cron 0 9 * * 1-5)",
        "Next fires (Europe/Berlin):",
        "  2026-12-07 09:00 +01:00",
        "  2026-12-08 09:00 +01:00",
        "  2026-12-09 09:00 +01:00",
        "  2026-12-10 09:00 +01:00",
        "  2026-12-11 09:00 +01:00",
        "Prompt:",
        "  Write the daily report for 2026-12-07",
        "Tools (1):",
        "  write_file",
        "",
      ].join("\n"),
    );
    expect(rehearsed.stdout).toMatch(/^Size \(estimated tokens\): system [1-9]\d*, prompt [1-9]\d*, tools [1-9]\d*, total [1-9]\d*$/m);
    expect(rehearsed.stdout).toMatch(
      /^Price \(gpt-4o-mini, estimated\):\n {2}\$\d+\.\d{4} \(one call, a short answer\) to \$\d+\.\d{4} \(\d+ calls of up to \d+ tokens out\)$/m,
    );
    expect(rehearsed.stdout).toContain(`Rehearsal (nothing is sent; tools act on a copy of the workspace):\n${ANSWER}\n`);
    expect(rehearsed.code).toBe(0);
    expect(rehearsed.stderr).toMatch(/^\[tool\] write_file .* ok /m);
    expect(rehearsed.stderr).toMatch(/^countd: would have sent \(run\.completed\) email to team@example\.com: state\/rehearsals\/.*\.eml/m);
    expect(rehearsed.stderr).toMatch(/^countd: would have sent \(run\.completed\) json webhook at http:\/\/127\.0\.0\.1:\d+\/hook: /m);

    // The tool wrote into the copy, which is gone; nothing reached the SMTP server or the receiver.
    expect(await exists(join(dir, "workspace", "report.txt"))).toBe(false);
    expect(smtp.received).toHaveLength(0);
    expect(smtp.attempts).toHaveLength(0);
    expect(receiver.requests).toHaveLength(0);

    expect(await rehearsalFolders()).toHaveLength(1);
    const folder = folderOf(rehearsed.stderr);
    const deliveries = join(folder, "deliveries");
    const files = await readdir(deliveries);
    const eml = await readFile(
      join(
        deliveries,
        files.find((f) => f.endsWith(".eml"))!,
      ),
      "utf8",
    );
    expect(eml).toMatch(/^To: team@example\.com\r?$/m);
    // The subject reads the instant the prompt read, as a run at that instant would have it.
    expect(eml).toMatch(/^Subject: Daily 2026-12-07\r?$/m);
    expect(eml).toContain("No open tickets.");
    const body = files.find((f) => f.endsWith(".body"))!;
    expect(JSON.parse(await readFile(join(deliveries, body), "utf8"))).toMatchObject({
      type: "run.completed",
      job: "daily",
      run: { startedAt: "2026-12-07T07:00:00.000Z" },
      result: ANSWER,
    });
    const headers = await readFile(join(deliveries, body.replace(/\.body$/, ".headers")), "utf8");
    expect(headers).toMatch(new RegExp(`^POST ${receiver.url}\n`));
    expect(headers).toMatch(/^content-type: application\/json/im);

    // Real money was spent: the calls count, marked, under the job.
    const usage = JSON.parse(await readFile(join(folder, "rehearsal.json"), "utf8")).run.usage;
    expect(usage.inputTokens).toBeGreaterThan(0);
    const cost = await countd(["cost"]);
    expect(cost.stdout).toMatch(new RegExp(`^daily \\(rehearsal\\) +2 +${usage.inputTokens} +0 +${usage.outputTokens} +\\$`, "m"));
  });

  it("gives a watch job the file named by --files, which its run reads in the workspace copy", async () => {
    await writeFile(join(dir, "workspace", "inbox", "a.csv"), "name,amount\nalice,3\n");
    await writeFile(
      join(dir, "jobs", "inbox.yaml"),
      'prompt: "Sum the new files: {{files}}"\nwatch:\n  paths: ["inbox/*.csv"]\ntools: [read_file]\n',
    );
    // The model reads the file its prompt lists, by the path given.
    mock.onMessage("Sum the new files", (request: ChatCompletionRequest): FixtureResponse => {
      if (request.messages.some((message) => message.role === "tool")) return { content: "alice: 3" };
      const prompt = String([...request.messages].reverse().find((message) => message.role === "user")?.content);
      return { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: /: (\S+)$/.exec(prompt)![1] }) }] };
    });

    const rehearsed = await countd(["rehearse", "inbox", "--files", "workspace/inbox/a.csv"]);

    expect(rehearsed.stdout).toContain(
      `Next fires (UTC):\n  no schedule: fired by changes (add, change) to inbox/*.csv\nPrompt:\n  Sum the new files: ${join(dir, "workspace", "inbox", "a.csv")}\n`,
    );
    expect(rehearsed.stdout).toContain("alice: 3");
    expect(rehearsed.code).toBe(0);
    const runId = runIdOf(rehearsed.stderr);
    expect(runId).toBeDefined();

    const shown = await countd(["show", runId!]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^ {2}reason +rehearsal$/m);
    expect(shown.stdout).toMatch(/^ {2}tool read_file {2}ok /m);
    expect(shown.stdout).toContain("alice,3");
    expect(await countd(["history", "inbox"])).toMatchObject({
      code: 0,
      stdout: "STARTED  JOB  REASON  STATUS  DURATION  TOKENS  COST  ERROR\n",
    });
  });

  it("leaves the job's history, state, failure alerts and the daemon's metrics as they were, also when the run fails", async () => {
    await writeFile(
      join(dir, "jobs", "nightly.yaml"),
      [
        "prompt: Nightly check",
        'schedule: "0 3 * * *"',
        "retry: { attempts: 1 }",
        "deliver:\n  - email: { to: [team@example.com] }",
        "on_failure:\n  - email: { to: [ops@example.com] }",
        "",
      ].join("\n"),
    );
    mock.onMessage("Nightly check", { content: "Nightly check done." });
    daemon = await startDaemon(dir, env());
    const consoleUrl = String(logLines(daemon.output()).find((line) => typeof line["url"] === "string")?.["url"]);
    const token = (await readFile(join(dir, "state", "console.token"), "utf8")).trim();
    const runsCounted = async () => {
      const response = await fetch(new URL("/metrics", consoleUrl), { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(200);
      return (await response.text()).split("\n").filter((line) => line.startsWith("countd_runs_total{") && line.includes('"nightly"'));
    };

    // One real run: the history, the state and the metrics the rehearsals must leave alone.
    expect((await countd(["run", "nightly"])).code).toBe(0);
    await smtp.waitFor(1);
    await vi.waitFor(async () => expect(await runsCounted()).toHaveLength(1), { timeout: 10_000 });
    const history = (await countd(["history", "nightly"])).stdout;
    expect(history.trim().split("\n")).toHaveLength(2);
    const metrics = await runsCounted();
    const state = await readFile(join(dir, "state", "state.json"), "utf8");

    expect((await countd(["rehearse", "nightly"])).code).toBe(0);
    mock.clearFixtures();
    mock.onMessage("Nightly check", { error: { message: "model overloaded", type: "invalid_request_error" }, status: 400 });
    const failed = await countd(["rehearse", "nightly"]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^countd: rehearsal run \S+ error: .*model overloaded/m);
    expect(failed.stderr).toMatch(/^countd: would have sent \(run\.failed\) email to ops@example\.com: /m);

    expect(smtp.received).toHaveLength(1);
    expect((await countd(["history", "nightly"])).stdout).toBe(history);
    expect(await readFile(join(dir, "state", "state.json"), "utf8")).toBe(state);
    expect(JSON.parse(state).jobs?.nightly?.failing).toBeUndefined();
    expect(await runsCounted()).toEqual(metrics);
    expect(await rehearsalFolders()).toHaveLength(2);
    const deliveries = join(folderOf(failed.stderr), "deliveries");
    const mail = await readFile(
      join(
        deliveries,
        (await readdir(deliveries)).find((f) => f.endsWith(".eml"))!,
      ),
      "utf8",
    );
    expect(mail).toMatch(/^To: ops@example\.com\r?$/m);
    expect(mail).toContain("model overloaded");
  });

  it("stops after the preview with --no-run: no request reaches the model and no rehearsal is kept", async () => {
    await writeFile(join(dir, "drafts", "daily.yaml"), `${DRAFT}\n`);
    const previewed = await countd(["rehearse", "drafts/daily.yaml", "--at", "2026-12-07T10:00", "--no-run"]);
    expect(previewed).toMatchObject({ code: 0, stderr: expect.not.stringContaining("rehearsal run") });
    // 10:00 Berlin has passed that day's fire: the next is Tuesday's.
    expect(previewed.stdout).toMatch(/^Next fires \(Europe\/Berlin\):\n {2}2026-12-08 09:00 \+01:00\n/m);
    expect(previewed.stdout).toContain("Prompt:\n  Write the daily report for 2026-12-07\n");
    expect(previewed.stdout).not.toContain("Rehearsal (nothing is sent");
    expect(mock.getRequests()).toHaveLength(0);
    expect(await rehearsalFolders()).toEqual([]);
  });

  it("names a time it cannot read and an invalid draft's problems at their file:line:col", async () => {
    await writeFile(join(dir, "drafts", "daily.yaml"), `${DRAFT}\n`);
    const badTime = await countd(["rehearse", "drafts/daily.yaml", "--at", "tomorrow"]);
    // Called wrongly, as an unknown option is: exit 2.
    expect(badTime).toMatchObject({ code: 2, stdout: "" });
    expect(badTime.stderr).toContain('countd: --at "tomorrow" is not a time: give YYYY-MM-DDTHH:MM[:SS]');
    const noPayload = await countd(["rehearse", "drafts/daily.yaml", "--payload", "nope.json"]);
    expect(noPayload).toMatchObject({ code: 2, stdout: "", stderr: expect.stringContaining("countd: --payload nope.json: no such file") });

    await writeFile(join(dir, "drafts", "broken.yaml"), 'prompt: "Report"\nschedule: "0 9 * * 1-5"\ntimezone: Mars/Olympus\n');
    const invalid = await countd(["rehearse", "drafts/broken.yaml"]);
    expect(invalid).toMatchObject({ code: 1, stdout: "" });
    expect(invalid.stderr).toContain(
      'countd: drafts/broken.yaml is invalid:\ndrafts/broken.yaml:3:11: timezone: expected an IANA time zone name like "Asia/Shanghai", got "Mars/Olympus"\n',
    );
    expect(mock.getRequests()).toHaveLength(0);
  });
});
