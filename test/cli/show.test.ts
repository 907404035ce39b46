import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunView } from "../../src/console/protocol.js";
import type { RunRecord } from "../../src/store/run-record.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";

const NOTES = Array.from({ length: 100 }, (_, i) => `line ${i + 1} of the notes`).join("\n");

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd show", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  it("shows a run's transcript in the terminal, with the daemon and without it, and as JSON", async () => {
    mock.on(
      { userMessage: "weekly numbers", sequenceIndex: 0 },
      { content: "Reading the notes first.", toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) }] },
    );
    // An escape sequence in the answer would clear the terminal of whoever reads the transcript.
    mock.on({ userMessage: "weekly numbers", sequenceIndex: 1 }, { content: "Revenue is up 4 %.\u001b[2J" });
    const dir = await countdFolder({
      weekly: "prompt: Report the weekly numbers.\ntools: [read_file]\ndeliver:\n  - email: { to: [boss@example.com] }\n",
    });
    await mkdir(join(dir, "workspace"), { recursive: true });
    await writeFile(join(dir, "workspace", "notes.txt"), NOTES);
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    expect((await countd(["run", "weekly"])).code).toBe(0);
    const [record] = JSON.parse((await countd(["history", "weekly", "--json"])).stdout) as RunRecord[];
    const id = record!.id;

    let online = "";
    await vi.waitFor(
      async () => {
        const shown = await countd(["show", id]);
        expect(shown.code).toBe(0);
        online = shown.stdout;
        expect(online).toMatch(/^Deliveries\n {2}email to boss@example\.com {2}delivered {2}\d{4}-\d\d-\d\d /m);
      },
      { timeout: 15_000, interval: 300 },
    );
    const lines = online.split("\n");
    expect(lines[0]).toBe(`weekly  run ${id}`);
    expect(online).toContain("\n  reason     manual\n  status     ok\n");
    expect(online).toMatch(/^ {2}started {4}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d$/m);
    expect(online).toMatch(/^ {2}duration {3}\S+$/m);
    expect(online).toMatch(/^ {2}tokens {5}\d+ in( \(\d+ cached\))? \/ \d+ out \(2 iterations, 1 tool call\)$/m);
    // gpt-4o-mini, priced from the bundled table: the run's cost, and each call's on its LLM line.
    expect(online).toMatch(/^ {2}cost {7}(\$\d+\.\d{4}|<\$0\.0001)$/m);
    expect(online).toContain("\nPrompt\n  Report the weekly numbers.\n");
    expect(
      lines.filter((line) => /^ {2}LLM gpt-4o-mini {2}\d+ in( \(\d+ cached\))? \/ \d+ out {2}(\$\d+\.\d{4}|<\$0\.0001) {2}\S+/.test(line)),
    ).toHaveLength(2);
    expect(online).toContain("\n    Reading the notes first.\n");
    expect(online).toMatch(/^ {2}tool read_file {2}ok {2}\d+(\.\d)?m?s$/m);
    expect(online).toContain('\n    arguments  {"path":"notes.txt"}\n');
    expect(online).toMatch(/\n {4}result {5}\[External content .*\]\n {15}line 1 of the notes\n {15}line 2 of the notes\n/);
    // Cut at 40 lines, the tool's note on untrusted content being the first.
    expect(online).toMatch(/line 39 of the notes…\n {15}\[cut: \d+ characters, 102 lines in all; --json shows the whole\]\n/);
    expect(online).not.toContain("line 40 of the notes");
    expect(online).toContain("\n    Revenue is up 4 %.\ufffd[2J\n");
    expect(online).not.toContain("\u001b");

    const json = JSON.parse((await countd(["show", id, "--json"])).stdout) as RunView;
    expect(json.run).toMatchObject({ id, job: "weekly", reason: "manual", status: "ok" });
    expect(json.transcript.steps).toContainEqual(
      expect.objectContaining({
        kind: "tool",
        name: "read_file",
        arguments: { path: "notes.txt" },
        result: expect.stringContaining("line 100 of the notes"),
      }),
    );
    expect(json.deliveries).toEqual([expect.objectContaining({ kind: "email", status: "delivered" })]);

    // Without the daemon: the same transcript, read from the run's journal in the state directory.
    expect(await stopDaemon(daemon)).toBe(0);
    daemon = undefined;
    const offline = await countd(["show", id]);
    expect(offline.code).toBe(0);
    const between = (text: string) => text.slice(text.indexOf("Prompt\n"), text.indexOf("Deliveries\n"));
    expect(between(offline.stdout)).toBe(between(online));
    expect(offline.stdout.split("\n").slice(0, 10)).toEqual(lines.slice(0, 10));
    expect(offline.stdout).toContain("Deliveries\n  (none pending or dead)\n  (acknowledged deliveries are listed while countd runs)\n");
    const offlineJson = JSON.parse((await countd(["show", id, "--job", "weekly", "--json"])).stdout) as RunView;
    expect(offlineJson).toMatchObject({ run: json.run, running: false, deliveries: [] });
    expect(offlineJson.transcript.steps.map((step) => step.kind)).toEqual(json.transcript.steps.map((step) => step.kind));
  });

  it("names a run that does not exist, with or without a daemon", async () => {
    const dir = await countdFolder({ weekly: "prompt: weekly\n" });
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    expect(await countd(["show", "20261203T090000Z-abcd"])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('countd: no run with id "20261203T090000Z-abcd"'),
    });
    daemon = await startDaemon(dir, env);
    expect(await countd(["show", "20261203T090000Z-abcd", "--job", "weekly"])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('countd: no run with id "20261203T090000Z-abcd" in job "weekly"'),
    });
  });
});
