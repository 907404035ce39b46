import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const DOCS = ["README.md", "docs/architecture.md", "docs/agent-loop.md", "docs/mcp.md"];

/** Markdown link targets that point at files, not at a web address or a heading. */
function fileLinks(markdown: string): string[] {
  // Code shows markdown as text (`[text](url)` in a table of chat formats): those are no links.
  const prose = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z]+:/i.test(target) && !target.startsWith("#"));
}

/** Backticked paths climbing out of their folder (`../shared/x.md`), which a clone does not have. */
function climbingPaths(markdown: string): string[] {
  return [...markdown.matchAll(/`(\.\.\/[^`\s]+)`/g)].map((m) => m[1]!);
}

describe("the project's documents", () => {
  it.each(DOCS)("%s links only to files in this repository, and they exist", async (doc) => {
    const text = await readFile(join(ROOT, doc), "utf8");
    const outside: string[] = [];
    const missing: string[] = [];
    for (const target of [...fileLinks(text), ...climbingPaths(text)]) {
      const path = resolve(ROOT, dirname(doc), target.split("#")[0]!);
      if (relative(ROOT, path).startsWith("..")) outside.push(target);
      else if (!existsSync(path)) missing.push(target);
    }
    expect({ outside, missing }).toEqual({ outside: [], missing: [] });
  });

  it("the README links the design notes under docs/", async () => {
    const text = await readFile(join(ROOT, "README.md"), "utf8");
    expect(fileLinks(text)).toEqual(expect.arrayContaining(["docs/agent-loop.md", "docs/architecture.md", "docs/mcp.md"]));
  });
});
