import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { hasSystemPackage, SYSTEM_PACKAGES } from "../support/system-package.js";

describe("tests that need a system package", () => {
  const saved = { PATH: process.env["PATH"], CI: process.env["CI"] };
  beforeEach(() => {
    // No bwrap on this PATH, whatever the machine has installed.
    process.env["PATH"] = "/nonexistent";
  });
  afterEach(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    vi.restoreAllMocks();
  });

  it("are skipped on a machine without it, with one line naming the Debian package", async () => {
    delete process.env["CI"];
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    expect(await hasSystemPackage("bubblewrap", resolve("test/tools/sandbox.test.ts"))).toBe(false);
    expect(stderr.mock.calls).toEqual([
      ["skipped: test/tools/sandbox.test.ts needs bubblewrap (apt-get install bubblewrap): bwrap (Debian package bubblewrap) not found\n"],
    ]);
  });

  it("fail the run under CI=true", async () => {
    process.env["CI"] = "true";
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    await expect(hasSystemPackage("bubblewrap", resolve("test/tools/sandbox.test.ts"))).rejects.toThrow(
      "CI=true and test/tools/sandbox.test.ts needs bubblewrap (apt-get install bubblewrap)",
    );
    expect(stderr).not.toHaveBeenCalled();
  });

  it("each have their Debian package installed by .ci/run, which runs with CI=true", async () => {
    const script = await readFile(resolve(import.meta.dirname, "../../.ci/run"), "utf8");
    expect(script).toMatch(/^export CI=true$/m);
    const installed = /^packages=\((.*)\)$/m.exec(script)?.[1]?.split(/\s+/);
    expect(installed).toEqual(Object.keys(SYSTEM_PACKAGES));
  });
});
