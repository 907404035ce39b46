import { mkdir, mkdtemp, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { loadJobFile } from "../../src/jobs/load.js";
import { runCountd, spawnDaemon } from "../support/daemon-process.js";

/**
 * Job files that are not job files: a link to a secret (a stand-in for /etc/shadow), notes, an
 * environment file, JSON. Messages about them must not echo what they hold: each is one problem,
 * naming the file and position, quoting no value, and at most a short, escaped excerpt of a key.
 */

const LEAK = /LEAKCHECK/;

/** /etc/shadow's form: every line ends in ":", so YAML reads each line as a key. */
const SHADOW = [
  "root:$6$saltsalt$LEAKCHECKroothashroothashroothashroothash:19700:0:99999:7:::",
  "daemon:*:19700:0:99999:7:::",
  "alice:$6$pepper$LEAKCHECKalicehashalicehashalicehash:19700:0:99999:7:::",
  "",
].join("\n");

let dir: string;
let secrets: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-job-files-"));
  secrets = join(dir, "elsewhere");
  await mkdir(join(dir, "jobs"));
  await mkdir(secrets);
});

async function snapshot(): Promise<string> {
  const lines: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const file = join(entry.parentPath, entry.name);
    if (entry.isFile()) lines.push(`${relative(dir, file)}: ${await readFile(file, "utf8")}`);
    else lines.push(relative(dir, file));
  }
  return lines.sort().join("\n");
}

/** A secret file outside the jobs folder, and a job file linked to it. */
async function linked(name: string, content: string): Promise<void> {
  await writeFile(join(secrets, name), content);
  await symlink(join(secrets, name), join(dir, "jobs", `${name}.yaml`));
}

const NOT_A_JOB = "not a job file: none of its";

describe("files that are no job", () => {
  it.each([
    [
      "a link to a shadow file",
      "shadow",
      SHADOW,
      `jobs/shadow.yaml:1:1: ${NOT_A_JOB} 3 keys is a job key (prompt:, schedule:, every:, at:, watch: …); its content is not shown`,
    ],
    [
      "a link to an environment file",
      "env",
      "OPENAI_API_KEY=sk-LEAKCHECK-1234\nSMTP_PASSWORD=LEAKCHECK-pw\n",
      "jobs/env.yaml:1:1: expected a job: a mapping with prompt:, schedule: …, got text",
    ],
    [
      "a link to a JSON credentials file",
      "creds",
      '{"client_secret": "LEAKCHECK-json", "token": "LEAKCHECK"}\n',
      `jobs/creds.yaml:1:1: ${NOT_A_JOB} 2 keys is a job key (prompt:, schedule:, every:, at:, watch: …); its content is not shown`,
    ],
    [
      "a link to a YAML secret",
      "k8s",
      "apiVersion: v1\nkind: Secret\ndata:\n  password: LEAKCHECK\n",
      `jobs/k8s.yaml:1:1: ${NOT_A_JOB} 3 keys is a job key (prompt:, schedule:, every:, at:, watch: …); its content is not shown`,
    ],
    [
      "a link to notes that are not YAML",
      "notes",
      "Dear admin,\nthe password is: LEAKCHECK-notes\n- really: it is\n",
      "jobs/notes.yaml:1:1: not a job file: not valid YAML, and no job key (prompt:, schedule:, every:, at:, watch: …) in it",
    ],
    [
      "a link to a private key",
      "key",
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQLEAKCHECK\n-----END OPENSSH PRIVATE KEY-----\n",
      "jobs/key.yaml:1:1: expected a job: a mapping with prompt:, schedule: …, got text",
    ],
  ])("%s is one problem that quotes none of it", async (_what, name, content, expected) => {
    await linked(name, content);
    const before = await snapshot();
    const result = await runCountd(["validate"], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`${expected}\n`);
    expect(result.stdout).toBe("1 problem in jobs/ (0 jobs valid)\n");
    expect(result.stdout + result.stderr).not.toMatch(LEAK);
    expect(await snapshot()).toBe(before);
  });

  it("keeps a job file with mistakes listed, keys cut short and escaped", async () => {
    const file = join(dir, "jobs", "job.yaml");
    const longKey = `x${"LEAKCHECK".repeat(10)}`;
    await writeFile(file, `prompt: x\n"a\\u202Eb\\u0007c": 1\n${longKey}: 2\n`);
    const { problems } = await loadJobFile(file, { workspace: dir, defaultTimezone: "UTC", jobEnv: [] });
    expect(problems).toEqual([`${file}:2:1: a\\u202eb\\u0007c: unknown key`, `${file}:3:1: ${longKey.slice(0, 32)}…: unknown key`]);
  });

  it("is logged by the running daemon as one line, without its content", async () => {
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    const daemon = spawnDaemon(dir, { OPENAI_API_KEY: "sk-job-files-test" });
    try {
      await vi.waitFor(() => expect(daemon.output()).toContain("countd started"), { timeout: 10_000 });
      await linked("shadow", SHADOW);
      await vi.waitFor(() => expect(daemon.output()).toContain(`shadow.yaml:1:1: ${NOT_A_JOB} 3 keys`), { timeout: 10_000 });
      expect(daemon.output()).not.toMatch(LEAK);
      // One line, which names the file twice: as its field and at the start of its problem.
      expect(
        daemon
          .output()
          .split("\n")
          .filter((line) => line.includes("shadow.yaml")),
      ).toHaveLength(1);
    } finally {
      daemon.child.kill("SIGKILL");
      await daemon.exited;
    }
  });
});
