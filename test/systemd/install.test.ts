import { execFile, spawnSync } from "node:child_process";
import { mkdtemp, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { hasSystemPackage } from "../support/system-package.js";

const PACKAGE = resolve(import.meta.dirname, "../..");
const SCRIPT = join(PACKAGE, "systemd", "install.sh");
const NODE = join(dirname(process.execPath), "node");
const hasAnalyze = await hasSystemPackage("systemd", import.meta.filename);

/** systemd/install.sh --root ROOT, with this Node first on PATH, as `sudo sh …/install.sh` would find it. */
async function install(root: string): Promise<string[]> {
  const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env["PATH"] ?? ""}` };
  const { stdout } = await promisify(execFile)("sh", [SCRIPT, "--root", root], { env });
  return stdout.trimEnd().split("\n");
}

const mode = async (path: string) => (await stat(path)).mode & 0o777;

describe("systemd/install.sh", () => {
  it("installs the unit's files in order under a root: folders first, then countd.yaml, countd.env and the unit", async () => {
    const root = await mkdtemp(join(tmpdir(), "countd-root-"));
    expect(await install(root)).toEqual([
      "countd: user countd: not created under --root",
      "countd: folder /etc/countd",
      "countd: folder /etc/countd/jobs",
      "countd: folder /etc/countd/credentials",
      "countd: folder /var/lib/countd",
      "countd: folder /var/log/countd",
      "countd: /etc/countd/countd.yaml: written",
      "countd: /etc/countd/countd.env: written",
      `countd: /etc/systemd/system/countd.service: written (countd in ${PACKAGE})`,
      "countd: next: API keys in /etc/countd/countd.env, job files in /etc/countd/jobs, then: systemctl enable --now countd",
    ]);
    expect(await mode(join(root, "etc/countd/countd.env"))).toBe(0o600);
    expect(await mode(join(root, "etc/countd/credentials"))).toBe(0o700);

    // Every folder countd.yaml names exists, or is made by countd inside one that does.
    const config = await loadConfig({ file: join(root, "etc/countd/countd.yaml"), env: {} });
    expect(config.paths).toEqual({
      workspace: "/var/lib/countd/workspace",
      state: "/var/lib/countd/state",
      logs: "/var/log/countd",
      jobs: "/etc/countd/jobs",
    });
    for (const folder of [config.paths.jobs, config.paths.logs, dirname(config.paths.state), dirname(config.paths.workspace)]) {
      expect((await stat(join(root, folder))).isDirectory(), folder).toBe(true);
    }

    // The package's unit, started with this machine's Node and this package's countd.
    const shipped = (await readFile(join(PACKAGE, "systemd/countd.service"), "utf8")).split("\n");
    const installed = (await readFile(join(root, "etc/systemd/system/countd.service"), "utf8")).split("\n");
    expect(installed).toEqual(
      shipped.map((line) =>
        line.startsWith("ExecStart=")
          ? `ExecStart=${NODE} ${PACKAGE}/bin/countd.js --config /etc/countd/countd.yaml start`
          : line.startsWith("Documentation=")
            ? `Documentation=file://${PACKAGE}/README.md`
            : line,
      ),
    );
  });

  it("run again, keeps countd.yaml and countd.env as edited and writes the unit anew", async () => {
    const root = await mkdtemp(join(tmpdir(), "countd-root-"));
    await install(root);
    await writeFile(join(root, "etc/countd/countd.yaml"), "timezone: UTC\n");
    await writeFile(join(root, "etc/countd/countd.env"), "OPENAI_API_KEY=sk-kept\n");
    await writeFile(join(root, "etc/systemd/system/countd.service"), "old\n");
    const lines = await install(root);
    expect(lines).toContain("countd: /etc/countd/countd.yaml: kept");
    expect(lines).toContain("countd: /etc/countd/countd.env: kept");
    expect(await readFile(join(root, "etc/countd/countd.yaml"), "utf8")).toBe("timezone: UTC\n");
    expect(await readFile(join(root, "etc/countd/countd.env"), "utf8")).toBe("OPENAI_API_KEY=sk-kept\n");
    expect(await readFile(join(root, "etc/systemd/system/countd.service"), "utf8")).toContain("[Service]");
  });

  it.runIf(hasAnalyze)("writes a unit that passes systemd-analyze verify", async () => {
    const root = await mkdtemp(join(tmpdir(), "countd-root-"));
    await install(root);
    const verify = spawnSync("systemd-analyze", ["verify", join(root, "etc/systemd/system/countd.service")], { encoding: "utf8" });
    expect({ status: verify.status, output: (verify.stdout + verify.stderr).trim() }).toEqual({ status: 0, output: "" });
  });
});
