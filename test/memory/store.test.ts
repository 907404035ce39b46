import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { MemoryStore } from "../../src/memory/store.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-memory-"));
});

describe("MemoryStore", () => {
  it("creates the workspace and MEMORY.md on first append, one dated line per entry", async () => {
    const workspace = join(dir, "new", "workspace");
    const store = new MemoryStore(workspace);
    expect(store.path).toBe(join(workspace, "MEMORY.md"));

    await store.append("cron:daily-report", "User prefers bullet points", new Date(2025, 2, 14, 23, 59));
    await store.append("chat", "Server is db-1");

    const today = new Date();
    const pad = (n: number) => String(n).padStart(2, "0");
    const todayText = `${today.getFullYear()}-${pad(today.getMonth() + 1)}-${pad(today.getDate())}`;
    expect(await readFile(store.path, "utf8")).toBe(
      `2025-03-14|cron:daily-report|User prefers bullet points\n${todayText}|chat|Server is db-1\n`,
    );
  });

  it("folds newlines in the text to spaces and replaces | in the source", async () => {
    const store = new MemoryStore(dir);
    await store.append("job|weird\nname", "first line\r\n  second line\n\nthird | with pipe", new Date(2025, 0, 2));

    expect(await readFile(store.path, "utf8")).toBe("2025-01-02|job/weird name|first line second line third | with pipe\n");
    expect(await store.lastEntries(1)).toEqual([
      { line: 1, date: "2025-01-02", source: "job/weird name", text: "first line second line third | with pipe" },
    ]);
  });

  it("rejects an entry with no text", async () => {
    const store = new MemoryStore(dir);
    await expect(store.append("chat", " \n ")).rejects.toThrow(/empty/);
  });

  it("keeps 50 concurrent appends as 50 intact lines after the user's own text", async () => {
    const store = new MemoryStore(dir);
    // The user's last line has no newline: each append checks the file's end, so unserialised appends would race.
    await writeFile(store.path, "# Memory");
    const texts = Array.from({ length: 50 }, (_, i) => `fact number ${i} ` + "x".repeat(2000));
    await Promise.all(texts.map((t) => store.append("parallel", t, new Date(2025, 5, 1))));

    const [header, ...lines] = (await readFile(store.path, "utf8")).split("\n");
    expect(header).toBe("# Memory");
    expect(lines.pop()).toBe("");
    expect(lines.sort()).toEqual(texts.map((t) => `2025-06-01|parallel|${t}`).sort());
  });

  it("lastEntries skips lines the user wrote and keeps them in the file", async () => {
    const store = new MemoryStore(dir);
    // No trailing newline: the next append must start on its own line.
    await writeFile(store.path, "# My memory\n\nNotes for the bot\n2025-01-01|chat|old fact\nlast user note");
    await store.append("chat", "new fact", new Date(2025, 1, 1));

    expect(await readFile(store.path, "utf8")).toBe(
      "# My memory\n\nNotes for the bot\n2025-01-01|chat|old fact\nlast user note\n2025-02-01|chat|new fact\n",
    );
    expect(await store.lastEntries(10)).toEqual([
      { line: 4, date: "2025-01-01", source: "chat", text: "old fact" },
      { line: 6, date: "2025-02-01", source: "chat", text: "new fact" },
    ]);
    expect(await store.lastEntries(1)).toEqual([{ line: 6, date: "2025-02-01", source: "chat", text: "new fact" }]);
    expect(await store.lastEntries(0)).toEqual([]);
  });

  it("returns no entries when MEMORY.md does not exist yet", async () => {
    expect(await new MemoryStore(join(dir, "absent")).lastEntries(5)).toEqual([]);
  });

  it("sees an append that was started before the read", async () => {
    const store = new MemoryStore(dir);
    const appending = store.append("chat", "just written", new Date(2025, 3, 3));
    const entries = await store.lastEntries(5);
    await appending;
    expect(entries.map((e) => e.text)).toEqual(["just written"]);
  });
});
