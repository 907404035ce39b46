import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { jobDefaults } from "../../src/jobs/defaults.js";
import { loadJobFile } from "../../src/jobs/load.js";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countd-job-defaults-"));
  await mkdir(path.join(root, "workspace"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("jobDefaults", () => {
  it("is what a job file that gives only its prompt is loaded with", async () => {
    const file = path.join(root, "hello.yaml");
    await writeFile(file, "prompt: Say hello\n");
    const { job, problems } = await loadJobFile(file, {
      workspace: path.join(root, "workspace"),
      defaultTimezone: "UTC",
      knownTools: [],
      jobEnv: [],
    });
    expect(problems).toEqual([]);
    expect(job).toEqual({ name: "hello", file, prompt: "Say hello", timezone: "UTC", ...jobDefaults() });
  });

  it("hands out a fresh value each time, so a caller changing its lists changes no other job", () => {
    const first = jobDefaults();
    first.deliver.push({ kind: "webhook", url: "http://127.0.0.1:1/x", format: "json", headers: {} });
    first.retry.attempts = 5;
    expect(jobDefaults().deliver).toEqual([]);
    expect(jobDefaults().retry.attempts).toBe(1);
  });
});
