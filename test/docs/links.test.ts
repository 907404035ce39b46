import { existsSync, readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const PAGES = readdirSync(join(ROOT, "docs"))
  .filter((name) => name.endsWith(".md"))
  .map((name) => `docs/${name}`);
const DOCS = ["README.md", ...PAGES];

/** Markdown outside code, where `[text](url)` in backticks or fences is no link. */
function prose(markdown: string): string {
  return markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
}

/** Markdown link targets within this repository: a file, a heading, or both. */
function localLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z]+:/i.test(target));
}

/** Backticked paths climbing out of their folder (`../shared/x.md`), which a clone does not have. */
function climbingPaths(markdown: string): string[] {
  return [...markdown.matchAll(/`(\.\.\/[^`\s]+)`/g)].map((m) => m[1]!);
}

/** The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of markdown.replace(/```[\s\S]*?```/g, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return found;
}

describe("the project's documents", () => {
  it.each(DOCS)("%s links only to files and headings in this repository, and they exist", async (doc) => {
    const text = await readFile(join(ROOT, doc), "utf8");
    const outside: string[] = [];
    const missing: string[] = [];
    const noHeading: string[] = [];
    for (const target of [...localLinks(text), ...climbingPaths(text)]) {
      const [file = "", anchor] = target.split("#");
      const path = file === "" ? join(ROOT, doc) : resolve(ROOT, dirname(doc), file);
      if (relative(ROOT, path).startsWith("..")) outside.push(target);
      else if (!existsSync(path)) missing.push(target);
      else if (anchor !== undefined && path.endsWith(".md") && !anchors(await readFile(path, "utf8")).has(anchor)) noHeading.push(target);
    }
    expect({ outside, missing, noHeading }).toEqual({ outside: [], missing: [], noHeading: [] });
  });

  it("the README is a front door of at most 300 lines that links every page under docs/", async () => {
    const text = await readFile(join(ROOT, "README.md"), "utf8");
    expect(text.split("\n").length).toBeLessThanOrEqual(300);
    const linked = new Set(localLinks(text).map((target) => target.split("#")[0]));
    expect(PAGES.filter((page) => !linked.has(page))).toEqual([]);
  });
});
