import { execFileSync, spawnSync } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { hasSystemPackage } from "../support/system-package.js";

const UNIT = resolve(import.meta.dirname, "../../systemd/countd.service");
const CLUSTER_DROP_IN = resolve(import.meta.dirname, "../../systemd/countd.service.d/cluster.conf");
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

  it("as a cluster node, restarts also after exit 78 (Redis unreachable at boot), slowly, with the Redis password as a credential", async () => {
    const lines = (await readFile(CLUSTER_DROP_IN, "utf8")).split("\n");
    for (const line of ["RestartPreventExitStatus=", "RestartSec=30s", "After=redis-server.service"]) expect(lines).toContain(line);
    expect(lines).toContain("LoadCredential=REDIS_PASSWORD:/etc/countd/credentials/REDIS_PASSWORD");
  });

  it.runIf(hasAnalyze)("with the cluster drop-in, still passes systemd-analyze verify at the same exposure", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-unit-"));
    await copyFile(UNIT, join(dir, "countd.service"));
    await mkdir(join(dir, "countd.service.d"));
    await copyFile(CLUSTER_DROP_IN, join(dir, "countd.service.d", "cluster.conf"));
    // The unit path makes systemd-analyze read the drop-in folder beside the unit, as it would in /etc/systemd/system.
    const env = { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:` };
    const verify = spawnSync("systemd-analyze", ["verify", "countd.service"], { cwd: dir, env, encoding: "utf8" });
    expect({ status: verify.status, output: (verify.stdout + verify.stderr).trim() }).toEqual({ status: 0, output: "" });
    const report = execFileSync("systemd-analyze", ["security", "--offline=true", "countd.service"], { cwd: dir, env, encoding: "utf8" });
    expect(Number(/Overall exposure level for countd\.service: ([\d.]+)/.exec(report)?.[1])).toBeLessThanOrEqual(2.5);
  });
});
