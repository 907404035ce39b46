import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { describe, expect, it, vi } from "vitest";
import { ClusterSessions } from "../../src/cluster/sessions.js";
import type { ChatMessage } from "../../src/providers/types.js";
import { summarizeOverflow } from "../../src/sessions/overflow.js";
import { SessionStore } from "../../src/sessions/store.js";
import { readJsonLines } from "../../src/store/jsonl.js";
import { captureLog } from "../support/log-capture.js";
import { startRedis } from "../support/redis-server.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const exchange = (n: number): ChatMessage[] => [
  { role: "user", content: `question ${n}` },
  { role: "assistant", content: `answer ${n}` },
];

describe.skipIf(!hasRedis)("the sessions of a cluster's nodes", () => {
  const redis = useRedis();

  /** A node: its own state directory (as on a machine of its own) and its connection to the cluster's Redis. */
  async function node(
    url = redis.url,
    opts: ConstructorParameters<typeof ClusterSessions>[2] = {},
  ): Promise<{ sessions: ClusterSessions; local: SessionStore; client: Redis }> {
    const client = await redis.connect("records", url);
    const local = new SessionStore(await mkdtemp(join(tmpdir(), "countd-node-")));
    return { sessions: new ClusterSessions(client, local, opts), local, client };
  }

  it("gives a shared job's run on one node the history its runs on other nodes wrote; an isolated run's session stays on its node", async () => {
    const [a, b] = [await node(), await node()];
    await a.sessions.append("cron:notes", exchange(1), "run-1");
    await b.sessions.append("cron:notes", exchange(2), "run-2");
    expect(await a.sessions.load("cron:notes")).toEqual([...exchange(1), ...exchange(2)]);
    expect(await b.sessions.load("cron:notes")).toEqual([...exchange(1), ...exchange(2)]);
    // Each node's file keeps its own runs, marked, for their transcripts.
    const lines = await readJsonLines(b.local.fileOf("cron:notes"));
    expect(lines).toEqual([{ run: "run-2", at: expect.any(String) }, ...exchange(2)]);

    await a.sessions.append("cron:notes:run-3", exchange(3), "run-3");
    expect(await a.sessions.load("cron:notes:run-3")).toEqual(exchange(3));
    expect(await b.sessions.load("cron:notes:run-3")).toEqual([]);
    expect(await a.client.exists("countd:session:cron:notes:run-3")).toBe(0);
  });

  it("creates an isolated run's file on its node while the run goes on, and removes it when the run waits for a person", async () => {
    const a = await node();
    a.sessions.expect("cron:disk:run-1");
    await vi.waitFor(() => expect(existsSync(a.local.fileOf("cron:disk:run-1"))).toBe(true), 5_000);
    await a.sessions.append("cron:disk:run-1", exchange(1), "run-1");
    expect(await readJsonLines(a.local.fileOf("cron:disk:run-1"))).toEqual([{ run: "run-1", at: expect.any(String) }, ...exchange(1)]);

    a.sessions.expect("cron:disk:run-2");
    await vi.waitFor(() => expect(existsSync(a.local.fileOf("cron:disk:run-2"))).toBe(true), 5_000);
    await a.sessions.dismiss("cron:disk:run-2");
    expect(existsSync(a.local.fileOf("cron:disk:run-2"))).toBe(false);

    // A shared session's history is Redis's: nothing is created ahead for it.
    a.sessions.expect("cron:disk");
    await a.sessions.dismiss("cron:disk");
    expect(existsSync(a.local.fileOf("cron:disk"))).toBe(false);
  });

  it("keeps each run's messages together when runs that overlap (overlap: allow) end at once on two nodes", async () => {
    const [a, b] = [await node(), await node()];
    const long = (who: string): ChatMessage[] => Array.from({ length: 20 }, (_, i) => ({ role: "assistant", content: `${who} ${i}` }));
    await Promise.all([a.sessions.append("cron:both", long("a"), "run-a"), b.sessions.append("cron:both", long("b"), "run-b")]);
    const history = await a.sessions.load("cron:both");
    expect(history).toHaveLength(40);
    const first = history[0]!.content as string;
    const [firstRun, secondRun] = first.startsWith("a") ? [long("a"), long("b")] : [long("b"), long("a")];
    expect(history).toEqual([...firstRun, ...secondRun]);
  });

  it("is bounded as a session file is: past max_history the oldest messages are summarised, then dropped, for every node", async () => {
    const [a, b] = [await node(), await node()];
    for (let n = 1; n <= 4; n++) await (n % 2 ? a : b).sessions.append("cron:long", exchange(n), `run-${n}`);
    const summaries: string[] = [];
    const summarised: ChatMessage[][] = [];
    const dropped = await summarizeOverflow({
      store: b.sessions,
      sessionId: "cron:long",
      maxHistory: 3,
      summarize: async (messages) => {
        summarised.push(messages);
        return "questions 1 to 3 were answered";
      },
      memory: { append: async (_source, text) => summaries.push(text) },
    });
    expect(dropped).toEqual({ dropped: 5 });
    expect(summarised).toEqual([[...exchange(1), ...exchange(2), exchange(3)[0]!]]);
    expect(summaries).toEqual(["questions 1 to 3 were answered"]);
    expect(await a.sessions.load("cron:long")).toEqual([exchange(3)[1]!, ...exchange(4)]);
    // Run 4's marker is left before its messages; the others went with the messages they marked.
    expect(await a.client.llen("countd:session:cron:long")).toBe(4);
  });

  it("skips an entry that is no message, saying so, and still gives the rest", async () => {
    const logs = captureLog();
    const a = await node(redis.url, { log: logs.log });
    await a.sessions.append("cron:odd", exchange(1), "run-1");
    await a.client.rpush("countd:session:cron:odd", "{not json", JSON.stringify({ role: "assistant", content: 42 }));
    await a.sessions.append("cron:odd", exchange(2), "run-2");
    expect(await a.sessions.load("cron:odd")).toEqual([...exchange(1), ...exchange(2)]);
    expect(
      logs.lines
        .filter((line) => line.msg === "shared session entry in Redis cannot be used; skipped")
        .map((line) => line.fields["problem"]),
    ).toEqual(["is not JSON", expect.stringContaining("content")]);
  });

  it(
    "does not hold a run up on a Redis that does not answer: its start fails, its end goes on and the messages are added once Redis answers",
    { timeout: 40_000 },
    async () => {
      const own = await startRedis();
      try {
        const a = await node(own.url);
        await a.sessions.append("cron:hung", exchange(1), "run-1");
        const pid = Number(/^process_id:(\d+)/m.exec(await a.client.info("server"))![1]);
        process.kill(pid, "SIGSTOP");
        try {
          await expect(a.sessions.load("cron:hung")).rejects.toThrow(
            /cannot read the shared session cron:hung from Redis: no answer within/,
          );
          await a.sessions.append("cron:hung", exchange(2), "run-2");
        } finally {
          process.kill(pid, "SIGCONT");
        }
        expect(await a.sessions.load("cron:hung")).toEqual([...exchange(1), ...exchange(2)]);
      } finally {
        await own.stop();
      }
    },
  );

  it("keeps a run's messages while Redis is away and adds them once when it is back; a run that starts meanwhile fails rather than go on without its history", async () => {
    const own = await startRedis();
    try {
      const a = await node(own.url);
      await a.sessions.append("cron:outage", exchange(1), "run-1");
      await own.stop();
      await vi.waitFor(() => expect(a.client.status).not.toBe("ready"));
      await a.sessions.append("cron:outage", exchange(2), "run-2");
      await expect(a.sessions.load("cron:outage")).rejects.toThrow(/cannot read the shared session cron:outage from Redis/);

      const back = await startRedis([], { port: own.port });
      try {
        await vi.waitFor(async () => expect(await a.client.lrange("countd:session:cron:outage", 0, -1)).toHaveLength(3), {
          timeout: 15_000,
          interval: 100,
        });
        const b = await node(back.url);
        // Redis restarted empty (its data directory was removed): what it has is the run kept meanwhile, once.
        expect(await b.sessions.load("cron:outage")).toEqual(exchange(2));
        await a.sessions.append("cron:outage", exchange(3), "run-3");
        expect(await b.sessions.load("cron:outage")).toEqual([...exchange(2), ...exchange(3)]);
      } finally {
        await back.stop();
      }
    } finally {
      await own.stop();
    }
  });
});
