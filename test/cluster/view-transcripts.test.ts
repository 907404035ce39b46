import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { Redactor } from "../../src/audit/redact.js";
import { RedisTranscripts, STORED_JOURNAL_BYTES } from "../../src/cluster/transcripts.js";
import { emptyUsage } from "../../src/providers/types.js";
import type { JournalInput } from "../../src/store/journal-entries.js";
import { RUNS_KEPT_PER_JOB } from "../../src/store/run-history.js";
import { fileSink, RunJournal } from "../../src/store/run-journal.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";
import { endedRun } from "../support/runner-jobs.js";

/* The journals a node stores in a real Redis for the others, read back as another node reads them. */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const SECRET = "sk-transcript-0123456789abcdef";
const DAY_MS = 24 * 60 * 60_000;
const END: JournalInput = { kind: "end", status: "ok", iterations: 1, tool_calls: 0, usage: emptyUsage(), cost: 0 };

const run = (id: string, node: string): RunRecord => endedRun(id, { node });

const tool = (id: string, result: string): JournalInput => ({
  kind: "tool",
  call_id: id,
  name: "read_file",
  arguments: {},
  result,
  is_error: false,
  attempts: 1,
  duration_ms: 3,
});

describe.skipIf(!hasRedis)("journals in Redis", () => {
  const redis = useRedis();
  let client: Redis;
  let n1State: string;
  let n2State: string;
  beforeEach(async () => {
    client = await redis.connect();
    n1State = await mkdtemp(join(tmpdir(), "countd-n1-"));
    n2State = await mkdtemp(join(tmpdir(), "countd-n2-"));
  });
  afterEach(async () => {
    await rm(n1State, { recursive: true, force: true });
    await rm(n2State, { recursive: true, force: true });
  });

  /** n1 writes `record`'s journal of `entries` (the prompt `prompt`) into its state directory. */
  async function journal(record: RunRecord, prompt: string, entries: JournalInput[], redactor = new Redactor([])): Promise<void> {
    const written = new RunJournal(fileSink(n1State, record.job, record.id), redactor);
    written.write({ kind: "prompt", user: written.blob(prompt) });
    for (const entry of entries) written.write(entry);
    await written.close();
  }

  const n1 = () => new RedisTranscripts(client, { node: "n1", state: () => n1State });
  const n2 = () => new RedisTranscripts(client, { node: "n2", state: () => n2State });

  it("another node reads a run's journal as its node stored it, redacted, kept for retention.sessions", async () => {
    const record = run("20261202T090000Z-aaaa", "n1");
    await journal(record, `use ${SECRET}`, [{ kind: "note", text: "done" }, tool("c1", "a.txt"), END]);
    await n1().save(record, DAY_MS, new Redactor([SECRET]));
    expect(await n2().read(record)).toEqual({
      prompt: "use [REDACTED]",
      steps: [
        { kind: "text", text: "done" },
        { kind: "tool", call_id: "c1", name: "read_file", arguments: {}, result: "a.txt", duration_ms: 3, attempts: 1 },
      ],
    });
    const ttl = await client.pttl(`countd:journal:report:${record.id}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(DAY_MS);
  });

  it("keeps tool results whole, and leaves out the entries past the size kept (its end kept), saying so", async () => {
    const big = "x".repeat(100_000);
    const record = run("20261202T090000Z-bbbb", "n1");
    await journal(record, "read", [...Array.from({ length: 200 }, (_, i) => tool(`c${i}`, big)), END]);
    await n1().save(record, DAY_MS, new Redactor([]));
    const read = await n2().read(record);
    const tools = read.steps.filter((step) => step.kind === "tool");
    expect(tools.length).toBeGreaterThan(0);
    expect(tools.length).toBeLessThan(200);
    for (const step of tools) expect(step.kind === "tool" && step.result).toBe(big);
    expect(read.steps.at(-1)).toEqual({
      kind: "text",
      text: `[${200 - tools.length} of the journal's 202 entries are not shown: it passed the ${STORED_JOURNAL_BYTES} bytes kept in Redis (the journal file on the run's node has them all)]`,
    });
    expect(read).not.toHaveProperty("incomplete");
  });

  it("keeps the newest 200 journals of a job, as its run records are kept", async () => {
    const runs = Array.from({ length: RUNS_KEPT_PER_JOB + 2 }, (_, i) => ({
      ...run(`20261202T09${String(Math.floor(i / 60)).padStart(2, "0")}${String(i % 60).padStart(2, "0")}Z-ffff`, "n1"),
      job: "busy",
      startedAt: new Date(Date.parse("2026-12-02T09:00:00.000Z") + i * 1_000).toISOString(),
    }));
    for (const record of runs) {
      await journal(record, record.id, [END]);
      await n1().save(record, DAY_MS, new Redactor([]));
    }
    expect((await n2().read(runs[0]!)).incomplete).toContain("is not in Redis");
    expect((await n2().read(runs[1]!)).incomplete).toContain("is not in Redis");
    expect(await n2().read(runs[2]!)).toEqual({ prompt: runs[2]!.id, steps: [] });
    expect(await n2().read(runs.at(-1)!)).toEqual({ prompt: runs.at(-1)!.id, steps: [] });
    expect(await client.keys("countd:journal:busy:*")).toHaveLength(RUNS_KEPT_PER_JOB);
  });

  it("a run of this node is read from its journal file; another node's run that was never stored says why", async () => {
    const own = run("20261202T090000Z-cccc", "n1");
    await journal(own, "from the files", [END]);
    expect(await n1().read(own)).toEqual({ prompt: "from the files", steps: [] });
    expect(await n2().read(run("20261202T090000Z-dddd", "n3"))).toEqual({
      steps: [],
      incomplete:
        "this run ran on node n3 and its journal is not in Redis: its node stores it as the run ends and it goes after retention.sessions; a node stopped before storing it leaves none",
    });
    expect(await n2().read({ ...run("20261202T090000Z-eeee", "n3"), status: "running" })).toEqual({ steps: [] });
  });
});
