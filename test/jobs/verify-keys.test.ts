import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCountd } from "../support/daemon-process.js";

describe("countd validate knows verify: and on_verify_fail:", () => {
  it("reports a bad expectation, a misspelt check or key and an unknown mode at file:line:col, with did-you-mean hints", async () => {
    const dir = await mkdtemp(join(tmpdir(), "countd-verify-keys-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    await writeFile(
      join(dir, "jobs", "report.yaml"),
      [
        "prompt: Report.",
        "verify:",
        '  - expect: "$.count >=< 3"',
        "  - comand: ./check.sh",
        '  - expect: ["$.status == ok", "count > 3"]',
        "  - tools_called: [send_*]",
        "on_verfy_fail: hold",
        "",
      ].join("\n"),
    );
    await writeFile(join(dir, "jobs", "fine.yaml"), "prompt: Fine.\nverify:\n  - expect: $.sources.length >= 3\non_verify_fail: later\n");
    const validated = await runCountd(["validate"], { cwd: dir });
    expect(validated.code).toBe(1);
    const lines = validated.stdout + validated.stderr;
    expect(lines).toContain('jobs/report.yaml:3:13: verify[0].expect: expected "<JSONPath> <op> <value>"');
    expect(lines).toContain('jobs/report.yaml:4:5: verify[1].comand: unknown key (did you mean "command"?)');
    expect(lines).toContain("jobs/report.yaml:5:32: verify[2].expect[1]: expected");
    expect(lines).toContain('jobs/report.yaml:7:1: on_verfy_fail: unknown key (did you mean "on_verify_fail"?)');
    expect(lines).toContain('jobs/fine.yaml:4:17: on_verify_fail: expected one of fail, retry, hold, deliver_flagged, got "later"');
  });
});
