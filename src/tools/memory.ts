import * as z from "zod";
import type { MemoryEntry, MemoryStore } from "../memory/store.js";
import { defineTool } from "./registry.js";
import type { Tool } from "./types.js";

export function memoryTools(memory: MemoryStore): Tool[] {
  return [memoryWriteTool(memory), memorySearchTool(memory), memoryReadTool(memory)];
}

const entryLine = (e: MemoryEntry): string => `line ${e.line}: ${e.date}|${e.source}|${e.text}`;

function memoryWriteTool(memory: MemoryStore) {
  return defineTool({
    name: "memory_write",
    description:
      "Saves one fact to long-term memory (the workspace's MEMORY.md), dated today, so later runs can find it. " +
      "Write a short, self-contained sentence; line breaks are folded into spaces.",
    parameters: z.object({
      text: z.string().trim().min(1).describe('The fact to remember, e.g. "The user wants reports in German".'),
      source: z
        .string()
        .trim()
        .min(1)
        .default("agent")
        .describe('Who or what the fact comes from (default "agent"), e.g. "user" or "cron:daily-report".'),
    }),
    async execute({ text, source }) {
      return `saved as ${entryLine(await memory.append(source, text))}`;
    },
  });
}

function memorySearchTool(memory: MemoryStore) {
  return defineTool({
    name: "memory_search",
    untrusted: true,
    description:
      "Searches long-term memory (MEMORY.md) for entries holding keywords, case-insensitive, in their text or source; newest first. " +
      'Each result is "line N: date|source|text"; memory_read with start_line/end_line shows the entries around one.',
    parameters: z
      .object({
        query: z.string().optional().describe('Keywords separated by spaces, e.g. "server password rotation". Give query or keywords.'),
        keywords: z
          .array(z.string())
          .optional()
          .describe('Keywords as a list, for ones that contain spaces, e.g. ["db-1", "backup window"].'),
        mode: z
          .enum(["or", "and"])
          .default("or")
          .describe('"or": entries holding any keyword (the default); "and": entries holding all of them.'),
        limit: z.number().int().min(1).max(200).default(15).describe("Most entries to return (default 15)."),
      })
      .refine((a) => words(a).length > 0, { message: "give at least one keyword, in query or keywords" }),
    async execute(args) {
      const keywords = words(args);
      const hits = await memory.search(keywords, { mode: args.mode, limit: args.limit + 1 });
      const what = `${args.mode === "and" ? "all" : "any"} of ${keywords.map((k) => JSON.stringify(k)).join(", ")}`;
      if (hits.length === 0) return `no memory entry holds ${what}`;
      const lines = hits.slice(0, args.limit).map(entryLine);
      if (hits.length > args.limit) lines.push(`[more than ${args.limit} entries match; add keywords, use mode "and", or raise limit]`);
      return lines.join("\n");
    },
  });
}

function words(args: { query?: string | undefined; keywords?: string[] | undefined }): string[] {
  return [...(args.query?.split(/\s+/) ?? []), ...(args.keywords ?? [])].map((w) => w.trim()).filter((w) => w !== "");
}

function memoryReadTool(memory: MemoryStore) {
  return defineTool({
    name: "memory_read",
    untrusted: true,
    description:
      "Reads long-term memory (MEMORY.md) entries, oldest first: the last N entries (default 10), or those on lines start_line..end_line of the file.",
    parameters: z
      .object({
        start_line: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe("First line of MEMORY.md to read (1-based), e.g. a few lines before a memory_search hit."),
        end_line: z.number().int().min(1).optional().describe("Last line to read (inclusive); without it, reads to the end."),
        last: z
          .number()
          .int()
          .min(1)
          .max(500)
          .optional()
          .describe("Read the last N entries instead (default 10 when no line range is given)."),
      })
      .refine((a) => a.last === undefined || (a.start_line === undefined && a.end_line === undefined), {
        message: "give either last or start_line/end_line, not both",
      })
      .refine((a) => a.start_line === undefined || a.end_line === undefined || a.end_line >= a.start_line, {
        message: "end_line must not be before start_line",
      }),
    async execute({ start_line, end_line, last }) {
      const byLines = start_line !== undefined || end_line !== undefined;
      const entries = await memory.read(byLines ? { start: start_line, end: end_line } : { last: last ?? 10 });
      if (entries.length > 0) return entries.map(entryLine).join("\n");
      if (!byLines) return "memory is empty: MEMORY.md holds no entries yet";
      return `no memory entries on lines ${start_line ?? 1}-${end_line ?? "end"} of MEMORY.md`;
    },
  });
}
