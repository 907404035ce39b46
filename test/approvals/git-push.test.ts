import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, logLines, runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startSmtpPeer, type SmtpPeer } from "../support/smtp.js";
import { hasSystemPackage } from "../support/system-package.js";

/*
 * The built daemon (dist/) runs a job whose agent pushes to a git remote: the push waits for a
 * person's yes, asked by mail, across a restart of the daemon, and answered by the mail's link.
 */

const SLOW = { timeout: 30_000, interval: 100 };

/** A port free now, for a console that must keep its address across a restart (its links name it). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      PATH: process.env["PATH"] ?? "",
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.com",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.com",
    },
  }).trim();

const hasGit = await hasSystemPackage("git", import.meta.filename);

describe.skipIf(!hasGit)("an approval for git push, asked by mail and answered by its link after a restart", () => {
  const mock = useAimock();
  let dir: string;
  let smtp: SmtpPeer;
  let daemon: DaemonProcess | undefined;
  let port: number;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-approval-push-"));
    const workspace = join(dir, "workspace");
    await mkdir(join(workspace, "repo"), { recursive: true });
    git(workspace, "init", "-q", "--bare", "-b", "main", "remote.git");
    // The remote counts the pushes it receives.
    await writeFile(join(workspace, "remote.git", "hooks", "post-receive"), `#!/bin/sh\necho pushed >> "${join(dir, "pushes.log")}"\n`, {
      mode: 0o755,
    });
    const repo = join(workspace, "repo");
    git(repo, "init", "-q", "-b", "main");
    await writeFile(join(repo, "notes.md"), "today\n");
    git(repo, "add", "notes.md");
    git(repo, "commit", "-q", "-m", "notes");
    git(repo, "remote", "add", "origin", "../remote.git");

    smtp = await startSmtpPeer();
    port = await freePort();
    await mkdir(join(dir, "jobs"));
    await writeFile(
      join(dir, "countd.yaml"),
      [
        `smtp:\n  host: 127.0.0.1\n  port: ${smtp.port}\n  from: "countd <countd@example.com>"`,
        "runner:\n  concurrency: 1\n  shutdown_grace: 1s",
        "tools:\n  exec:\n    sandbox: none",
        "",
      ].join("\n"),
    );
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await smtp.close();
    await rm(dir, { recursive: true, force: true });
  });

  const env = () => ({ OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-approval-test", COUNTD_CONSOLE_LISTEN: `127.0.0.1:${port}` });
  const start = async () => {
    daemon = spawnDaemon(dir, env());
    await vi.waitFor(() => expect(daemon!.output()).toContain('"countd started"'), SLOW);
  };
  const stop = async () => {
    daemon!.child.kill("SIGTERM");
    expect(await daemon!.exited).toBe(0);
  };
  const runsOf = async (job: string) => (await allRuns(join(dir, "state"))).filter((run) => run.job === job);
  const pushes = async () => (await readFile(join(dir, "pushes.log"), "utf8").catch(() => "")).split("\n").filter(Boolean).length;
  const mailsTo = (to: string) => smtp.received.filter((mail) => mail.envelope.to.includes(to));

  it("waits with its slot free, survives the restart, and pushes once when the link is confirmed", async () => {
    mock.addFixture({
      match: { userMessage: "push today's notes", hasToolResult: false },
      response: {
        content: "The notes are committed; pushing them.",
        toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: "cd repo && git push origin main" }) }],
      },
    });
    mock.addFixture({ match: { userMessage: "push today's notes", hasToolResult: true }, response: { content: "Pushed the notes." } });
    mock.onMessage("say hello", { content: "hello" });
    const soon = `${new Date(Date.now() + 5_000).toISOString().slice(0, 19)}Z`;
    await writeFile(
      join(dir, "jobs", "push.yaml"),
      [
        `at: "${soon}"`,
        "prompt: push today's notes",
        "deliver:\n  - email: { to: [team@example.com] }",
        'approve:\n  rules:\n    - exec: "git push *"\n  ask:\n    - email: { to: [me@example.com] }',
        "",
      ].join("\n"),
    );
    // Runs every second: it can only run while the push waits if the wait holds no slot.
    await writeFile(join(dir, "jobs", "other.yaml"), 'schedule: "* * * * * *"\nprompt: say hello\n');
    await start();

    await vi.waitFor(async () => expect((await runsOf("push")).map((run) => run.status)).toEqual(["waiting"]), SLOW);
    await vi.waitFor(() => expect(mailsTo("me@example.com")).toHaveLength(1), SLOW);
    const request = mailsTo("me@example.com")[0]!.mail;
    const text = request.text ?? "";
    expect(request.subject).toContain("push");
    expect(text).toContain("cd repo && git push origin main");
    const links = [...text.matchAll(/http:\/\/127\.0\.0\.1:\d+\/approval\/[^\s)>\]]+/g)].map((match) => match[0]);
    const approve = links.find((link) => link.includes("answer=approve"));
    expect(approve).toBeDefined();
    expect(links.some((link) => link.includes("answer=deny"))).toBe(true);
    expect(await pushes()).toBe(0);

    const waitingSince = Date.now();
    await vi.waitFor(
      async () => expect((await runsOf("other")).some((run) => run.status === "ok" && Date.parse(run.startedAt) > waitingSince)).toBe(true),
      SLOW,
    );

    await stop();
    await writeFile(join(dir, "jobs", "other.yaml"), 'schedule: "0 0 1 1 *"\nprompt: say hello\n');
    await start();
    expect((await runsOf("push")).map((run) => run.status)).toEqual(["waiting"]);

    // A browser: the link's page first, which answers nothing, then its form's POST.
    const page = await fetch(approve!);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("git push origin main");
    expect(await pushes()).toBe(0);
    const url = new URL(approve!);
    const form = new URLSearchParams({ answer: url.searchParams.get("answer")!, token: url.searchParams.get("token")! });
    const answered = await fetch(`${url.origin}${url.pathname}`, { method: "POST", body: form });
    expect(answered.status).toBe(200);

    await vi.waitFor(async () => expect((await runsOf("push")).map((run) => run.status)).toEqual(["ok"]), SLOW);
    await vi.waitFor(() => expect(mailsTo("team@example.com")).toHaveLength(1), SLOW);
    expect(mailsTo("team@example.com")[0]!.mail.text).toContain("Pushed the notes.");
    expect(await pushes()).toBe(1);
    expect(git(join(dir, "workspace", "remote.git"), "rev-parse", "main")).toBe(git(join(dir, "workspace", "repo"), "rev-parse", "HEAD"));

    // The same link again answers nothing, and nothing runs twice.
    const again = await fetch(`${url.origin}${url.pathname}`, { method: "POST", body: form });
    expect(again.status).toBe(410);
    await new Promise((done) => setTimeout(done, 1_000));
    expect(await pushes()).toBe(1);
    expect(mailsTo("team@example.com")).toHaveLength(1);
    expect(logLines(daemon!.output(), "approval answered; the run goes on")).toHaveLength(1);
    const [run] = await runsOf("push");
    const shown = await runCountd(["show", run!.id], { cwd: dir, env: env() });
    // The journal says who answered, and the run reads as one, from its fire to its delivery.
    expect(shown.stdout).toMatch(/approval asked for exec \(the command "git push origin main" matches "git push \*"\)/);
    expect(shown.stdout).toContain("approval approved by approve link (link)");
    expect(shown.stdout).toContain("Pushed the notes.");
    expect(shown.stdout).not.toContain("journal ends before");
    // A replay serves the approved call's recorded result: nothing asks, nothing pushes again.
    const replayed = await runCountd(["replay", run!.id], { cwd: dir, env: env() });
    expect(replayed.stdout).toContain("identical");
    expect(await pushes()).toBe(1);
  }, 90_000);
});
