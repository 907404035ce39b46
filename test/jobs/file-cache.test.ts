import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JOB_FILE_CACHE, JobFileCache, openJobFileCache } from "../../src/jobs/file-cache.js";
import { readJobFiles, type JobContext, type JobFileResult } from "../../src/jobs/load.js";

/*
 * A start-up reads what earlier reads made of each job file's text from <state_dir>: every result
 * must be the one a first read gives, and an edited file must never be served from the cache.
 */

let root: string;
let jobsDir: string;
let stateDir: string;
let ctx: JobContext;
const KEY = "build-1";

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-file-cache-"));
  jobsDir = path.join(root, "jobs");
  stateDir = path.join(root, "state");
  await mkdir(jobsDir);
  await mkdir(stateDir);
  await mkdir(path.join(root, "workspace", "inbox"), { recursive: true });
  ctx = {
    workspace: path.join(root, "workspace"),
    defaultTimezone: "Europe/Berlin",
    knownTools: ["read_file", "list_dir", "write_file", "web_fetch", "exec"],
    env: { HOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", OPS: "ops@example.com" },
    jobEnv: ["HOOK_SECRET", "OPS"],
    secretNames: ["HOOK_SECRET"],
  };
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Job files as users write them: every trigger, delivery, check and setting that changes what a file gives. */
const FILES: Record<string, string> = {
  "daily-report.yaml": `name: daily-report
description: Morning summary
schedule: "0 9 * * 1-5"
timezone: America/New_York
prompt: |
  It is {{date}}. Summarise the notes.
tools: [list_dir, read_file]
timeout: 5m
overlap: skip
catch_up: 2h
retry: { attempts: 2, backoff: 5m }
deliver:
  - email: { to: [team@example.com], subject: "Daily report {{date}}" }
on_failure:
  - email: { to: ["\${OPS}"] }
`,
  "inbox.yaml": `watch:
  paths: ["inbox/**/*.csv"]
  events: [add, change, add]
  debounce: 2s
prompt: "Check {{files}}"
deliver:
  - webhook: { url: "https://chat.example.com/hooks/orders", secret: "\${HOOK_SECRET}" }
`,
  "every.yaml": `every: 90m\nprompt: Look again\nbudget: { per_run: 0.50, per_day: 5.00, tokens_per_run: 200000 }\nmodel: gpt-4o-mini\ntemperature: 0.2\n`,
  "past.yaml": `at: "2020-07-01T09:00"\nprompt: Once\n`,
  "hook.yaml": `webhook: { secret: "\${HOOK_SECRET}", max_body: 64kb }\nprompt: "Payload: {{payload}}"\n`,
  "follow.yaml": `description: after the report\nafter: { job: daily-report, status: [ok, error, ok] }\ntools: []\nprompt: "Summarise {{upstream.answer}}"\n`,
  "checked.yaml": `schedule: "*/5 * * * *"
prompt: Count the issues
output:
  schema:
    type: object
    required: [count]
    properties: { count: { type: integer } }
verify:
  - tools_called: [web_fetch]
  - expect: ['$.count >= 0']
on_verify_fail: hold
approve:
  rules:
    - exec: "git push *"
  ask:
    - email: { to: [me@example.com] }
tools: [web_fetch, exec]
`,
  "literal-secret.yaml": `webhook: { secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }\nprompt: Hi\n`,
  "broken.yaml": `schedule: "0 9 * * *"\nprompt: [unclosed\n`,
  "unknown-key.yaml": `schedul: "0 9 * * *"\nprompt: Hi\n`,
};

async function writeAll(files: Record<string, string>): Promise<string[]> {
  const written: string[] = [];
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(jobsDir, name);
    await writeFile(file, text);
    written.push(file);
  }
  return written.sort();
}

/** A full read as a start-up makes it: the cache opened, used, and saved. */
async function startUp(files: string[], context = ctx): Promise<JobFileResult[]> {
  const cache = await openJobFileCache(stateDir, KEY);
  const results = await readJobFiles(files, context, cache);
  expect(await cache!.save(files)).toBeUndefined();
  return results;
}

describe("the job file cache", () => {
  it("gives every file, valid or not, the result a read without it gives, warnings and positions included", async () => {
    const files = await writeAll(FILES);
    const uncached = await readJobFiles(files, ctx);
    // The uncached read is itself a real one: it holds jobs, problems and warnings.
    expect(uncached.filter((result) => result.job).length).toBe(8);
    expect(uncached.flatMap((result) => result.warnings).length).toBeGreaterThanOrEqual(2);
    expect(uncached.flatMap((result) => result.problems).length).toBeGreaterThanOrEqual(2);

    const first = await startUp(files);
    const second = await startUp(files);
    expect(first).toStrictEqual(uncached);
    expect(second).toStrictEqual(uncached);
  });

  it("is read: a file whose text it knows is not parsed again", async () => {
    const [file] = await writeAll({ "job.yaml": `schedule: "0 9 * * *"\nprompt: As written\n` });
    await startUp([file!]);
    // What the cache says the text gave is what the read returns, so the entry was used.
    const cache = await openJobFileCache(stateDir, KEY);
    const text = await readFile(file!, "utf8");
    const known = cache!.get(file!, text)!;
    cache!.put(file!, text, { ...known, data: { ...known.data, settings: { ...known.data.settings, prompt: "From the cache" } } });
    await cache!.save([file!]);
    const [result] = await startUp([file!]);
    expect(result!.job!.prompt).toBe("From the cache");
  });

  it("parses an edited file again, even one edited to the same size", async () => {
    const [file] = await writeAll({ "job.yaml": `schedule: "0 9 * * *"\nprompt: Report A\n` });
    expect((await startUp([file!]))[0]!.job!.prompt).toBe("Report A");
    await writeFile(file!, `schedule: "0 9 * * *"\nprompt: Report B\n`);
    expect((await startUp([file!]))[0]!.job!.prompt).toBe("Report B");
  });

  it("runs the checks against the context again: a variable unset since is the problem a first read reports", async () => {
    const files = await writeAll({ "inbox.yaml": FILES["inbox.yaml"]! });
    expect((await startUp(files))[0]!.problems).toEqual([]);
    const unset = { ...ctx, env: {} };
    const fresh = await readJobFiles(files, unset);
    expect(fresh[0]!.job).toBeUndefined();
    expect(fresh[0]!.problems.join("\n")).toContain("HOOK_SECRET");
    expect(await startUp(files, unset)).toStrictEqual(fresh);
  });

  it("keeps only the files of the last full read", async () => {
    const files = await writeAll({ "a.yaml": "prompt: A\n", "b.yaml": "prompt: B\n" });
    await startUp(files);
    await rm(files[1]!);
    await startUp([files[0]!]);
    const cache = await openJobFileCache(stateDir, KEY);
    expect(cache!.get(files[0]!, "prompt: A\n")).toBeDefined();
    expect(cache!.get(files[1]!, "prompt: B\n")).toBeUndefined();
  });

  it("is ignored when damaged, cut short or written by another build, and written anew", async () => {
    const files = await writeAll(FILES);
    const uncached = await readJobFiles(files, ctx);
    await startUp(files);
    const cacheFile = path.join(stateDir, JOB_FILE_CACHE);
    const whole = await readFile(cacheFile);
    const valid = files.find((file) => file.endsWith("every.yaml"))!;
    const text = await readFile(valid, "utf8");
    expect((await JobFileCache.open(cacheFile, KEY)).get(valid, text)).toBeDefined();

    const damaged = Buffer.from(whole);
    damaged[damaged.length - 100] = damaged[damaged.length - 100]! ^ 0xff;
    for (const bytes of [damaged, whole.subarray(0, whole.length / 2), Buffer.from("garbage")]) {
      await writeFile(cacheFile, bytes);
      expect((await JobFileCache.open(cacheFile, KEY)).get(valid, text)).toBeUndefined();
      expect(await startUp(files)).toStrictEqual(uncached);
      expect((await JobFileCache.open(cacheFile, KEY)).get(valid, text)).toBeDefined();
    }

    const other = await openJobFileCache(stateDir, "build-2");
    expect(other!.get(valid, text)).toBeUndefined();
  });

  it("is not used by code that is not the bundle, whose files keep their names as they change", async () => {
    // These tests run the sources: codeKey finds no bundle, so nothing is opened or written.
    expect(await openJobFileCache(stateDir)).toBeUndefined();
  });

  it("says why it was not written, and the read still gives every job", async () => {
    const files = await writeAll({ "a.yaml": "prompt: A\n" });
    const cache = await openJobFileCache(path.join(root, "no-such-folder"), KEY);
    const results = await readJobFiles(files, ctx, cache);
    expect(results[0]!.job!.prompt).toBe("A");
    expect((await cache!.save(files))?.message).toMatch(/ENOENT/);
  });
});
