import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PathGuard, ToolRefusal, type PathPolicy } from "../../src/tools/paths.js";
import { makeSandbox, type Sandbox } from "../support/sandbox.js";

let box: Sandbox;
const savedHome = process.env.HOME;
beforeEach(async () => {
  box = await makeSandbox();
  // os.homedir() reads HOME, so "~" leads into the sandbox's fake home.
  process.env.HOME = box.home;
});
afterEach(() => {
  process.env.HOME = savedHome;
});

const guard = (policy: Partial<PathPolicy> = {}) =>
  new PathGuard({ workspace: box.workspace, restrictToWorkspace: true, readOnlyRoots: [], ...policy });

async function refusal(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolRefusal);
  return (err as ToolRefusal).message;
}

describe("PathGuard", () => {
  it("resolves relative and absolute paths inside the workspace to real paths, existing or not", async () => {
    await writeFile(join(box.workspace, "a.txt"), "a");
    const g = guard();
    expect(await g.workspace()).toBe(box.workspace);
    expect(await g.forRead("a.txt")).toBe(join(box.workspace, "a.txt"));
    expect(await g.forRead(join(box.workspace, "sub/../a.txt"))).toBe(join(box.workspace, "a.txt"));
    expect(await g.forWrite("new/deeper/file.txt")).toBe(join(box.workspace, "new/deeper/file.txt"));
    expect(await g.forWrite(".")).toBe(box.workspace);
  });

  it("refuses paths that lead out, naming the path and the workspace", async () => {
    const g = guard();
    for (const path of ["..", "../outside/secret.txt", "/etc/passwd", join(box.outside, "new.txt"), "~", "~/.ssh/id_rsa"]) {
      expect(await refusal(g.forRead(path))).toBe(`refused: ${JSON.stringify(path)} is outside the workspace (${box.workspace})`);
      expect(await refusal(g.forWrite(path))).toBe(`refused: ${JSON.stringify(path)} is outside the workspace (${box.workspace})`);
    }
  });

  it("takes a path starting with ~ but not ~/ as a name inside the workspace", async () => {
    expect(await guard().forWrite("~backup")).toBe(join(box.workspace, "~backup"));
  });

  it("follows symlinks: one staying inside is allowed at its target, one pointing out is refused", async () => {
    await writeFile(join(box.workspace, "target.txt"), "t");
    await symlink("target.txt", join(box.workspace, "inner-link"));
    await symlink(join(box.outside, "secret.txt"), join(box.workspace, "outer-link"));
    await symlink(box.outside, join(box.workspace, "outer-dir"));
    const g = guard();
    expect(await g.forRead("inner-link")).toBe(join(box.workspace, "target.txt"));
    expect(await refusal(g.forRead("outer-link"))).toContain('"outer-link" is outside the workspace');
    expect(await refusal(g.forWrite("outer-dir/not-yet.txt"))).toContain('"outer-dir/not-yet.txt" is outside the workspace');
  });

  it("judges a dangling symlink by where its target would be created", async () => {
    await symlink("../outside/created.txt", join(box.workspace, "dangling-out"));
    await symlink("later/file.txt", join(box.workspace, "dangling-in"));
    await symlink(join(box.outside, "no-such-dir"), join(box.workspace, "dangling-dir"));
    const g = guard();
    expect(await refusal(g.forWrite("dangling-out"))).toContain('"dangling-out" is outside the workspace');
    expect(await refusal(g.forWrite("dangling-dir/x.txt"))).toContain('"dangling-dir/x.txt" is outside the workspace');
    expect(await g.forWrite("dangling-in")).toBe(join(box.workspace, "later/file.txt"));
  });

  it("refuses a symlink loop and a chain of dangling symlinks longer than 40, instead of failing with ELOOP", async () => {
    for (let i = 0; i < 45; i++) await symlink(`l${i + 1}`, join(box.workspace, `l${i}`));
    await symlink("loop-b", join(box.workspace, "loop-a"));
    await symlink("loop-a", join(box.workspace, "loop-b"));
    const tooMany = /^refused: ".*\/workspace\/(l0|loop-a)" leads through too many symbolic links \(a loop, or a chain longer than 40\)$/;
    expect(await refusal(guard().forWrite("l0"))).toMatch(tooMany);
    expect(await refusal(guard().forRead("loop-a"))).toMatch(tooMany);
  });

  it("refuses a NUL byte with a refusal rather than Node's TypeError, showing the byte escaped", async () => {
    expect(await refusal(guard().forRead("a.txt\0../../etc/passwd"))).toBe(
      'refused: "a.txt\\u0000../../etc/passwd" contains a NUL byte, which no file name can hold',
    );
  });

  it("keeps the refusal for a very long path short", async () => {
    const path = "../".repeat(5000) + "etc/passwd";
    const message = await refusal(guard().forRead(path));
    expect(message.length).toBeLessThan(500);
    expect(message).toMatch(/^refused: "\.\.\/\.\.\/.*…\(15012 characters\)….*etc\/passwd" is outside the workspace/);
  });

  it("lets read-only roots be read but not written", async () => {
    const g = guard({ readOnlyRoots: [box.outside] });
    expect(await g.forRead(join(box.outside, "secret.txt"))).toBe(join(box.outside, "secret.txt"));
    expect(await g.forRead("../outside/nested/deep.txt")).toBe(join(box.outside, "nested/deep.txt"));
    expect(await refusal(g.forWrite(join(box.outside, "secret.txt")))).toBe(
      `refused: ${JSON.stringify(join(box.outside, "secret.txt"))} is in a read-only folder; only the workspace (${box.workspace}) can be written`,
    );
  });

  it("finds a workspace given through a symlink, and allows everything when the restriction is off", async () => {
    const linked = join(box.root, "ws-link");
    await symlink(box.workspace, linked);
    await mkdir(join(box.workspace, "d"));
    const g = new PathGuard({ workspace: linked, restrictToWorkspace: false, readOnlyRoots: [] });
    expect(await g.workspace()).toBe(box.workspace);
    expect(await g.forRead("d")).toBe(join(box.workspace, "d"));
    expect(await g.forWrite("../outside/secret.txt")).toBe(join(box.outside, "secret.txt"));
  });
});
