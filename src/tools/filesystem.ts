import type { Dirent, Stats } from "node:fs";
import { lstat, readdir, readlink, stat, type FileHandle } from "node:fs/promises";
import { dirname, relative } from "node:path";
import { glob } from "tinyglobby";
import * as z from "zod";
import { isInside } from "../inside.js";
import { defineTool } from "./registry.js";
import { FinalToolError, type Tool } from "./types.js";
import { fileError } from "./file-errors.js";
import { ToolRefusal, type PathGuard } from "./paths.js";
import { makeFolders, openFolder, openRead, openWrite, underFolder } from "./safe-open.js";
import { formatBytes, thousands } from "../text.js";
import { replaceLines, replaceText } from "./text-edits.js";

export interface FileToolOptions {
  guard: PathGuard;
  /** Characters one read_file call returns at most, over all its files. */
  maxReadChars?: number;
  /** Bytes one write_file or edit_file may leave in a file. */
  maxWriteBytes?: number;
}

const MAX_LIST_ENTRIES = 500;
/** Like git: a NUL byte in the first 8000 bytes marks a file as binary. */
const BINARY_SNIFF_BYTES = 8000;

export function fileTools(opts: FileToolOptions): Tool[] {
  const files = new Files(opts.guard);
  const maxReadChars = opts.maxReadChars ?? 100_000;
  const maxWriteBytes = opts.maxWriteBytes ?? 5 * 1024 * 1024;
  return [
    readFileTool(files, maxReadChars),
    writeFileTool(files, maxWriteBytes),
    editFileTool(files, maxWriteBytes),
    listDirTool(files),
    fileSearchTool(files),
  ];
}

const pathArg = z
  .string()
  .min(1)
  .describe(
    "Path relative to the workspace; an absolute path must lie inside it. A path leading outside (through .., ~ or a symlink) is refused.",
  );

function readFileTool(files: Files, maxChars: number) {
  return defineTool({
    name: "read_file",
    untrusted: true,
    description:
      `Reads text files from the workspace. Returns at most ${thousands(maxChars)} characters per call; ` +
      "a longer read ends with a notice telling which start_line reads on. Binary files are reported, not shown.",
    parameters: z
      .object({
        path: pathArg.optional().describe("The file to read, relative to the workspace. Give either path or paths."),
        paths: z
          .array(pathArg)
          .min(1)
          .max(50)
          .optional()
          .describe(
            "Several files to read in one call; each is headed by `==> path <==`, and a file that cannot be read shows its error without stopping the others.",
          ),
        start_line: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe("First line to show (1-based). Use it to read on after a truncation notice."),
        end_line: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe("Last line to show (inclusive). Without it, reads to the end of the file or the size limit."),
        line_numbers: z
          .boolean()
          .default(false)
          .describe(
            "Prefix each line with its number, as `  12| text`. Handy before edit_file with start_line/end_line; the prefix is not part of the file.",
          ),
      })
      .refine((a) => (a.path === undefined) !== (a.paths === undefined), { message: "give either path or paths, not both and not neither" })
      .refine((a) => a.start_line === undefined || a.end_line === undefined || a.end_line >= a.start_line, {
        message: "end_line must not be before start_line",
      }),
    async execute(args) {
      const range = { start: args.start_line ?? 1, end: args.end_line ?? Infinity, numbered: args.line_numbers };
      if (args.path !== undefined) return (await files.readText(args.path, range, maxChars, maxChars)).text;
      let left = maxChars;
      const parts: string[] = [];
      for (const path of args.paths!) {
        let body: string;
        try {
          const read = await files.readText(path, range, left, maxChars);
          body = read.text;
          left -= read.used;
        } catch (err) {
          body = `Error: ${(err as Error).message}`;
        }
        parts.push(`==> ${path} <==\n${body}`);
      }
      return parts.join("\n\n");
    },
  });
}

function writeFileTool(files: Files, maxBytes: number) {
  return defineTool({
    name: "write_file",
    description:
      `Writes a text file in the workspace, creating missing parent folders. Overwrites by default; mode "append" adds to the end. ` +
      `One call writes at most ${formatBytes(maxBytes)}.`,
    parameters: z.object({
      path: pathArg.describe("The file to write, relative to the workspace."),
      content: z
        .string()
        .describe("The full text to write (or to add, in append mode). Include the final newline if the file should end with one."),
      mode: z
        .enum(["overwrite", "append"])
        .default("overwrite")
        .describe('"overwrite" replaces the whole file; "append" adds content to its end.'),
    }),
    async execute({ path, content, mode }, ctx) {
      const bytes = Buffer.byteLength(content);
      if (bytes > maxBytes) {
        throw new ToolRefusal(
          `refused: the content for ${JSON.stringify(path)} is ${formatBytes(bytes)}, over the ${formatBytes(maxBytes)} limit of one write`,
        );
      }
      const real = await files.guard.forWrite(path);
      const shown = await files.shown(real);
      await files.makeParents(real, path);
      const existing = await stat(real).catch(() => undefined);
      if (existing) await regularFile(real, path, "write_file writes files only");
      const { handle } = await openWrite(real, JSON.stringify(path), { create: true, append: mode === "append" }).catch((err) => {
        throw fileError(err, path);
      });
      let size: number;
      try {
        await openedRegular(handle, path, "write_file writes files only");
        // Truncated only now: an open that is refused must leave the file as it was.
        if (mode === "overwrite") await handle.truncate(0);
        await handle.writeFile(content);
        size = (await handle.stat()).size;
      } finally {
        await handle.close();
      }
      ctx.wrote?.(real);
      if (mode === "overwrite") return `wrote ${formatBytes(bytes)} to ${shown}`;
      return `appended ${formatBytes(bytes)} to ${shown} (the file is now ${formatBytes(size)})`;
    },
  });
}

function editFileTool(files: Files, maxBytes: number) {
  return defineTool({
    name: "edit_file",
    description:
      "Changes part of an existing text file. Either replace old_text, which must occur exactly once (copy it exactly, whitespace included), " +
      "or replace the lines start_line..end_line (see read_file with line_numbers). new_text is inserted as given.",
    parameters: z
      .object({
        path: pathArg.describe("The file to edit, relative to the workspace."),
        old_text: z
          .string()
          .min(1)
          .optional()
          .describe("Exact text to replace; it must occur exactly once in the file. Include surrounding lines to make it unique."),
        new_text: z.string().describe('The replacement text. With a line range, these become the new lines ("" deletes the lines).'),
        start_line: z.number().int().min(1).optional().describe("First line to replace (1-based), instead of old_text."),
        end_line: z.number().int().min(1).optional().describe("Last line to replace (inclusive); defaults to start_line."),
      })
      .refine((a) => (a.old_text === undefined) !== (a.start_line === undefined), {
        message: "give either old_text or start_line (with an optional end_line), not both and not neither",
      })
      .refine((a) => a.end_line === undefined || (a.start_line !== undefined && a.end_line >= a.start_line), {
        message: "end_line needs a start_line and must not be before it",
      }),
    async execute(args, ctx) {
      const real = await files.guard.forWrite(args.path);
      const shown = await files.shown(real);
      await regularFile(real, args.path, "edit_file changes one file");
      const { handle } = await openWrite(real, JSON.stringify(args.path), { create: false, edit: true }).catch((err) => {
        throw fileError(err, args.path);
      });
      let summary: string;
      try {
        const { size } = await openedRegular(handle, args.path, "edit_file changes one file");
        if (size > maxBytes)
          throw new ToolRefusal(`refused: ${shown} is ${formatBytes(size)}, over the ${formatBytes(maxBytes)} edit limit`);
        const buffer = await handle.readFile();
        if (buffer.subarray(0, BINARY_SNIFF_BYTES).includes(0))
          throw new FinalToolError(`${shown} is a binary file; edit_file only changes text files`);
        const content = buffer.toString("utf8");
        const edit =
          args.old_text !== undefined
            ? replaceText(content, args.old_text, args.new_text, shown)
            : replaceLines(content, args.start_line!, args.end_line ?? args.start_line!, args.new_text, shown);
        const out = Buffer.from(edit.content);
        if (out.length > maxBytes)
          throw new ToolRefusal(
            `refused: the edit would make ${shown} ${formatBytes(out.length)}, over the ${formatBytes(maxBytes)} limit`,
          );
        await handle.truncate(0);
        await handle.write(out, 0, out.length, 0);
        summary = edit.summary;
      } finally {
        await handle.close();
      }
      ctx.wrote?.(real);
      return `edited ${shown}: ${summary}`;
    },
  });
}

function listDirTool(files: Files) {
  return defineTool({
    name: "list_dir",
    untrusted: true,
    description:
      `Lists a folder of the workspace, sorted by name: folders end with "/", files show their size, symlinks show their target. ` +
      `At most ${MAX_LIST_ENTRIES} entries; use file_search to look deeper or narrower.`,
    parameters: z.object({
      path: pathArg.default(".").describe('The folder to list, relative to the workspace; "." (the default) is the workspace itself.'),
    }),
    async execute({ path }) {
      const real = await files.guard.forRead(path);
      const folder = await openFolder(real, JSON.stringify(path)).catch((err) => {
        throw fileError(err, path, "is a file, not a folder; use read_file to read it");
      });
      let entries: Dirent[];
      let lines: string[];
      try {
        // Listed through the verified descriptor: a folder swapped for a link meanwhile is not followed.
        entries = await readdir(underFolder(folder), { withFileTypes: true });
        if (entries.length === 0) return `${JSON.stringify(path)} is an empty folder`;
        entries.sort((a, b) => byCodePoint(a.name, b.name));
        // Entry types come from readdir, which does not follow symlinks: a link pointing out is described, never opened.
        lines = await Promise.all(
          entries.slice(0, MAX_LIST_ENTRIES).map(async (entry) => {
            const full = underFolder(folder, entry.name);
            if (entry.isDirectory()) return `${entry.name}/`;
            if (entry.isSymbolicLink()) return `${entry.name} -> ${await readlink(full).catch(() => "?")}`;
            if (!entry.isFile()) return entry.name;
            const size = await lstat(full).then(
              (info) => `  ${formatBytes(info.size)}`,
              () => "",
            );
            return entry.name + size;
          }),
        );
      } finally {
        await folder.close();
      }
      if (entries.length > MAX_LIST_ENTRIES) {
        lines.push(
          `[${entries.length - MAX_LIST_ENTRIES} more entries not shown (${entries.length} in all); use file_search with a pattern to find what you need]`,
        );
      }
      return lines.join("\n");
    },
  });
}

function fileSearchTool(files: Files) {
  return defineTool({
    name: "file_search",
    untrusted: true,
    description:
      "Finds files by glob pattern under a folder of the workspace; results are paths relative to the workspace, sorted. " +
      "Symbolic links are neither followed nor listed.",
    parameters: z.object({
      pattern: z
        .string()
        .min(1)
        .describe(
          'Glob relative to path, e.g. "**/*.ts", "docs/*.md", "**/report-{2024,2025}*". "*" stays within one folder, "**" crosses folders; ' +
            'names starting with "." match only when the pattern spells the dot. No "..", "~" or absolute paths: choose the folder with path.',
        ),
      path: pathArg.default(".").describe('The folder to search in, relative to the workspace; "." (the default) is the workspace.'),
      max_depth: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe("How many folder levels below path to descend; 0 searches path itself only. Default: no limit."),
      limit: z
        .number()
        .int()
        .min(1)
        .max(1000)
        .default(100)
        .describe("Most results to return (default 100); a notice says when more matched."),
    }),
    async execute({ pattern, path, max_depth, limit }, ctx) {
      // Any "..", not only a whole segment: brace expansion can assemble one ("..{,}/x" becomes "../x").
      if (pattern.startsWith("/") || pattern.startsWith("~") || pattern.includes("..")) {
        throw new ToolRefusal(
          `refused: the pattern ${JSON.stringify(pattern)} reaches outside the search folder; patterns are relative to path, so choose the folder with path and leave "..", "~" and absolute paths out of the pattern`,
        );
      }
      const root = await files.guard.forRead(path);
      const info = await stat(root).catch((err) => {
        throw fileError(err, path);
      });
      if (!info.isDirectory())
        throw new FinalToolError(`${JSON.stringify(path)} is a file, not a folder; file_search needs a folder as path`);
      const found = await glob(pattern, {
        cwd: root,
        absolute: true,
        followSymbolicLinks: false,
        expandDirectories: false,
        signal: ctx.signal,
        ...(max_depth !== undefined ? { deep: max_depth } : {}),
      });
      const inside: string[] = [];
      for (const match of found.sort(byCodePoint)) {
        // A second wall behind the pattern check: whatever the glob returned must still pass the
        // guard, and be there when opened (a folder swapped for a link mid-walk lists outside names).
        if (await files.isReadable(match)) inside.push(await files.shown(match));
      }
      if (inside.length === 0) return `no files match ${JSON.stringify(pattern)} in ${JSON.stringify(path)}`;
      const lines = inside.slice(0, limit);
      if (inside.length > limit) lines.push(`[showing ${limit} of ${inside.length} matches; narrow the pattern or raise limit]`);
      return lines.join("\n");
    },
  });
}

interface LineRange {
  start: number;
  end: number;
  numbered: boolean;
}

class Files {
  constructor(readonly guard: PathGuard) {}

  /** A real path as the LLM should name it: relative to the workspace when inside it. */
  async shown(real: string): Promise<string> {
    const workspace = await this.guard.workspace();
    return isInside(real, workspace) ? relative(workspace, real) || "." : real;
  }

  /** Whether `path` passes the guard and opens as that very file. */
  async isReadable(path: string): Promise<boolean> {
    try {
      const handle = await openRead(await this.guard.forRead(path), JSON.stringify(path));
      await handle.close();
      return true;
    } catch {
      return false;
    }
  }

  /** Creates the folders `real` (a path the guard allowed) needs, each inside the verified one above it. */
  async makeParents(real: string, path: string): Promise<void> {
    const workspace = await this.guard.workspace();
    await makeFolders(isInside(real, workspace) ? workspace : "/", dirname(real), JSON.stringify(path)).catch((err) => {
      throw err instanceof ToolRefusal ? err : fileError(err, path);
    });
  }

  /** The text of one file within `budget` characters; `limit` is the whole call's limit, for the notice. */
  async readText(path: string, range: LineRange, budget: number, limit: number): Promise<{ text: string; used: number }> {
    const real = await this.guard.forRead(path);
    const shown = await this.shown(real);
    await regularFile(real, path, "use list_dir to see what it holds");
    const handle = await openRead(real, JSON.stringify(path)).catch((err) => {
      throw err instanceof ToolRefusal ? err : fileError(err, path);
    });
    try {
      return await this.readOpened(handle, path, shown, range, budget, limit);
    } finally {
      await handle.close();
    }
  }

  private async readOpened(
    handle: FileHandle,
    path: string,
    shown: string,
    range: LineRange,
    budget: number,
    limit: number,
  ): Promise<{ text: string; used: number }> {
    const { size, binary } = await sniff(handle, path);
    if (binary) return { text: `[${shown} is a binary file (${formatBytes(size)}); read_file only shows text]`, used: 0 };

    const out: string[] = [];
    let used = 0;
    let lineNo = 0;
    let notice = "";
    for await (const line of linesOf(handle, budget)) {
      lineNo++;
      if (lineNo < range.start) continue;
      if (lineNo > range.end) break;
      const rendered = range.numbered ? `${String(lineNo).padStart(4)}| ${line}` : line;
      if (used + rendered.length + 1 > budget) {
        if (out.length === 0 && budget < limit) {
          notice = `[not read: this call's ${thousands(limit)}-character limit is used up; read it in another call]`;
        } else if (out.length === 0) {
          out.push(rendered.slice(0, budget));
          used = budget;
          notice = `[line ${lineNo} alone is longer than the ${thousands(limit)}-character limit; only its start is shown. The next line is start_line=${lineNo + 1}]`;
        } else {
          notice = `[truncated at the ${thousands(limit)}-character limit: lines ${range.start}-${lineNo - 1} shown of ${shown} (${formatBytes(size)}). Call read_file with start_line=${lineNo} to read on]`;
        }
        break;
      }
      out.push(rendered);
      used += rendered.length + 1;
    }
    if (lineNo === 0) return { text: `[${shown} is empty]`, used: 0 };
    if (lineNo < range.start) throw new FinalToolError(`start_line ${range.start} is past the end of ${shown}, which has ${lineNo} lines`);
    return { text: [...out, ...(notice ? [notice] : [])].join("\n"), used };
  }
}

async function sniff(handle: FileHandle, path: string): Promise<{ size: number; binary: boolean }> {
  const { size } = await openedRegular(handle, path, "use list_dir to see what it holds");
  const head = Buffer.alloc(Math.min(size, BINARY_SNIFF_BYTES));
  const { bytesRead } = await handle.read(head, 0, head.length, 0);
  return { size, binary: head.subarray(0, bytesRead).includes(0) };
}

/** What was opened must be a regular file too; the check by name before could have been raced. */
async function openedRegular(handle: FileHandle, path: string, folderHint: string): Promise<Stats> {
  const info = await handle.stat();
  if (info.isDirectory()) throw new FinalToolError(`${JSON.stringify(path)} is a folder, not a file; ${folderHint}`);
  if (!info.isFile())
    throw new FinalToolError(`${JSON.stringify(path)} is not a regular file (a pipe, socket or device); only regular files can be opened`);
  return info;
}

/**
 * Stats a file that must exist and be a regular file: opening a named pipe or a device would
 * block or never end, so those are refused before anything opens them.
 */
async function regularFile(real: string, path: string, folderHint: string): Promise<Stats> {
  const info = await stat(real).catch((err) => {
    throw fileError(err, path);
  });
  if (info.isDirectory()) throw new FinalToolError(`${JSON.stringify(path)} is a folder, not a file; ${folderHint}`);
  if (!info.isFile())
    throw new FinalToolError(`${JSON.stringify(path)} is not a regular file (a pipe, socket or device); only regular files can be opened`);
  return info;
}

/**
 * The lines of a text file without their line breaks. Each is kept to at most `maxChars`
 * characters while the rest of it is skipped, so one huge line (minified code, a log without
 * newlines) never has to fit in memory.
 */
async function* linesOf(handle: FileHandle, maxChars: number): AsyncGenerator<string> {
  const stream = handle.createReadStream({ encoding: "utf8", start: 0, autoClose: false });
  let line = "";
  const add = (piece: string): void => {
    if (line.length <= maxChars) line += piece.slice(0, maxChars + 1 - line.length);
  };
  const take = (): string => {
    const done = line.endsWith("\r") ? line.slice(0, -1) : line;
    line = "";
    return done;
  };
  let pending = false;
  try {
    for await (const chunk of stream as AsyncIterable<string>) {
      let from = 0;
      for (let nl = chunk.indexOf("\n"); nl !== -1; nl = chunk.indexOf("\n", from)) {
        add(chunk.slice(from, nl));
        from = nl + 1;
        pending = false;
        yield take();
      }
      if (from < chunk.length) {
        add(chunk.slice(from));
        pending = true;
      }
    }
    if (pending) yield take();
  } finally {
    stream.destroy();
  }
}

function byCodePoint(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
