import { rm, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { LLMock } from "@copilotkit/aimock";
import { expect } from "vitest";
import type { RunView, TranscriptStep } from "../../src/console/protocol.js";
import { FIXTURE } from "../mcp/support.js";

/*
 * The runs the journal tests drive, in one countd folder or on cluster nodes: one that uses the
 * file tools, an MCP server's tools (one of which fails), a tool call that fails and a subagent;
 * one cancelled while its command runs. Then every file a transcript was once put together from
 * (session files, the audit log, the tool history) is removed, and what `countd show` and the
 * console's API give for each run is checked step by step.
 */

export const NOTES = Array.from({ length: 100 }, (_, i) => `line ${i + 1} of the notes`).join("\n");
export const WORK = "Do the weekly work";
export const TASK = "Count the lines of notes.txt";
export const SLOW = "Wait for the batch";
/** The slow run's command: it leaves `started` in the workspace, so a test knows when to cancel it. */
export const STARTED_COMMAND = "touch started && sleep 30";

/** countd.yaml's line with the MCP server `notes` (the suite's fixture server). */
export const MCP_LINE = `mcp_servers: ${JSON.stringify({ notes: { command: process.execPath, args: [FIXTURE] } })}`;

export const WORK_JOB = `prompt: ${WORK}\ntools: [read_file, spawn, mcp_notes_echo, mcp_notes_fail]\n`;
export const SLOW_JOB = "prompt: Wait for the batch\ntools: [exec]\n";

/** The workspace's notes, which the run reads whole (more than the audit log's 2,000 characters). */
export async function writeNotes(workspace: string): Promise<void> {
  await mkdir(workspace, { recursive: true });
  await writeFile(join(workspace, "notes.txt"), NOTES);
}

/** The LLM's side of the runs: the work run's three calls, its subagent's two, and the slow run's command. */
export function journalFixtures(mock: LLMock): void {
  mock.on(
    { userMessage: WORK, sequenceIndex: 0 },
    {
      content: "Reading first.",
      toolCalls: [
        { name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) },
        { name: "mcp_notes_echo", arguments: JSON.stringify({ text: "weekly" }) },
        { name: "mcp_notes_fail", arguments: "{}" },
        { name: "read_file", arguments: JSON.stringify({ path: "missing.txt" }) },
      ],
    },
  );
  mock.on({ userMessage: WORK, sequenceIndex: 1 }, { toolCalls: [{ name: "spawn", arguments: JSON.stringify({ task: TASK }) }] });
  mock.on({ userMessage: WORK, sequenceIndex: 2 }, { content: "All done: 100 lines." });
  mock.on(
    { userMessage: TASK, sequenceIndex: 0 },
    { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) }] },
  );
  mock.on({ userMessage: TASK, sequenceIndex: 1 }, { content: "100 lines." });
  mock.on({ userMessage: SLOW }, { toolCalls: [{ name: "exec", arguments: JSON.stringify({ command: STARTED_COMMAND }) }] });
}

/** What the heartbeat's prompt says, which the LLM server answers to. */
export const CHECK_IN = "Heartbeat check-in";
export const CHECK_IN_MESSAGE = "The disk is 91 % full.";
/** countd.yaml's heartbeat: its check-ins are mailed (written as .eml without smtp settings). */
export const HEARTBEAT_LINES = ["heartbeat:", "  enabled: true", "  deliver:", "    - email: { to: [me@example.com] }"];

/** The heartbeat's run: the agent says the check-in through its reply tool, then ends. */
export function checkInFixtures(mock: LLMock): void {
  mock.on(
    { userMessage: CHECK_IN, sequenceIndex: 0 },
    { toolCalls: [{ name: "heartbeat_respond", arguments: JSON.stringify({ notify: true, message: CHECK_IN_MESSAGE }) }] },
  );
  mock.on({ userMessage: CHECK_IN, sequenceIndex: 1 }, { content: "" });
}

/** A check-in's transcript, whole: the heartbeat's prompt, the reply tool's call and both LLM calls. */
export function expectWholeCheckIn(view: RunView): void {
  expect(view.transcript.prompt).toContain(CHECK_IN);
  expect(view.transcript.incomplete).toBeUndefined();
  expect(view.transcript.steps).toContainEqual(
    expect.objectContaining({ kind: "tool", name: "heartbeat_respond", arguments: { notify: true, message: CHECK_IN_MESSAGE } }),
  );
  expect(view.transcript.steps.filter((step) => step.kind === "llm")).toHaveLength(2);
}

/** What a transcript was once put together from: gone, as if removed by hand or by retention. */
export async function removeOtherRecords(dir: string): Promise<void> {
  for (const folder of [join(dir, "state", "sessions"), join(dir, "state", "tool-history"), join(dir, "logs")]) {
    await rm(folder, { recursive: true, force: true });
  }
}

type Tool = Extract<TranscriptStep, { kind: "tool" }>;
type Llm = Extract<TranscriptStep, { kind: "llm" }>;

/** A transcript's steps without the HTML the console's API adds to each text for its page. */
function plainSteps(view: RunView): TranscriptStep[] {
  return view.transcript.steps.map((step) => {
    if (step.kind !== "text") return step;
    const { html: _html, ...text } = step;
    return text;
  });
}

/** The work run's transcript, every step whole: its calls priced, its tool results as the model read them. */
export function expectWholeWork(view: RunView): void {
  const transcript = { ...view.transcript, steps: plainSteps(view) };
  expect(transcript.incomplete).toBeUndefined();
  expect(transcript.prompt).toBe(WORK);
  const llm = transcript.steps.filter((step): step is Llm => step.kind === "llm");
  // Three of the run's own and two of its subagent's, each with its model, tokens and price.
  expect(llm.map((step) => step.subagent ?? "run")).toEqual(["run", "run", expect.any(String), expect.any(String), "run"]);
  for (const step of llm) expect(step).toMatchObject({ model: "gpt-4o-mini", cost: expect.any(Number), duration_ms: expect.any(Number) });
  expect(llm.reduce((sum, step) => sum + (step.cost ?? 0), 0)).toBeCloseTo(view.run.cost!, 12);
  const tools = transcript.steps.filter((step): step is Tool => step.kind === "tool");
  // The subagent's steps are journalled as they happen, inside the spawn call they answer.
  const [notes, echo, fail, missing, subRead, spawn] = tools;
  expect(tools.map((step) => `${step.subagent ? "sub " : ""}${step.name}`)).toEqual([
    "read_file",
    "mcp_notes_echo",
    "mcp_notes_fail",
    "read_file",
    "sub read_file",
    "spawn",
  ]);
  // Whole: the audit log cut a result at 2,000 characters.
  expect(notes!.result).toContain("line 1 of the notes\n");
  expect(notes!.result).toContain("line 100 of the notes");
  expect(notes).toMatchObject({ arguments: { path: "notes.txt" }, attempts: 1 });
  expect(echo!.result).toContain("weekly");
  expect(fail).toMatchObject({ is_error: true, attempts: 1 });
  expect(missing).toMatchObject({ is_error: true, arguments: { path: "missing.txt" } });
  expect(spawn!.result).toContain("100 lines.");
  expect(subRead!.result).toContain("line 100 of the notes");
  expect(transcript.steps).toContainEqual({ kind: "subagent", id: subRead!.subagent, task: TASK });
  expect(transcript.steps).toContainEqual({ kind: "text", text: "Reading first." });
  expect(transcript.steps).toContainEqual({ kind: "text", text: "100 lines.", subagent: subRead!.subagent });
  expect(transcript.steps.at(-1)).toEqual({ kind: "text", text: "All done: 100 lines." });
}

/** The cancelled run's transcript: its one LLM call, priced, and the command the cancel stopped. */
export function expectWholeCancelled(view: RunView): void {
  const transcript = { ...view.transcript, steps: plainSteps(view) };
  expect(view.run.status).toBe("cancelled");
  expect(transcript.incomplete).toBeUndefined();
  expect(transcript.prompt).toBe(SLOW);
  expect(transcript.steps.map((step) => step.kind)).toEqual(["llm", "tool"]);
  expect(transcript.steps[0]).toMatchObject({ model: "gpt-4o-mini", cost: expect.any(Number) });
  expect(transcript.steps[1]).toMatchObject({ name: "exec", arguments: { command: STARTED_COMMAND }, is_error: true });
}
