import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { MemoryStore } from "../../src/memory/store.js";
import { memoryTools } from "../../src/tools/memory.js";
import { runTool } from "../support/sandbox.js";

let ws: string;
let store: MemoryStore;
beforeEach(async () => {
  ws = await mkdtemp(join(tmpdir(), "countd-memtools-"));
  store = new MemoryStore(ws);
});

const call = (name: string, args: unknown) => runTool(memoryTools(store), name, args, ws);

function today(): string {
  const d = new Date();
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** A MEMORY.md as a user might keep it: a heading, a note, and entries from several days. */
const SAMPLE = [
  "# Memory",
  "Free-form note about the Server room",
  "2025-01-10|user|Server db-1 runs PostgreSQL 16",
  "2025-02-01|cron:backup|Backup window is 02:00-03:00 on db-1",
  "2025-02-01|agent|User prefers reports in German",
  "2025-03-05|agent|db-2 replaced db-1 as primary SERVER",
  "",
].join("\n");

describe("memory tools", () => {
  it("memory_write appends one dated line, folding line breaks, and says which line it landed on", async () => {
    await writeFile(store.path, "# Memory");
    expect(await call("memory_write", { text: "User likes\n  short answers" })).toBe(
      `saved as line 2: ${today()}|agent|User likes short answers`,
    );
    expect(await call("memory_write", { text: "Deploys on Fridays are banned", source: "user" })).toBe(
      `saved as line 3: ${today()}|user|Deploys on Fridays are banned`,
    );
    expect(await readFile(store.path, "utf8")).toBe(
      `# Memory\n${today()}|agent|User likes short answers\n${today()}|user|Deploys on Fridays are banned\n`,
    );
  });

  it("memory_write refuses empty text", async () => {
    await expect(call("memory_write", { text: " \n " })).rejects.toThrow(/invalid arguments/);
  });

  it("memory_search finds any keyword, case-insensitive, in text or source, newest first", async () => {
    await writeFile(store.path, SAMPLE);
    expect(await call("memory_search", { query: "server BACKUP" })).toBe(
      [
        "line 6: 2025-03-05|agent|db-2 replaced db-1 as primary SERVER",
        "line 4: 2025-02-01|cron:backup|Backup window is 02:00-03:00 on db-1",
        "line 3: 2025-01-10|user|Server db-1 runs PostgreSQL 16",
      ].join("\n"),
    );
  });

  it("memory_search in and mode needs every keyword, and takes keywords with spaces", async () => {
    await writeFile(store.path, SAMPLE);
    expect(await call("memory_search", { query: "db-1 server", mode: "and" })).toBe(
      "line 6: 2025-03-05|agent|db-2 replaced db-1 as primary SERVER\nline 3: 2025-01-10|user|Server db-1 runs PostgreSQL 16",
    );
    expect(await call("memory_search", { keywords: ["reports in german"] })).toBe(
      "line 5: 2025-02-01|agent|User prefers reports in German",
    );
    expect(await call("memory_search", { query: "kubernetes", keywords: ["helm chart"], mode: "and" })).toBe(
      'no memory entry holds all of "kubernetes", "helm chart"',
    );
  });

  it("memory_search returns 15 entries by default and says when more matched", async () => {
    for (let i = 1; i <= 20; i++) await store.append("agent", `fact ${i}`, new Date(2025, 0, i));
    const lines = (await call("memory_search", { query: "fact" })).split("\n");
    expect(lines).toHaveLength(16);
    expect(lines[0]).toBe("line 20: 2025-01-20|agent|fact 20");
    expect(lines[14]).toBe("line 6: 2025-01-06|agent|fact 6");
    expect(lines[15]).toBe('[more than 15 entries match; add keywords, use mode "and", or raise limit]');
    expect((await call("memory_search", { query: "fact", limit: 20 })).split("\n")).toHaveLength(20);
  });

  it("memory_search needs a keyword", async () => {
    await expect(call("memory_search", { query: "   " })).rejects.toThrow("give at least one keyword");
  });

  it("memory_read shows the last 10 entries by default, or the last N, oldest first", async () => {
    for (let i = 1; i <= 12; i++) await store.append("agent", `fact ${i}`, new Date(2025, 0, i));
    const lines = (await call("memory_read", {})).split("\n");
    expect(lines).toHaveLength(10);
    expect(lines[0]).toBe("line 3: 2025-01-03|agent|fact 3");
    expect(lines[9]).toBe("line 12: 2025-01-12|agent|fact 12");
    expect(await call("memory_read", { last: 2 })).toBe("line 11: 2025-01-11|agent|fact 11\nline 12: 2025-01-12|agent|fact 12");
  });

  it("memory_read reads a range of file lines, skipping lines that are not entries", async () => {
    await writeFile(store.path, SAMPLE);
    expect(await call("memory_read", { start_line: 1, end_line: 3 })).toBe("line 3: 2025-01-10|user|Server db-1 runs PostgreSQL 16");
    expect(await call("memory_read", { start_line: 5 })).toBe(
      "line 5: 2025-02-01|agent|User prefers reports in German\nline 6: 2025-03-05|agent|db-2 replaced db-1 as primary SERVER",
    );
    expect(await call("memory_read", { start_line: 1, end_line: 2 })).toBe("no memory entries on lines 1-2 of MEMORY.md");
  });

  it("memory_read says when memory is empty, and rejects last together with a range", async () => {
    expect(await call("memory_read", {})).toBe("memory is empty: MEMORY.md holds no entries yet");
    await expect(call("memory_read", { last: 3, start_line: 1 })).rejects.toThrow("give either last or start_line/end_line");
  });

  it("an entry written by memory_write is found by memory_search and read back by its line", async () => {
    await writeFile(store.path, SAMPLE);
    const saved = await call("memory_write", { text: "Grafana dashboard lives at grafana.internal/d/ops", source: "chat" });
    const line = Number(/^saved as line (\d+):/.exec(saved)![1]);
    expect(line).toBe(7);
    expect(await call("memory_search", { query: "grafana" })).toBe(
      `line 7: ${today()}|chat|Grafana dashboard lives at grafana.internal/d/ops`,
    );
    expect(await call("memory_read", { start_line: line, end_line: line })).toBe(
      `line 7: ${today()}|chat|Grafana dashboard lives at grafana.internal/d/ops`,
    );
  });
});

describe("MemoryStore search and read", () => {
  it("search orders by date, then by line within a day, and honours the limit", async () => {
    await writeFile(store.path, "2025-05-01|a|late in file but older\n2025-06-01|b|newer\n2025-06-01|c|newer, later line\n");
    const hits = await store.search(["NEWER", "older"], { mode: "or", limit: 2 });
    expect(hits.map((h) => h.line)).toEqual([3, 2]);
    await expect(store.search([" ", ""], { mode: "or", limit: 5 })).rejects.toThrow("no keywords");
  });

  it("read by range counts file lines, including CRLF files, and lastEntries still works", async () => {
    await writeFile(store.path, "# head\r\n2025-01-01|x|one\r\n2025-01-02|x|two\r\n");
    expect(await store.read({ start: 3 })).toEqual([{ line: 3, date: "2025-01-02", source: "x", text: "two" }]);
    expect(await store.read({ end: 2 })).toEqual([{ line: 2, date: "2025-01-01", source: "x", text: "one" }]);
    expect((await store.lastEntries(1)).map((e) => e.text)).toEqual(["two"]);
    expect(await store.read({ last: 0 })).toEqual([]);
  });

  it("append returns the entry with its line, also after a user line without a final newline", async () => {
    await writeFile(store.path, "# head\nnote without newline");
    expect(await store.append("s", "fact", new Date(2025, 6, 4))).toEqual({ line: 3, date: "2025-07-04", source: "s", text: "fact" });
    expect(await readFile(store.path, "utf8")).toBe("# head\nnote without newline\n2025-07-04|s|fact\n");
  });
});
