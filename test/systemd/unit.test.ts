import { execFileSync, spawnSync } from "node:child_process";
import { copyFile, mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { hasSystemPackage } from "../support/system-package.js";

const UNIT = resolve(import.meta.dirname, "../../systemd/countd.service");
const hasAnalyze = await hasSystemPackage("systemd", import.meta.filename);

describe("systemd/countd.service", () => {
  it("restarts on failure but not on a configuration error, and keeps secrets in an EnvironmentFile", async () => {
    const unit = await readFile(UNIT, "utf8");
    for (const line of [
      "Restart=on-failure",
      "RestartPreventExitStatus=78",
      "EnvironmentFile=/etc/countd/countd.env",
      "StateDirectory=countd",
      "LogsDirectory=countd",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "PrivateTmp=yes",
      "PrivateDevices=yes",
      "CapabilityBoundingSet=",
      "SystemCallFilter=@system-service",
    ]) {
      expect(unit.split("\n")).toContain(line);
    }
    expect(unit).toMatch(/^RestrictAddressFamilies=/m);
    expect(unit).not.toMatch(/^MemoryDenyWriteExecute=yes/m);
  });

  it.runIf(hasAnalyze)("passes systemd-analyze verify and has an exposure of 2.5 or less", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-unit-"));
    const copy = join(dir, "countd.service");
    await copyFile(UNIT, copy);
    const verify = spawnSync("systemd-analyze", ["verify", copy], { encoding: "utf8" });
    expect({ status: verify.status, output: (verify.stdout + verify.stderr).trim() }).toEqual({ status: 0, output: "" });
    const report = execFileSync("systemd-analyze", ["security", "--offline=true", copy], { encoding: "utf8" });
    const exposure = Number(/Overall exposure level for countd\.service: ([\d.]+)/.exec(report)?.[1]);
    expect(exposure).toBeLessThanOrEqual(2.5);
  });
});
