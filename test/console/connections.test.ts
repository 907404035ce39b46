import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RunRecord } from "../../src/store/run-record.js";
import type { SpendLine } from "../../src/store/spend-ledger.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, llmEnv } from "../support/cli-daemon.js";
import { ANY_CONSOLE_PORT, BIN, logLines, runCountd } from "../support/daemon-process.js";

/* The console's connections against a real daemon process started under a low descriptor limit, as a small VM or `ulimit -n 256` gives it. */

const LIMIT = 256;

describe("the console's connections", { timeout: 90_000 }, () => {
  const mock = useAimock();
  const cleanups: Array<() => void> = [];
  afterEach(() => cleanups.splice(0).forEach((clean) => clean()));

  /** `countd start` under `ulimit -n LIMIT`, once it started; its console's port. */
  async function startLimited(dir: string, env: Record<string, string>) {
    const child = spawn("sh", ["-c", `ulimit -n ${LIMIT} && exec "${process.execPath}" "${BIN}" start`], {
      cwd: dir,
      env: { PATH: process.env["PATH"] ?? "", ...ANY_CONSOLE_PORT, ...env },
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    cleanups.push(() => child.kill("SIGKILL"));
    await vi.waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`countd start exited ${child.exitCode}:\n${output}`);
        if (!output.includes('"countd started"')) throw new Error("not started yet");
      },
      { timeout: 20_000, interval: 50 },
    );
    const url = logLines(output).find((line) => typeof line["url"] === "string")!["url"] as string;
    return { port: Number(new URL(url).port), output: () => output };
  }

  it("keeps firing jobs and writing their spend while idle connections flood the console, and closes the idle ones", async () => {
    mock.on({ userMessage: "weekly numbers" }, { content: "Revenue is up 4 %." });
    const dir = await countdFolder({ weekly: "prompt: Report the weekly numbers.\n" });
    const env = llmEnv(`${mock.url}/v1`);
    const daemon = await startLimited(dir, env);

    // More idle connections than the daemon has descriptors: none sends a byte.
    const idle: Socket[] = [];
    const closed = new Map<Socket, number>();
    for (let i = 0; i < LIMIT + 150; i++) {
      const socket = connect(daemon.port, "127.0.0.1");
      socket.on("error", () => {});
      // Read, as a client does: a closed connection is seen only once its end is read.
      socket.resume();
      socket.on("close", () => closed.set(socket, Date.now()));
      idle.push(socket);
    }
    cleanups.push(() => idle.forEach((socket) => socket.destroy()));
    await vi.waitFor(() => expect(idle.every((socket) => !socket.connecting)).toBe(true), { timeout: 10_000 });
    const openAt = Date.now();

    const run = await runCountd(["run", "weekly"], { cwd: dir, env });
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toMatchObject({ code: 0, stdout: "Revenue is up 4 %.\n" });
    const history = JSON.parse((await runCountd(["history", "weekly", "--json"], { cwd: dir, env })).stdout) as RunRecord[];
    expect(history).toMatchObject([{ job: "weekly", status: "ok" }]);
    const spendDir = join(dir, "state", "spend");
    const spent = (await Promise.all((await readdir(spendDir)).map((name) => readFile(join(spendDir, name), "utf8"))))
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as SpendLine);
    expect(spent).toMatchObject([{ job: "weekly", run: history[0]!.id }]);

    // The connections kept past the cap send nothing: each is closed once the 10 s for a request's headers are over.
    await vi.waitFor(() => expect(idle.length - closed.size).toBe(0), { timeout: 20_000, interval: 200 });
    expect(Math.max(...closed.values()) - openAt).toBeLessThan(16_000);
    expect(logLines(daemon.output()).some((line) => String(line["msg"]).startsWith("the open-file limit is 256"))).toBe(true);
  });
});
