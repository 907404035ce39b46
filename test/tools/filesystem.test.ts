import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, realpath, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { fileTools, type FileToolOptions } from "../../src/tools/filesystem.js";
import { PathGuard } from "../../src/tools/paths.js";
import { runTool } from "../support/sandbox.js";

let ws: string;
beforeEach(async () => {
  ws = await realpath(await mkdtemp(join(tmpdir(), "countd-fs-")));
});

function tools(opts: Omit<FileToolOptions, "guard"> = {}) {
  const guard = new PathGuard({ workspace: ws, restrictToWorkspace: true, readOnlyRoots: [] });
  const list = fileTools({ guard, ...opts });
  return (name: string, args: unknown) => runTool(list, name, args, ws);
}

async function put(path: string, content: string | Buffer): Promise<void> {
  await mkdir(join(ws, path, ".."), { recursive: true });
  await writeFile(join(ws, path), content);
}

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join("\n") + "\n";

describe("fileTools", () => {
  it("offers the five file tools, each with a described schema", () => {
    const guard = new PathGuard({ workspace: ws, restrictToWorkspace: true, readOnlyRoots: [] });
    const list = fileTools({ guard });
    expect(list.map((t) => t.name)).toEqual(["read_file", "write_file", "edit_file", "list_dir", "file_search"]);
    for (const tool of list) expect(tool.description.length).toBeGreaterThan(40);
  });
});

describe("writes", () => {
  it("are reported with their real path by write_file and edit_file, and never by a read", async () => {
    const guard = new PathGuard({ workspace: ws, restrictToWorkspace: true, readOnlyRoots: [] });
    const list = fileTools({ guard });
    const written: string[] = [];
    const record = (path: string) => written.push(path);
    await runTool(list, "write_file", { path: "out/a.txt", content: "one\n" }, ws, record);
    await runTool(list, "edit_file", { path: "out/a.txt", old_text: "one", new_text: "two" }, ws, record);
    await runTool(list, "read_file", { path: "out/a.txt" }, ws, record);
    expect(written).toEqual([join(ws, "out", "a.txt"), join(ws, "out", "a.txt")]);
  });
});

describe("read_file", () => {
  it("reads a file by relative or absolute path, exactly as written", async () => {
    await put("notes/todo.txt", "buy milk\ncall Bob\n");
    const call = tools();
    expect(await call("read_file", { path: "notes/todo.txt" })).toBe("buy milk\ncall Bob");
    expect(await call("read_file", { path: join(ws, "notes/todo.txt") })).toBe("buy milk\ncall Bob");
  });

  it("shows a line range, with line numbers when asked", async () => {
    await put("a.txt", numbered(12));
    const call = tools();
    expect(await call("read_file", { path: "a.txt", start_line: 9, end_line: 11, line_numbers: true })).toBe(
      "   9| line 9\n  10| line 10\n  11| line 11",
    );
    expect(await call("read_file", { path: "a.txt", start_line: 11 })).toBe("line 11\nline 12");
  });

  it("refuses a start_line past the end, naming the file's length", async () => {
    await put("a.txt", numbered(3));
    await expect(tools()("read_file", { path: "a.txt", start_line: 4 })).rejects.toThrow(
      "start_line 4 is past the end of a.txt, which has 3 lines",
    );
  });

  it("reads several files at once, each under its path, and reports a missing one without losing the others", async () => {
    await put("one.txt", "first\n");
    await put("sub/two.txt", "second\n");
    const out = await tools()("read_file", { paths: ["one.txt", "missing.txt", "sub/two.txt"] });
    expect(out).toBe('==> one.txt <==\nfirst\n\n==> missing.txt <==\nError: "missing.txt" does not exist\n\n==> sub/two.txt <==\nsecond');
  });

  it("cuts a long file at the limit with a notice whose start_line reads on, until the whole file is read", async () => {
    const content = numbered(200);
    await put("big.txt", content);
    const call = tools({ maxReadChars: 300 });
    const pieces: string[] = [];
    let start = 1;
    for (let calls = 0; calls < 50; calls++) {
      const out = await call("read_file", { path: "big.txt", start_line: start });
      const next = /Call read_file with start_line=(\d+) to read on\]$/.exec(out);
      expect(out.length).toBeLessThanOrEqual(300 + 200);
      if (!next) {
        pieces.push(out);
        break;
      }
      expect(out).toContain("[truncated at the 300-character limit");
      pieces.push(out.slice(0, out.lastIndexOf("\n[truncated")));
      start = Number(next[1]);
    }
    expect(pieces.join("\n") + "\n").toBe(content);
  });

  it("shows the start of a line longer than the limit and says where the next line starts", async () => {
    await put("min.js", "x".repeat(5000) + "\nsecond\n");
    const out = await tools({ maxReadChars: 100 })("read_file", { path: "min.js" });
    expect(out).toBe(
      `${"x".repeat(100)}\n[line 1 alone is longer than the 100-character limit; only its start is shown. The next line is start_line=2]`,
    );
  });

  it("shares the limit among several files and says which were not read", async () => {
    await put("a.txt", "aaaaaaaa\n".repeat(3));
    await put("b.txt", "bbbbbbbb\n");
    const out = await tools({ maxReadChars: 30 })("read_file", { paths: ["a.txt", "b.txt"] });
    expect(out).toBe(
      "==> a.txt <==\naaaaaaaa\naaaaaaaa\naaaaaaaa\n\n==> b.txt <==\n[not read: this call's 30-character limit is used up; read it in another call]",
    );
  });

  it("reports a binary file instead of showing its bytes", async () => {
    await put("logo.png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d]));
    expect(await tools()("read_file", { path: "logo.png" })).toBe("[logo.png is a binary file (12 bytes); read_file only shows text]");
  });

  it("shows lines of a Windows text file without carriage returns, and says when a file is empty", async () => {
    await put("win.txt", "one\r\ntwo\r\n");
    await put("empty.txt", "");
    const call = tools();
    expect(await call("read_file", { path: "win.txt", line_numbers: true })).toBe("   1| one\n   2| two");
    expect(await call("read_file", { path: "empty.txt" })).toBe("[empty.txt is empty]");
  });

  it("points to list_dir when asked to read a folder", async () => {
    await mkdir(join(ws, "docs"));
    await expect(tools()("read_file", { path: "docs" })).rejects.toThrow('"docs" is a folder, not a file; use list_dir');
  });

  it("refuses a named pipe instead of waiting on it forever, for reading, writing and editing", async () => {
    execFileSync("mkfifo", [join(ws, "pipe")]);
    const call = tools();
    const notRegular = '"pipe" is not a regular file (a pipe, socket or device)';
    await expect(call("read_file", { path: "pipe" })).rejects.toThrow(notRegular);
    await expect(call("write_file", { path: "pipe", content: "x" })).rejects.toThrow(notRegular);
    await expect(call("edit_file", { path: "pipe", start_line: 1, new_text: "x" })).rejects.toThrow(notRegular);
  });

  it("rejects path and paths together, and a range that ends before it starts", async () => {
    const call = tools();
    await expect(call("read_file", { path: "a", paths: ["b"] })).rejects.toThrow("give either path or paths");
    await expect(call("read_file", { path: "a", start_line: 5, end_line: 2 })).rejects.toThrow("end_line must not be before start_line");
  });
});

describe("write_file", () => {
  it("creates missing folders and writes the content exactly", async () => {
    const out = await tools()("write_file", { path: "reports/2025/may.md", content: "# May\n\nAll good.\n" });
    expect(out).toBe("wrote 17 bytes to reports/2025/may.md");
    expect(await readFile(join(ws, "reports/2025/may.md"), "utf8")).toBe("# May\n\nAll good.\n");
  });

  it("overwrites by default and appends in append mode", async () => {
    await put("log.txt", "old content that is long\n");
    const call = tools();
    await call("write_file", { path: "log.txt", content: "first\n" });
    expect(await call("write_file", { path: "log.txt", content: "second\n", mode: "append" })).toBe(
      "appended 7 bytes to log.txt (the file is now 13 bytes)",
    );
    expect(await readFile(join(ws, "log.txt"), "utf8")).toBe("first\nsecond\n");
  });

  it("refuses content over the size limit and leaves no file behind", async () => {
    const call = tools({ maxWriteBytes: 1024 });
    await expect(call("write_file", { path: "big.txt", content: "é".repeat(600) })).rejects.toThrow(
      'refused: the content for "big.txt" is 1.2 KB, over the 1 KB limit of one write',
    );
    await expect(stat(join(ws, "big.txt"))).rejects.toThrow(/ENOENT/);
  });

  it("says so when the path is a folder", async () => {
    await mkdir(join(ws, "docs"));
    await expect(tools()("write_file", { path: "docs", content: "x" })).rejects.toThrow('"docs" is a folder, not a file');
  });
});

describe("edit_file", () => {
  it("replaces text that occurs exactly once, keeping $ patterns literally", async () => {
    await put("app.js", "const a = 1;\nconst b = 2;\n");
    const out = await tools()("edit_file", { path: "app.js", old_text: "const b = 2;", new_text: "const b = '$&$1';\nconst c = 3;" });
    expect(out).toBe("edited app.js: replaced the text at line 2 (1 line became 2 lines)");
    expect(await readFile(join(ws, "app.js"), "utf8")).toBe("const a = 1;\nconst b = '$&$1';\nconst c = 3;\n");
  });

  it("refuses text found nowhere or several times, saying how many times and where, and leaves the file alone", async () => {
    const content = "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n";
    await put("vars.txt", content);
    const call = tools();
    await expect(call("edit_file", { path: "vars.txt", old_text: "w = 9", new_text: "" })).rejects.toThrow(
      "old_text was not found in vars.txt; read the file again and copy the text exactly",
    );
    await expect(call("edit_file", { path: "vars.txt", old_text: "x = 1", new_text: "x = 2" })).rejects.toThrow(
      "old_text was found 3 times in vars.txt (at lines 1, 3, 5); include more of the surrounding text",
    );
    expect(await readFile(join(ws, "vars.txt"), "utf8")).toBe(content);
  });

  it("replaces or deletes a line range", async () => {
    await put("list.txt", numbered(5));
    const call = tools();
    expect(await call("edit_file", { path: "list.txt", start_line: 2, end_line: 3, new_text: "two and three\n" })).toBe(
      "edited list.txt: replaced lines 2-3 with 1 line; the file now has 4 lines",
    );
    expect(await readFile(join(ws, "list.txt"), "utf8")).toBe("line 1\ntwo and three\nline 4\nline 5\n");
    await call("edit_file", { path: "list.txt", start_line: 1, new_text: "" });
    expect(await readFile(join(ws, "list.txt"), "utf8")).toBe("two and three\nline 4\nline 5\n");
  });

  it("refuses a line range past the end of the file", async () => {
    await put("list.txt", numbered(3));
    await expect(tools()("edit_file", { path: "list.txt", start_line: 2, end_line: 7, new_text: "x" })).rejects.toThrow(
      "end_line 7 is past the end of list.txt, which has 3 lines",
    );
  });

  it("keeps Windows line breaks when the edit spans lines", async () => {
    await put("win.txt", "a\r\nb\r\nc\r\n");
    await tools()("edit_file", { path: "win.txt", old_text: "a\nb", new_text: "A\nB" });
    expect(await readFile(join(ws, "win.txt"), "utf8")).toBe("A\r\nB\r\nc\r\n");
  });

  it("refuses a missing file, a binary file, and an edit that would pass the size limit", async () => {
    await put("blob.bin", Buffer.from([1, 0, 2]));
    await put("small.txt", "abc\n");
    const call = tools({ maxWriteBytes: 100 });
    await expect(call("edit_file", { path: "nope.txt", old_text: "a", new_text: "b" })).rejects.toThrow('"nope.txt" does not exist');
    await expect(call("edit_file", { path: "blob.bin", start_line: 1, new_text: "b" })).rejects.toThrow("blob.bin is a binary file");
    await expect(call("edit_file", { path: "small.txt", old_text: "abc", new_text: "x".repeat(200) })).rejects.toThrow(
      "refused: the edit would make small.txt 201 bytes, over the 100 bytes limit",
    );
    expect(await readFile(join(ws, "small.txt"), "utf8")).toBe("abc\n");
  });

  it("needs exactly one of old_text and start_line", async () => {
    const call = tools();
    await expect(call("edit_file", { path: "a", new_text: "x" })).rejects.toThrow("give either old_text or start_line");
    await expect(call("edit_file", { path: "a", old_text: "y", start_line: 1, new_text: "x" })).rejects.toThrow(
      "give either old_text or start_line",
    );
  });
});

describe("list_dir", () => {
  it("lists entries sorted, folders with a slash, files with sizes, symlinks with their target", async () => {
    await put("b.txt", "12345");
    await put("a/inner.txt", "x");
    await put("C.md", "x".repeat(2048));
    await symlink("b.txt", join(ws, "link"));
    const call = tools();
    expect(await call("list_dir", {})).toBe("C.md  2 KB\na/\nb.txt  5 bytes\nlink -> b.txt");
    expect(await call("list_dir", { path: "a" })).toBe("inner.txt  1 byte");
  });

  it("caps the listing at 500 entries with a notice", async () => {
    await Promise.all(Array.from({ length: 510 }, (_, i) => put(`f${String(i).padStart(3, "0")}.txt`, "")));
    const lines = (await tools()("list_dir", { path: "." })).split("\n");
    expect(lines).toHaveLength(501);
    expect(lines[499]).toBe("f499.txt  0 bytes");
    expect(lines[500]).toBe("[10 more entries not shown (510 in all); use file_search with a pattern to find what you need]");
  });

  it("says when a folder is empty, and points to read_file for a file", async () => {
    await mkdir(join(ws, "empty"));
    await put("f.txt", "x");
    const call = tools();
    expect(await call("list_dir", { path: "empty" })).toBe('"empty" is an empty folder');
    await expect(call("list_dir", { path: "f.txt" })).rejects.toThrow('"f.txt" is a file, not a folder; use read_file');
  });
});

describe("file_search", () => {
  beforeEach(async () => {
    await put("src/index.ts", "");
    await put("src/tools/shell.ts", "");
    await put("src/tools/deep/x.ts", "");
    await put("README.md", "");
    await put(".github/ci.ts", "");
  });

  it("finds files by glob, sorted, relative to the workspace even when searching a subfolder", async () => {
    const call = tools();
    expect(await call("file_search", { pattern: "**/*.ts" })).toBe("src/index.ts\nsrc/tools/deep/x.ts\nsrc/tools/shell.ts");
    expect(await call("file_search", { pattern: "*.ts", path: "src/tools" })).toBe("src/tools/shell.ts");
    expect(await call("file_search", { pattern: ".github/*.ts" })).toBe(".github/ci.ts");
  });

  it("limits the depth of the search", async () => {
    const call = tools();
    expect(await call("file_search", { pattern: "**/*.ts", path: "src", max_depth: 0 })).toBe("src/index.ts");
    expect(await call("file_search", { pattern: "**/*.ts", path: "src", max_depth: 1 })).toBe("src/index.ts\nsrc/tools/shell.ts");
  });

  it("stops at the limit with a notice saying how many matched", async () => {
    expect(await tools()("file_search", { pattern: "**/*.ts", limit: 2 })).toBe(
      "src/index.ts\nsrc/tools/deep/x.ts\n[showing 2 of 3 matches; narrow the pattern or raise limit]",
    );
  });

  it("says when nothing matches, and when path is not a folder", async () => {
    const call = tools();
    expect(await call("file_search", { pattern: "**/*.rs", path: "src" })).toBe('no files match "**/*.rs" in "src"');
    await expect(call("file_search", { pattern: "*", path: "README.md" })).rejects.toThrow('"README.md" is a file, not a folder');
  });
});
