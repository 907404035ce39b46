import { beforeEach, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { Redactor } from "../../src/audit/redact.js";
import { RedisTranscripts, STORED_RESULT_CHARS, STORED_TRANSCRIPT_BYTES } from "../../src/cluster/transcripts.js";
import { emptyUsage } from "../../src/providers/types.js";
import { RUNS_KEPT_PER_JOB } from "../../src/store/run-history.js";
import type { RunRecord } from "../../src/store/run-record.js";
import type { Transcript } from "../../src/store/transcript.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

/* The transcripts a node stores in a real Redis for the others, read back as another node reads them. */

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const SECRET = "sk-transcript-0123456789abcdef";
const DAY_MS = 24 * 60 * 60_000;

function run(id: string, node: string): RunRecord {
  return {
    id,
    job: "report",
    reason: "manual",
    scheduledAt: "2026-12-02T09:00:00.000Z",
    startedAt: "2026-12-02T09:00:00.000Z",
    finishedAt: "2026-12-02T09:01:00.000Z",
    status: "ok",
    iterations: 1,
    toolCalls: 0,
    usage: emptyUsage(),
    sessionId: `manual:report:${id}`,
    node,
  };
}

describe.skipIf(!hasRedis)("transcripts in Redis", () => {
  const redis = useRedis();
  let client: Redis;
  beforeEach(async () => {
    client = await redis.connect();
  });

  /** n1 stores `transcript` of `record`; n2 reads it. */
  async function storedAndRead(record: RunRecord, transcript: Transcript): Promise<Transcript> {
    const n1 = new RedisTranscripts(client, { node: "n1", local: { read: async () => transcript } });
    const n2 = new RedisTranscripts(client, {
      node: "n2",
      local: { read: async () => ({ steps: [], incomplete: "n2 has no files of it" }) },
    });
    await n1.save(record, DAY_MS, new Redactor([SECRET]));
    return n2.read(record);
  }

  it("another node reads a run's transcript as its node stored it, redacted, kept for retention.sessions", async () => {
    const record = run("20261202T090000Z-aaaa", "n1");
    const transcript: Transcript = {
      prompt: `use ${SECRET}`,
      steps: [
        { kind: "text", text: "done" },
        { kind: "tool", call_id: "c1", name: "exec", arguments: { cmd: "ls" }, result: "a.txt" },
      ],
    };
    const read = await storedAndRead(record, transcript);
    expect(read).toEqual({ prompt: "use [REDACTED]", steps: transcript.steps });
    const ttl = await client.pttl(`countd:transcript:report:${record.id}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(DAY_MS);
  });

  it("cuts long tool results and leaves out the steps past the size kept, saying so", async () => {
    const big = "x".repeat(STORED_RESULT_CHARS * 3);
    const steps = Array.from({ length: 200 }, (_, i) => ({
      kind: "tool" as const,
      call_id: `c${i}`,
      name: "read_file",
      arguments: {},
      result: big,
    }));
    const read = await storedAndRead(run("20261202T090000Z-bbbb", "n1"), { prompt: "read", steps });
    expect(read.steps.length).toBeGreaterThan(0);
    expect(read.steps.length).toBeLessThan(200);
    for (const step of read.steps)
      expect(
        step.kind === "tool" &&
          step.result!.startsWith("x".repeat(STORED_RESULT_CHARS)) &&
          step.result!.includes(`[cut: ${big.length} characters in all`),
      ).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(read))).toBeLessThanOrEqual(STORED_TRANSCRIPT_BYTES);
    expect(read.incomplete).toBe(
      `${200 - read.steps.length} of its 200 steps are not shown: the transcript passed the ${STORED_TRANSCRIPT_BYTES} bytes kept in Redis (the run's node shows them all)`,
    );
  });

  it("keeps the newest 200 transcripts of a job, as its run records are kept", async () => {
    const n1 = new RedisTranscripts(client, {
      node: "n1",
      local: { read: async (record) => ({ steps: [{ kind: "text", text: record.id }] }) },
    });
    const n2 = new RedisTranscripts(client, { node: "n2", local: { read: async () => ({ steps: [] }) } });
    const runs = Array.from({ length: RUNS_KEPT_PER_JOB + 2 }, (_, i) => ({
      ...run(`20261202T09${String(Math.floor(i / 60)).padStart(2, "0")}${String(i % 60).padStart(2, "0")}Z-ffff`, "n1"),
      job: "busy",
      startedAt: new Date(Date.parse("2026-12-02T09:00:00.000Z") + i * 1_000).toISOString(),
    }));
    for (const record of runs) await n1.save(record, DAY_MS, new Redactor([]));
    expect((await n2.read(runs[0]!)).incomplete).toContain("is not in Redis");
    expect((await n2.read(runs[1]!)).incomplete).toContain("is not in Redis");
    expect(await n2.read(runs[2]!)).toEqual({ steps: [{ kind: "text", text: runs[2]!.id }] });
    expect(await n2.read(runs.at(-1)!)).toEqual({ steps: [{ kind: "text", text: runs.at(-1)!.id }] });
    expect(await client.keys("countd:transcript:busy:*")).toHaveLength(RUNS_KEPT_PER_JOB);
  });

  it("a run of this node is read from its files; another node's run that was never stored says why", async () => {
    const n2 = new RedisTranscripts(client, {
      node: "n2",
      local: { read: async () => ({ steps: [{ kind: "text", text: "from the files" }] }) },
    });
    expect(await n2.read(run("20261202T090000Z-cccc", "n2"))).toEqual({ steps: [{ kind: "text", text: "from the files" }] });
    expect(await n2.read(run("20261202T090000Z-dddd", "n3"))).toEqual({
      steps: [],
      incomplete:
        "this run ran on node n3 and its transcript is not in Redis: its node stores it a second after the run ended and it goes after retention.sessions; a node stopped before storing it leaves none",
    });
    expect(await n2.read({ ...run("20261202T090000Z-eeee", "n3"), status: "running" })).toEqual({ steps: [] });
  });
});
