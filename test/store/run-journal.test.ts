import { appendFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Redactor } from "../../src/audit/redact.js";
import { emptyUsage } from "../../src/providers/types.js";
import { fileSink, journalFile, RunJournal } from "../../src/store/run-journal.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { readTranscript } from "../../src/store/transcript.js";
import { endedRun } from "../support/runner-jobs.js";

/* A run's journal as the state directory holds it: written, read back, and what does not fit moved aside. */

const SECRET = "sk-journal-0123456789abcdef";

const record = (id: string): RunRecord => endedRun(id, { toolCalls: 1 });

describe("run journals", () => {
  let state: string;
  beforeEach(async () => {
    state = await mkdtemp(join(tmpdir(), "countd-journal-"));
  });
  afterEach(async () => {
    await rm(state, { recursive: true, force: true });
  });

  async function written(id: string, system: string, prompt: string, result: string): Promise<void> {
    const journal = new RunJournal(fileSink(state, "report", id), new Redactor([SECRET]));
    journal.write({ kind: "prompt", system: journal.blob(system), user: journal.blob(prompt) });
    journal.write({
      kind: "tool",
      call_id: "c1",
      name: "read_file",
      arguments: { path: `${SECRET}.txt` },
      result,
      is_error: false,
      attempts: 1,
      duration_ms: 2,
    });
    journal.write({ kind: "end", status: "ok", iterations: 1, tool_calls: 1, usage: emptyUsage(), cost: 0 });
    await journal.close();
  }

  it("keeps a system prompt once however many runs use it, and no secret in any file", async () => {
    const system = `You are countd's agent. ${"Be brief. ".repeat(500)}`;
    await written("20261202T090000Z-aaaa", system, "first", `key ${SECRET}`);
    await written("20261202T090100Z-bbbb", system, `second ${SECRET}`, "ok");
    const blobs = await readdir(join(state, "journal", "blobs"));
    // One system prompt and two prompts.
    expect(blobs).toHaveLength(3);
    for (const name of blobs) expect(await readFile(join(state, "journal", "blobs", name), "utf8")).not.toContain(SECRET);
    const text = await readFile(journalFile(state, "report", "20261202T090000Z-aaaa"), "utf8");
    expect(text).not.toContain(SECRET);
    expect(JSON.parse(text.split("\n")[0]!)).toMatchObject({ v: 1, kind: "prompt", at: expect.any(String) });

    const second = await readTranscript(state, record("20261202T090100Z-bbbb"));
    expect(second).toEqual({
      prompt: "second [REDACTED]",
      steps: [
        {
          kind: "tool",
          call_id: "c1",
          name: "read_file",
          arguments: { path: "[REDACTED].txt" },
          result: "ok",
          duration_ms: 2,
          attempts: 1,
        },
      ],
    });
  });

  it("names a line that does not fit in the transcript; the daemon moves it to the quarantine file, a command writes nothing", async () => {
    await written("20261202T090000Z-aaaa", "system", "prompt", "ok");
    const file = journalFile(state, "report", "20261202T090000Z-aaaa");
    await appendFile(file, '{"v":1,"kind":"tool","at":"2026-12-02T09:00:30.000Z","name":"x"}\nnot json\n');
    const before = await readFile(file, "utf8");

    // `countd show` without the daemon: a read-only command.
    const shown = await readTranscript(state, record("20261202T090000Z-aaaa"));
    expect(shown.incomplete).toContain(`${file} line 5: not JSON`);
    expect(await readFile(file, "utf8")).toBe(before);
    await expect(readFile(join(state, "quarantine.jsonl"), "utf8")).rejects.toThrow("ENOENT");

    const first = await readTranscript(state, record("20261202T090000Z-aaaa"), { moveAside: true });
    expect(first.steps).toHaveLength(1);
    expect(first.incomplete).toContain(`${file} line 4: `);
    expect(first.incomplete).toContain(`${file} line 5: not JSON`);
    const quarantined = (await readFile(join(state, "quarantine.jsonl"), "utf8")).trim().split("\n");
    expect(quarantined.map((line) => (JSON.parse(line) as { where: string }).where)).toEqual(["line 4", "line 5"]);
    // Moved aside, not reported again.
    expect(await readTranscript(state, record("20261202T090000Z-aaaa"), { moveAside: true })).toEqual({
      prompt: "prompt",
      steps: first.steps,
    });
  });

  it("says a journal that ends before its run did is incomplete", async () => {
    const journal = new RunJournal(fileSink(state, "report", "20261202T090000Z-cccc"), new Redactor([]));
    journal.write({ kind: "prompt", user: journal.blob("cut short") });
    await journal.close();
    expect(await readTranscript(state, record("20261202T090000Z-cccc"))).toEqual({
      prompt: "cut short",
      steps: [],
      incomplete: "the journal ends before the run did (countd stopped, or a write failed)",
    });
  });
});
