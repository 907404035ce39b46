import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { shownTime } from "../../src/time.js";

const CHECK_IN = "Time to stand up and stretch.";

describe("countd start with the heartbeat", () => {
  const mock = useAimock();
  let dir: string;
  let smtp: SmtpPeer;
  let env: Record<string, string>;
  const daemons: DaemonProcess[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-heartbeat-"));
    await mkdir(join(dir, "jobs"));
    smtp = await startSmtpPeer();
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-heartbeat-test-key" };
    mock.addFixture({
      match: { userMessage: "Heartbeat check-in", hasToolResult: false },
      response: { toolCalls: [{ name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: CHECK_IN }) }] },
    });
    mock.addFixture({ match: { userMessage: "Heartbeat check-in", hasToolResult: true }, response: { content: "Sent." } });
  });
  afterEach(async () => {
    for (const daemon of daemons.splice(0)) {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
    await smtp.close();
  });

  /**
   * `every` takes any positive duration, so a second-long interval makes the first check-in due a
   * second after start. The active hours cover the whole day: an end equal to the start means all
   * day, where "00:00-23:59" would leave the test's last minute of a day outside them.
   */
  async function configure(enabled: boolean): Promise<void> {
    await writeFile(
      join(dir, "countd.yaml"),
      [
        "runner:\n  shutdown_grace: 1s",
        "tools:\n  exec:\n    sandbox: none",
        `smtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: "countd <countd@example.com>"`,
        "persona:\n  name: Ada",
        `heartbeat:\n  enabled: ${enabled}\n  every: 1s\n  active_hours: "00:00-00:00"\n  deliver:\n    - email: { to: [me@example.com] }`,
        "",
      ].join("\n"),
    );
  }

  function start(): DaemonProcess {
    const daemon = spawnDaemon(dir, env);
    daemons.push(daemon);
    return daemon;
  }

  async function startAndStop(): Promise<string> {
    const daemon = start();
    await vi.waitFor(() => expect(daemon.output()).toContain("countd started"), { timeout: 15_000, interval: 100 });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited, daemon.output()).toBe(0);
    return daemon.output();
  }

  it("mails the check-in under persona.name, carrying the id of the run that wrote it", async () => {
    await configure(true);
    const daemon = start();
    await smtp.waitFor(1);
    await vi.waitFor(() => expect(daemon.output()).toContain("heartbeat delivered"), { timeout: 15_000, interval: 100 });
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited, daemon.output()).toBe(0);

    const [run] = await allRuns(join(dir, "state"));
    const { mail } = smtp.received[0]!;
    expect(mail.subject).toMatch(/^\[Ada\] check-in \d{4}-\d{2}-\d{2}$/);
    expect(mail.headers.get("x-countd-run")).toBe(run!.id);
    expect(mail.headers.get("x-countd-job")).toBe("@heartbeat");
    expect(mail.text).toContain(CHECK_IN);
  }, 60_000);

  it("records the check-in's run, starts again after it (heartbeat on or off), and lists it in history", async () => {
    await configure(true);
    const first = start();
    await smtp.waitFor(1);
    await vi.waitFor(() => expect(first.output()).toContain("heartbeat delivered"), { timeout: 15_000, interval: 100 });
    first.child.kill("SIGTERM");
    expect(await first.exited, first.output()).toBe(0);
    expect(first.output()).not.toContain("could not save");

    const runs = await allRuns(join(dir, "state"));
    expect(runs).toEqual([expect.objectContaining({ job: "@heartbeat", reason: "heartbeat", status: "ok", resultExcerpt: CHECK_IN })]);

    expect(await startAndStop()).not.toContain("could not save");
    await configure(false);
    await startAndStop();

    for (const args of [["history"], ["history", "@heartbeat"]]) {
      const history = await runCountd(args, { cwd: dir, env });
      expect(history.stderr).toBe("");
      expect(history.code).toBe(0);
      // In the heartbeat's zone with its offset: countd.yaml names none, so the machine's.
      const started = shownTime(runs[0]!.startedAt, Intl.DateTimeFormat().resolvedOptions().timeZone).replace(/[+]/g, "\\+");
      expect(history.stdout).toMatch(new RegExp(`^${started}\\s+@heartbeat\\s+heartbeat\\s+ok\\s`, "m"));
    }
    expect(JSON.parse((await runCountd(["history", "@heartbeat", "--json"], { cwd: dir, env })).stdout)).toEqual(runs);
  }, 60_000);
});
