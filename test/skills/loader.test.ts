import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { SkillsLoader } from "../../src/skills/loader.js";

let workspace: string;
let binDir: string;

beforeEach(async () => {
  workspace = await mkdtemp(join(tmpdir(), "countd-skills-"));
  binDir = await mkdtemp(join(tmpdir(), "countd-bin-"));
});

async function writeSkill(dir: string, text: string): Promise<string> {
  const file = join(workspace, "skills", dir, "SKILL.md");
  await mkdir(join(workspace, "skills", dir), { recursive: true });
  await writeFile(file, text);
  return file;
}

describe("SkillsLoader", () => {
  it("returns nothing when the workspace has no skills directory", async () => {
    expect(await new SkillsLoader(workspace, {}).load()).toEqual({ skills: [], problems: [] });
  });

  it("loads skills sorted by name, with defaults for name and always", async () => {
    const weather = await writeSkill("weather", "---\ndescription: Look up the weather\n---\n\nUse wttr.in.\n");
    const report = await writeSkill(
      "zz-report",
      "---\nname: daily-report\ndescription: Write the daily report\nalways: true\nlicense: MIT\n---\n# Report\nSteps here.\n",
    );

    const { skills, problems } = await new SkillsLoader(workspace, {}).load();
    expect(problems).toEqual([]);
    expect(skills).toEqual([
      { name: "daily-report", description: "Write the daily report", always: true, body: "# Report\nSteps here.", path: report },
      { name: "weather", description: "Look up the weather", always: false, body: "Use wttr.in.", path: weather },
    ]);
  });

  it("sees a skill added, edited or removed while the daemon runs, and reuses the result otherwise", async () => {
    const loader = new SkillsLoader(workspace, {});
    const empty = await loader.load();
    expect(await loader.load()).toBe(empty);
    await writeSkill("weather", "---\ndescription: Look up the weather\n---\nUse wttr.in.\n");
    const added = await loader.load();
    expect(added.skills.map((s) => s.description)).toEqual(["Look up the weather"]);
    expect(await loader.load()).toBe(added);
    await writeSkill("weather", "---\ndescription: Look up the weather forecast for the week\n---\nUse wttr.in.\n");
    expect((await loader.load()).skills.map((s) => s.description)).toEqual(["Look up the weather forecast for the week"]);
    await rm(join(workspace, "skills", "weather"), { recursive: true });
    expect((await loader.load()).skills).toEqual([]);
  });

  it("hides skills whose required binaries are not on PATH or env vars are unset", async () => {
    await writeFile(join(binDir, "present-tool"), "#!/bin/sh\n");
    await chmod(join(binDir, "present-tool"), 0o755);
    await writeFile(join(binDir, "not-executable"), "data");
    await writeSkill("has-bin", "---\ndescription: a\nrequires:\n  bins: [present-tool]\n---\nbody");
    await writeSkill("no-bin", "---\ndescription: b\nrequires:\n  bins: [absent-tool]\n---\nbody");
    await writeSkill("no-exec", "---\ndescription: c\nrequires:\n  bins: [not-executable]\n---\nbody");
    await writeSkill("has-env", "---\ndescription: d\nrequires:\n  env: [API_KEY]\n---\nbody");
    await writeSkill("no-env", "---\ndescription: e\nrequires:\n  env: [MISSING_KEY, API_KEY]\n---\nbody");
    await writeSkill("empty-env", "---\ndescription: f\nrequires:\n  env: [EMPTY_KEY]\n---\nbody");

    const env = { PATH: `/nonexistent:${binDir}`, API_KEY: "k", EMPTY_KEY: "" };
    const { skills, problems } = await new SkillsLoader(workspace, env).load();
    expect(problems).toEqual([]);
    expect(skills.map((s) => s.name)).toEqual(["has-bin", "has-env"]);
  });

  it("reports bad front matter with the file and the problem, and still loads the good skills", async () => {
    await writeSkill("good", "---\ndescription: fine\n---\nok");
    const noFront = await writeSkill("no-front", "# Just markdown\n");
    const badYaml = await writeSkill("bad-yaml", "---\ndescription: x\nbins: [a\nalways: true\n---\n");
    const badField = await writeSkill("bad-field", "---\ndescription: x\nalways: sometimes\n---\n");
    const noDescription = await writeSkill("no-description", "---\nname: nd\n---\nbody");
    await mkdir(join(workspace, "skills", "empty-dir"));
    await writeFile(join(workspace, "skills", "README.md"), "not a skill dir");

    const { skills, problems } = await new SkillsLoader(workspace, {}).load();
    expect(skills.map((s) => s.name)).toEqual(["good"]);
    expect(problems).toHaveLength(5);
    expect(problems).toContainEqual(expect.stringMatching(new RegExp(`^${escape(noFront)}: no YAML front matter`)));
    expect(problems).toContainEqual(expect.stringMatching(new RegExp(`^${escape(badYaml)}:4:1: `)));
    expect(problems).toContainEqual(expect.stringMatching(new RegExp(`^${escape(badField)}: always: .*boolean`)));
    expect(problems).toContainEqual(expect.stringMatching(new RegExp(`^${escape(noDescription)}: description: `)));
    expect(problems).toContainEqual(
      `${join(workspace, "skills", "empty-dir", "SKILL.md")}: missing (every skill directory needs a SKILL.md)`,
    );
  });

  it("reports a second skill claiming a name already taken", async () => {
    const first = await writeSkill("a", "---\nname: same\ndescription: first\n---\n");
    const second = await writeSkill("b", "---\nname: same\ndescription: second\n---\n");
    const { skills, problems } = await new SkillsLoader(workspace, {}).load();
    expect(skills.map((s) => s.description)).toEqual(["first"]);
    expect(problems).toEqual([`${second}: skill name "same" is already used by ${first}`]);
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
