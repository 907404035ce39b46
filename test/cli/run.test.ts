import { mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver } from "../support/webhook-receiver.js";

describe("countd run", () => {
  const mock = useAimock();
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-run-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
  });

  /** The configuration's `sandbox: none` is warned about on every command; these tests are about the rest. */
  const withoutWarnings = (stderr: string) =>
    stderr
      .split(/(?<=\n)/)
      .filter((line) => !line.startsWith("countd: warning: "))
      .join("");

  const countd = (args: string[]) =>
    runCountd(args, { cwd: dir, env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-run-test-key" } });

  it("runs a job now, streams its answer, records the run and delivers it", async () => {
    mock.onMessage("weekly numbers", { content: "Revenue is up 4 %." });
    await writeFile(
      join(dir, "jobs", "weekly.yaml"),
      "prompt: Report the weekly numbers for {{date}}.\ndeliver:\n  - email: { to: [boss@example.com] }\n",
    );
    const run = await countd(["run", "weekly"]);
    expect(run).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
    const [record] = await (await StateStore.open(join(dir, "state"))).runs("weekly");
    expect(record).toMatchObject({ reason: "manual", status: "ok", resultExcerpt: "Revenue is up 4 %." });
    const mail = await readdir(join(dir, "state", "mail"));
    expect(mail).toEqual([`weekly.${record!.id}.${mail[0]!.split(".").slice(2).join(".")}`]);
    expect(await readFile(join(dir, "state", "mail", mail[0]!), "utf8")).toContain("To: boss@example.com");
  });

  it("says on stderr which run it was and what became of each delivery, stdout keeping the answer", async () => {
    mock.onMessage("weekly numbers", { content: "Revenue is up 4 %." });
    const hook = await startWebhookReceiver();
    try {
      await writeFile(
        join(dir, "jobs", "weekly.yaml"),
        `prompt: Report the weekly numbers.\ndeliver:\n  - email: { to: [boss@example.com] }\n  - webhook: { url: '${hook.url}' }\n  - webhook: { url: 'http://127.0.0.1:9/down' }\n`,
      );
      const run = await countd(["run", "weekly"]);
      expect(run).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
      const [record] = await (await StateStore.open(join(dir, "state"))).runs("weekly");
      const [said, deliveries, pending, ...rest] = withoutWarnings(run.stderr).split("\n");
      expect(said).toBe(`countd: run ${record!.id} ok`);
      expect(deliveries).toMatch(
        new RegExp(
          `^countd: deliveries: delivered: email to boss@example\\.com, json webhook at ${hook.url.replace(/\./g, "\\.")} · queued: json webhook at http://127\\.0\\.0\\.1:9/down \\(.+\\)$`,
        ),
      );
      expect([pending, ...rest]).toEqual(["countd: some deliveries are pending; the daemon retries them (see countd outbox)", ""]);
    } finally {
      await hook.close();
    }
  });

  it("exits 1 with the error when the run fails, and names an unknown job", async () => {
    mock.onMessage("broken", { error: { message: "model overloaded", type: "invalid_request_error" }, status: 400 });
    await writeFile(join(dir, "jobs", "broken.yaml"), "prompt: broken\n");
    const failed = await countd(["run", "broken"]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toBe("");
    expect(failed.stderr).toMatch(/^countd: run \S+ error: .*model overloaded/m);
    const unknown = await countd(["run", "nope"]);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringContaining('countd: no job named "nope"') });
  });

  it("keeps stdout for the answer when the run times out: the log and the notice go to stderr", async () => {
    mock.onMessage("slow numbers", { content: "Too late." }, { latency: 20_000 });
    await writeFile(join(dir, "jobs", "slow.yaml"), "prompt: slow numbers\ntimeout: 1s\n");
    const run = await countd(["run", "slow"]);
    expect(run).toMatchObject({ code: 124, stdout: "" });
    expect(run.stderr).toMatch(/^countd: run \S+ timeout: timed out after 1 second$/m);
    expect(run.stderr).toMatch(/^\{.*"msg":"run finished"/m);
  });

  it("on Ctrl-C records that the user cancelled the run, exits 130 and keeps stdout for the answer", async () => {
    const answer = "one two three four five six seven eight nine ten eleven twelve";
    mock.onMessage("long report", { content: answer }, { latency: 100 });
    await writeFile(join(dir, "jobs", "long.yaml"), "prompt: long report\n");
    let interrupted = false;
    const run = await runCountd(["run", "long"], {
      cwd: dir,
      env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-run-test-key" },
      onStdout: (_text, interrupt) => {
        if (!interrupted) {
          interrupted = true;
          interrupt();
        }
      },
    });
    expect(run.code).toBe(130);
    expect(answer.startsWith(run.stdout.trimEnd())).toBe(true);
    expect(run.stdout.trimEnd().length).toBeLessThan(answer.length);
    const [record] = await (await StateStore.open(join(dir, "state"))).runs("long");
    expect(record).toMatchObject({ status: "cancelled", error: "cancelled by the user (Ctrl-C)" });
    expect(run.stderr).toMatch(/^countd: run \S+ cancelled: cancelled by the user \(Ctrl-C\)$/m);
  });

  it("names the job's own file as invalid, with that file's problems only", async () => {
    await writeFile(join(dir, "jobs", "weekly.yaml"), "prompt: weekly\nschedule: every monday\n");
    await writeFile(join(dir, "jobs", "other.yaml"), "prompt: other\ntimeout: soon\n");
    await writeFile(join(dir, "jobs", "fine.yaml"), "prompt: fine\n");
    const run = await countd(["run", "weekly"]);
    expect(run.code).toBe(1);
    const [first, ...problems] = withoutWarnings(run.stderr).trimEnd().split("\n");
    expect(first).toBe("countd: jobs/weekly.yaml is invalid:");
    expect(problems).toEqual([expect.stringMatching(/^jobs\/weekly\.yaml:2:11: schedule: /)]);
    expect(mock.getRequests()).toEqual([]);

    const unknown = await countd(["run", "nope"]);
    expect(unknown.code).toBe(1);
    expect(withoutWarnings(unknown.stderr)).toBe(
      'countd: no job named "nope" in jobs (jobs: fine); 2 job files are invalid: jobs/other.yaml, jobs/weekly.yaml (countd validate lists their problems)\n',
    );
  });
});
