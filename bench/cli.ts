/**
 * The commands people type by hand: the built `countd --version`, `jobs`, `history` and `status`
 * in a folder of 10 job files with 10 recorded runs each, no daemon running (so `status` says so
 * and exits 3), each beside a bare `node -e 0` started the same way in the same round, the two
 * alternating, median of ROUNDS. Each process runs under /usr/bin/time, whose peak RSS (%M) is
 * reported; without it, the peak is left out and the times are of the bare processes. Last, the
 * same for the floor of the three commands that read countd.yaml (bench/bare.ts), with no target.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { emptyUsage } from "../src/providers/types.js";
import type { RunRecord } from "../src/store/run-record.js";
import { StateStore } from "../src/store/state.js";
import { libraryProbe, TIME, timeNode, type Timed } from "./bare.js";
import { median } from "./stats.js";

const BIN = fileURLToPath(new URL("../bin/countd.js", import.meta.url));
const ROUNDS = 21;
const JOBS = 10;
const RUNS_PER_JOB = 10;

/** Each command, its exit code with no daemon running, and its target as a multiple of bare Node. */
const COMMANDS: Array<{ args: string[]; exit: number; target: number }> = [
  { args: ["--version"], exit: 0, target: 2 },
  { args: ["jobs"], exit: 0, target: 3 },
  { args: ["history"], exit: 0, target: 3 },
  { args: ["status"], exit: 3, target: 3 },
];

export interface CliRow {
  /** What ran: a countd command, or the libraries' floor. */
  command: string;
  ms: number;
  peakMb: number | undefined;
  /** `node -e 0`, measured in the same rounds. */
  bareMs: number;
  barePeakMb: number | undefined;
  ratio: number;
  /** None for the floor, which is reported beside the commands. */
  target: number | undefined;
}

/** A folder countd runs in: countd.yaml, JOBS job files, and RUNS_PER_JOB finished runs of each. */
async function countdHome(): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), "countd-bench-cli-"));
  await writeFile(join(home, "countd.yaml"), "timezone: UTC\n");
  await mkdir(join(home, "jobs"));
  const state = await StateStore.open(join(home, "state"));
  const at = Date.now() - JOBS * RUNS_PER_JOB * 60_000;
  for (let i = 0; i < JOBS; i++) {
    const job = `job-${i}`;
    await writeFile(join(home, "jobs", `${job}.yaml`), `description: Report ${i}\nschedule: "0 9 * * *"\nprompt: Report ${i}\n`);
    for (let n = 0; n < RUNS_PER_JOB; n++) {
      const startedAt = new Date(at + (i * RUNS_PER_JOB + n) * 60_000);
      const run: RunRecord = {
        id: `run-${i}-${n}`,
        job,
        reason: "schedule",
        scheduledAt: startedAt.toISOString(),
        startedAt: startedAt.toISOString(),
        finishedAt: new Date(startedAt.getTime() + 4_000).toISOString(),
        status: "ok",
        iterations: 2,
        toolCalls: 1,
        usage: emptyUsage(),
        resultExcerpt: `Report ${i}: nothing new.`,
        sessionId: `cron:${job}:run-${i}-${n}`,
      };
      await state.saveRun(run);
    }
  }
  await state.close();
  return home;
}

export async function benchCli(rounds = ROUNDS): Promise<CliRow[]> {
  const home = await countdHome();
  const probe = await libraryProbe();
  const peakFile = existsSync(TIME) ? join(home, "peak.txt") : undefined;
  try {
    const rows: CliRow[] = [];
    const floor = { command: "zod, yaml and commander alone", argv: [probe.file], exit: 0, target: undefined };
    const commands = COMMANDS.map(({ args, exit, target }) => ({
      command: `countd ${args.join(" ")}`,
      argv: [BIN, ...args],
      exit,
      target,
    }));
    for (const { command: name, argv, exit, target } of [...commands, floor]) {
      const command: Timed[] = [];
      const bare: Timed[] = [];
      // One of each unmeasured first: the page cache holds the files both read.
      await timeNode(["-e", "0"], { cwd: home, peakFile });
      await timeNode(argv, { cwd: home, exit, peakFile });
      for (let round = 0; round < rounds; round++) {
        // Alternating which goes first, so neither always starts on a warmer machine.
        const pair = [
          async () => bare.push(await timeNode(["-e", "0"], { cwd: home, peakFile })),
          async () => command.push(await timeNode(argv, { cwd: home, exit, peakFile })),
        ];
        if (round % 2 === 1) pair.reverse();
        for (const run of pair) await run();
      }
      const ms = median(command.map((s) => s.ms));
      const bareMs = median(bare.map((s) => s.ms));
      const peak = (samples: Timed[]) => (peakFile ? median(samples.map((s) => s.peakMb!)) : undefined);
      rows.push({
        command: name,
        ms,
        peakMb: peak(command),
        bareMs,
        barePeakMb: peak(bare),
        ratio: ms / bareMs,
        target,
      });
    }
    return rows;
  } finally {
    await Promise.all([rm(home, { recursive: true, force: true }), probe.remove()]);
  }
}
