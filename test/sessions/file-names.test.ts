import { describe, expect, it } from "vitest";
import { sessionFileName, sessionIdOfFile } from "../../src/sessions/file-names.js";

describe("session file names", () => {
  it("are the session id to read, with ':' written '+'", () => {
    expect(sessionFileName("cron:daily-report:20261130T090000Z-3f2a")).toBe("cron+daily-report+20261130T090000Z-3f2a.jsonl");
    expect(sessionFileName("cron:shared.job")).toBe("cron+shared.job.jsonl");
    expect(sessionFileName("cron:@heartbeat:20261130T090000Z-3f2a")).toBe("cron+@heartbeat+20261130T090000Z-3f2a.jsonl");
    expect(sessionFileName("subagent:ab12cd34")).toBe("subagent+ab12cd34.jsonl");
    expect(sessionFileName("cli")).toBe("cli.jsonl");
    expect(sessionFileName("日报")).toBe("日报.jsonl");
  });

  it("never leave the folder, hide the file, or start like an option", () => {
    const tricky = ["../../escape", "..", ".", "a/b", "a\\b", "-rf", ".hidden", "x\u0000y", "a\nb", 'C:"*?<>|', "\u202Etxt.exe"];
    for (const id of tricky) {
      const name = sessionFileName(id);
      expect(name).toMatch(/^[^./\\\-][^/\\:*?"<>|\u0000-\u001f\u202e]*\.jsonl$/u);
    }
  });

  it("give distinct ids distinct files, and read back to their id", () => {
    const ids = [
      "cron:a:b",
      "cron:a+b",
      "cron+a+b",
      "cron%3Aa%3Ab",
      "cron:a.b",
      "a b",
      "a%20b",
      "%",
      "+",
      ":",
      "-",
      ".",
      "..",
      "日报",
      "cli",
    ];
    const names = ids.map(sessionFileName);
    expect(new Set(names).size).toBe(ids.length);
    expect(names.map(sessionIdOfFile)).toEqual(ids);
  });

  it("name no session for files countd did not write", () => {
    expect(sessionIdOfFile("notes.txt")).toBeUndefined();
    expect(sessionIdOfFile(".jsonl")).toBeUndefined();
    expect(sessionIdOfFile("100%.jsonl")).toBeUndefined();
  });

  it("refuse an empty session id", () => {
    expect(() => sessionFileName("")).toThrow("session id must not be empty");
  });
});
