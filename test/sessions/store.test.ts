import { appendFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../src/providers/types.js";
import { SESSIONS_KEPT_IN_MEMORY, SessionStore } from "../../src/sessions/store.js";

const user = (text: string): ChatMessage => ({ role: "user", content: text });
const assistant = (text: string): ChatMessage => ({ role: "assistant", content: text });

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "countd-sessions-"));
});

describe("SessionStore", () => {
  it("gives back the history after a restart (a new store reading the same files)", async () => {
    const first = new SessionStore(stateDir);
    const toolTurn: ChatMessage[] = [
      user("list files"),
      {
        role: "assistant",
        content: null,
        toolCalls: [{ id: "c1", name: "ls", arguments: { path: "." }, rawArguments: '{"path":"."}' }],
      },
      { role: "tool", toolCallId: "c1", name: "ls", content: "a.txt\nb.txt" },
      assistant("two files"),
    ];
    await first.append("cli", toolTurn);
    await first.append("cron:daily-report:20261130T090000Z", [user("report")]);

    const second = new SessionStore(stateDir);
    expect(await second.load("cli")).toEqual(toolTurn);
    expect(await second.load("cron:daily-report:20261130T090000Z")).toEqual([user("report")]);
    expect(await second.load("never-used")).toEqual([]);
  });

  it("keeps serving a live session from memory: the file is read once", async () => {
    const store = new SessionStore(stateDir);
    await store.append("cli", [user("one")]);
    // Written behind the store's back: a store that re-read the file each time would see it.
    await appendFile(store.fileOf("cli"), JSON.stringify(user("sneaked in")) + "\n");
    expect(await store.load("cli")).toEqual([user("one")]);
    expect(await new SessionStore(stateDir).load("cli")).toEqual([user("one"), user("sneaked in")]);
  });

  it("keeps only the most recently used sessions in memory, and reads an evicted one from its file again", async () => {
    const store = new SessionStore(stateDir);
    await store.append("first", [user("one")]);
    for (let i = 0; i < SESSIONS_KEPT_IN_MEMORY; i++) await store.append(`cron:job:${i}`, [user(`run ${i}`)]);
    await store.append("cron:job:0", [user("again")]);
    // "first" was used longest ago and left memory: the file is what counts now.
    await appendFile(store.fileOf("first"), JSON.stringify(user("written meanwhile")) + "\n");
    expect(await store.load("first")).toEqual([user("one"), user("written meanwhile")]);
    // "cron:job:0" was used recently and is still served from memory.
    await appendFile(store.fileOf("cron:job:0"), JSON.stringify(user("sneaked in")) + "\n");
    expect(await store.load("cron:job:0")).toEqual([user("run 0"), user("again")]);
  });

  it("drops the oldest messages with a marker line, honoured after a restart", async () => {
    const store = new SessionStore(stateDir);
    await store.append("cli", [user("1"), assistant("2"), user("3")]);
    await store.dropOldest("cli", 2);
    await store.append("cli", [assistant("4")]);
    expect(await store.load("cli")).toEqual([user("3"), assistant("4")]);

    const lines = (await readFile(store.fileOf("cli"), "utf8")).trim().split("\n");
    expect(lines).toHaveLength(5); // appended, never rewritten
    expect(await new SessionStore(stateDir).load("cli")).toEqual([user("3"), assistant("4")]);
  });

  it("writes a marker line naming the run before a run's messages; loading skips it, before and after a restart", async () => {
    const store = new SessionStore(stateDir);
    await store.append("cron:diary", [user("q1"), assistant("a1")], "20261130T090000Z-aaaa");
    await store.append("cron:diary", [user("q2"), assistant("a2")], "20261201T090000Z-bbbb");
    await store.append("cron:diary", [user("no run")]);
    await store.append("cron:diary", [], "20261202T090000Z-cccc");

    const lines = (await readFile(store.fileOf("cron:diary"), "utf8"))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as unknown);
    expect(lines).toEqual([
      { run: "20261130T090000Z-aaaa", at: expect.any(String) },
      user("q1"),
      assistant("a1"),
      { run: "20261201T090000Z-bbbb", at: expect.any(String) },
      user("q2"),
      assistant("a2"),
      user("no run"),
    ]);
    expect(new Date((lines[0] as { at: string }).at).toISOString()).toBe((lines[0] as { at: string }).at);
    const history = [user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("no run")];
    expect(await store.load("cron:diary")).toEqual(history);
    expect(await new SessionStore(stateDir).load("cron:diary")).toEqual(history);

    // Dropping counts messages, never markers: also after a restart.
    await store.dropOldest("cron:diary", 3);
    expect(await store.load("cron:diary")).toEqual([assistant("a2"), user("no run")]);
    expect(await new SessionStore(stateDir).load("cron:diary")).toEqual([assistant("a2"), user("no run")]);
  });

  it("skips a line torn by a crash, and later appends start on a fresh line", async () => {
    const store = new SessionStore(stateDir);
    await store.append("cli", [user("before crash")]);
    await appendFile(store.fileOf("cli"), '{"role":"assistant","content":"half wri');

    const restarted = new SessionStore(stateDir);
    expect(await restarted.load("cli")).toEqual([user("before crash")]);
    await restarted.append("cli", [user("after restart")]);

    expect(await new SessionStore(stateDir).load("cli")).toEqual([user("before crash"), user("after restart")]);
  });

  it("keeps every message whole when appends to one session overlap", async () => {
    const store = new SessionStore(stateDir);
    const big = "x".repeat(200_000);
    await Promise.all(Array.from({ length: 40 }, (_, i) => store.append("cli", [user(`q${i} ${big}`), assistant(`a${i}`)])));
    const reloaded = await new SessionStore(stateDir).load("cli");
    expect(reloaded).toHaveLength(80);
    // Each question is followed by its own answer, in call order.
    reloaded.forEach((m, i) => {
      const n = Math.floor(i / 2);
      expect(m).toEqual(i % 2 === 0 ? user(`q${n} ${big}`) : assistant(`a${n}`));
    });
  });

  it("keeps ids with '/' and '..' inside the sessions folder", async () => {
    const store = new SessionStore(stateDir);
    const ids = ["../../escape", "..", ".", "a/b/../c", "subagent:ab12"];
    for (const id of ids) await store.append(id, [user(id)]);

    expect((await readdir(stateDir)).sort()).toEqual(["sessions"]);
    expect(await readdir(join(stateDir, "sessions"))).toHaveLength(ids.length);
    const reloaded = new SessionStore(stateDir);
    for (const id of ids) expect(await reloaded.load(id)).toEqual([user(id)]);
  });

  it("names a session's file so it can be read", async () => {
    const id = "cron:daily-report:20261130T090000Z-3f2a";
    const sessions = join(stateDir, "sessions");
    const store = new SessionStore(stateDir);
    expect(store.fileOf(id)).toBe(join(sessions, "cron+daily-report+20261130T090000Z-3f2a.jsonl"));
    await store.append(id, [user("a question"), assistant("an answer")]);
    expect(await readdir(sessions)).toEqual(["cron+daily-report+20261130T090000Z-3f2a.jsonl"]);
    expect(await new SessionStore(stateDir).load(id)).toEqual([user("a question"), assistant("an answer")]);
  });

  it("creates its folder again when it was removed while countd runs, and appends there", async () => {
    const store = new SessionStore(stateDir);
    await store.append("cli", [user("before")]);
    await rm(store.dir, { recursive: true });
    await store.append("cli", [user("after")]);
    expect(await new SessionStore(stateDir).load("cli")).toEqual([user("after")]);
  });

  it("refuses an empty session id", async () => {
    await expect(new SessionStore(stateDir).load("")).rejects.toThrow("session id must not be empty");
  });
});
