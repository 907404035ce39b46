import { constants, readdirSync, statSync } from "node:fs";
import { access, readdir, readFile, stat } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { parse, YAMLParseError } from "yaml";
import * as z from "zod";

export interface Skill {
  name: string;
  description: string;
  always: boolean;
  body: string;
  /** Absolute path of the SKILL.md. */
  path: string;
}

export interface SkillsLoadResult {
  skills: Skill[];
  /** One "path: message" per SKILL.md that could not be used. */
  problems: string[];
}

// Unknown keys are allowed so skills written for other agents (license, allowed-tools, …) still load.
const FrontMatter = z.object({
  name: z.string().trim().min(1).optional(),
  description: z.string().trim().min(1),
  always: z.boolean().default(false),
  requires: z
    .object({
      bins: z.array(z.string().min(1)).default([]),
      env: z.array(z.string().min(1)).default([]),
    })
    .default({ bins: [], env: [] }),
});

const FRONT_MATTER = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

type Parsed = { ok: true; data: z.infer<typeof FrontMatter>; body: string } | { ok: false; problem: string };

function parseSkillFile(file: string, text: string): Parsed {
  const match = FRONT_MATTER.exec(text);
  if (!match)
    return {
      ok: false,
      problem: `${file}: no YAML front matter (the file must start with a "---" line and close it with another "---" line)`,
    };
  let raw: unknown;
  try {
    raw = parse(match[1]!);
  } catch (err) {
    if (err instanceof YAMLParseError && err.linePos) {
      // The front matter starts on line 2 of the file.
      const { line, col } = err.linePos[0];
      return { ok: false, problem: `${file}:${line + 1}:${col}: ${err.message.split(" at line ")[0]}` };
    }
    return { ok: false, problem: `${file}: ${(err as Error).message}` };
  }
  const result = FrontMatter.safeParse(raw);
  if (!result.success) {
    const issues = result.error.issues.map((i) => `${i.path.length ? i.path.join(".") : "front matter"}: ${i.message}`);
    return { ok: false, problem: `${file}: ${issues.join("; ")}` };
  }
  return { ok: true, data: result.data, body: text.slice(match[0].length).trim() };
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

const byName = (a: Skill, b: Skill): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Where a workspace's skills live; the tools may not write there unless tools.writable_skills is set. */
export function skillsDir(workspace: string): string {
  return join(workspace, "skills");
}

/** Loads `<workspace>/skills/<dir>/SKILL.md`; skills whose required binaries or env vars are missing are hidden. */
export class SkillsLoader {
  private readonly dir: string;
  private cache: { fingerprint: string; result: SkillsLoadResult } | undefined;

  constructor(
    workspace: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.dir = skillsDir(workspace);
  }

  /**
   * Runs before every message, so it re-reads the skills only when a SKILL.md was added, removed
   * or changed; the result object stays the same otherwise, which lets callers cache on it.
   */
  async load(): Promise<SkillsLoadResult> {
    const fingerprint = this.fingerprint();
    if (this.cache?.fingerprint === fingerprint) return this.cache.result;
    const result = await this.read();
    this.cache = { fingerprint, result };
    return result;
  }

  /** Names, sizes and modification times of the skill files: a few stat calls, no reads. */
  private fingerprint(): string {
    // A workspace without skills is the common case: stat says so without building an ENOENT error.
    if (!statSync(this.dir, { throwIfNoEntry: false })) return "";
    return readdirSync(this.dir, { withFileTypes: true })
      .map((entry) => {
        if (!entry.isDirectory()) return `${entry.name}:not a skill`;
        const info = statSync(join(this.dir, entry.name, "SKILL.md"), { throwIfNoEntry: false });
        return info ? `${entry.name}:${info.mtimeMs}:${info.size}` : `${entry.name}:-`;
      })
      .sort()
      .join("\n");
  }

  private async read(): Promise<SkillsLoadResult> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { skills: [], problems: [] };
      throw err;
    }
    const skills: Skill[] = [];
    const problems: string[] = [];
    for (const dirName of names) {
      const skillDir = join(this.dir, dirName);
      if (!(await stat(skillDir)).isDirectory()) continue;
      const file = join(skillDir, "SKILL.md");
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        problems.push(
          code === "ENOENT" ? `${file}: missing (every skill directory needs a SKILL.md)` : `${file}: ${(err as Error).message}`,
        );
        continue;
      }
      const parsed = parseSkillFile(file, text);
      if (!parsed.ok) {
        problems.push(parsed.problem);
        continue;
      }
      const { name = dirName, description, always, requires } = parsed.data;
      const clash = skills.find((s) => s.name === name);
      if (clash) {
        problems.push(`${file}: skill name "${name}" is already used by ${clash.path}`);
        continue;
      }
      if (!(await this.requirementsMet(requires))) continue;
      skills.push({ name, description, always, body: parsed.body, path: file });
    }
    return { skills: skills.sort(byName), problems };
  }

  private async requirementsMet(requires: { bins: string[]; env: string[] }): Promise<boolean> {
    if (requires.env.some((name) => !this.env[name])) return false;
    const pathDirs = (this.env.PATH ?? "").split(delimiter).filter(Boolean);
    for (const bin of requires.bins) {
      const found = await Promise.all(pathDirs.map((d) => isExecutable(join(d, bin))));
      if (!found.includes(true)) return false;
    }
    return true;
  }
}
