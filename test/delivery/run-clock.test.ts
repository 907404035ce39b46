import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RunView } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import { countdIn, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";

/** 25 hours apart: at every instant their calendar days differ, so a date shown in the wrong zone is seen. */
const JOB_ZONE = "Pacific/Kiritimati";
const DAEMON_ZONE = "Pacific/Pago_Pago";

const dayIn = (at: string, timeZone: string) =>
  new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(new Date(at));

describe("a run's placeholders", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  let smtp: SmtpPeer | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    await smtp?.close();
    daemon = smtp = undefined;
  });

  it("fill the prompt and the mail subject from one clock in the job's zone", async () => {
    mock.on({ userMessage: "Report for" }, { content: "All quiet." });
    smtp = await startSmtpPeer();
    const dir = await mkdtemp(join(tmpdir(), "countd-run-clock-"));
    await writeFile(
      join(dir, "countd.yaml"),
      [
        `timezone: ${DAEMON_ZONE}`,
        "tools:\n  exec:\n    sandbox: none",
        'console: { listen: "127.0.0.1:0" }',
        `smtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: "countd <countd@example.com>"`,
        "",
      ].join("\n"),
    );
    await mkdir(join(dir, "jobs"));
    await writeFile(
      join(dir, "jobs", "daily.yaml"),
      [
        `timezone: ${JOB_ZONE}`,
        "prompt: Report for {{date}} {{time}}.",
        "deliver:",
        '  - email: { to: [me@example.com], subject: "Daily {{date}} {{time}}" }',
        "",
      ].join("\n"),
    );
    const env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-run-clock-test" };
    daemon = await startDaemon(dir, env);
    const countd = countdIn(dir, env);
    const run = await countd(["run", "daily"]);
    expect(run.code, run.stderr).toBe(0);
    await smtp.waitFor(1);

    const [record] = JSON.parse((await countd(["history", "daily", "--json"])).stdout) as Array<{ id: string; startedAt: string }>;
    const view = JSON.parse((await countd(["show", record!.id, "--json"])).stdout) as RunView;
    const prompt = /Report for (\d{4}-\d\d-\d\d \d\d:\d\d)\./.exec(view.transcript.prompt ?? "")?.[1];
    const subject = /^Daily (\d{4}-\d\d-\d\d \d\d:\d\d)$/.exec(smtp.received[0]!.mail.subject ?? "")?.[1];
    expect(prompt).toBeDefined();
    expect(subject).toBe(prompt);
    expect(subject!.slice(0, 10)).toBe(dayIn(record!.startedAt, JOB_ZONE));
    expect(subject!.slice(0, 10)).not.toBe(dayIn(record!.startedAt, DAEMON_ZONE));
  });
});
