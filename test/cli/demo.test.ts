import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCountd } from "../support/daemon-process.js";

describe("countd demo", () => {
  it("keeps its output friendly when stdout is not a terminal, names its log file and the folder it keeps", async () => {
    const cwd = await mkdtemp(join(tmpdir(), "countd-demo-cli-"));
    const run = await runCountd(["demo"], { cwd });
    expect(run.code).toBe(0);
    const lines = run.stdout.split("\n");
    expect(lines.filter((line) => line.trimStart().startsWith("{"))).toEqual([]);

    const counts = [...run.stdout.matchAll(/: ok, (\d+) (tool calls?)$/gm)].map((match) => `${match[1]} ${match[2]}`);
    // The scripted replies: daily-report lists the folder and reads a note, inbox-orders reads the order.
    expect(counts).toEqual(["2 tool calls", "1 tool call"]);

    const log = /^Daemon log: +(\S+)$/m.exec(run.stdout)?.[1];
    expect(log).toBeDefined();
    const logLines = (await readFile(log!, "utf8")).trimEnd().split("\n");
    expect(logLines.map((line) => (JSON.parse(line) as { msg: string }).msg)).toContain(
      "no smtp settings: mail is written as .eml files, not sent",
    );

    const kept = /^The demo folder is kept: (\S+)/m.exec(run.stdout)?.[1];
    expect(kept).toBeDefined();
    expect(log!.startsWith(`${kept}/`)).toBe(true);
    expect((await stat(join(kept!, "state", "mail"))).isDirectory()).toBe(true);
  });
});
