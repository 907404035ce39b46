import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ToolRefusal } from "../../src/tools/paths.js";
import type { ExecOptions } from "../../src/tools/shell.js";
import { execOn, makeSandbox, type Sandbox } from "../support/sandbox.js";
import { hasSystemPackage } from "../support/system-package.js";

/** Secrets as countd holds them: in its own process environment. */
const SECRETS = {
  OPENAI_API_KEY: "sk-proj-LEAKCHECK-0123456789abcdef",
  ANTHROPIC_API_KEY: "sk-ant-LEAKCHECK-0123456789",
  SMTP_PASSWORD: "smtp-LEAKCHECK-hunter2",
  COUNTD_WEBHOOK_SECRET: "whsec-LEAKCHECK-42",
};
const LEAK = /LEAKCHECK/;

const bwrapWorks = await hasSystemPackage("bubblewrap", import.meta.filename);

let sb: Sandbox;

beforeAll(() => {
  Object.assign(process.env, SECRETS);
});
afterAll(() => {
  for (const name of Object.keys(SECRETS)) delete process.env[name];
});
beforeEach(async () => {
  sb = await makeSandbox();
});

/** No `env` option: the tool reads process.env, as in the daemon. */
function exec(command: string, overrides: Partial<ExecOptions> & { restrict?: boolean } = {}) {
  return execOn(sb.workspace, overrides).execute(
    { command },
    { sessionId: "leak", workspace: sb.workspace, signal: new AbortController().signal },
  );
}

const sandboxes = [{ sandbox: "none" as const }, ...(bwrapWorks ? [{ sandbox: "bwrap" as const }] : [])];

describe.each(sandboxes)("environment leakage (sandbox: $sandbox)", ({ sandbox }) => {
  it.each([
    "env",
    "printenv",
    "export -p",
    "set",
    "echo PATH=$PATH $OPENAI_API_KEY $SMTP_PASSWORD $COUNTD_WEBHOOK_SECRET",
    "cat /proc/self/environ | tr '\\0' '\\n'",
  ])("%s shows no secret value", async (command) => {
    const out = await exec(command, { sandbox, restrict: false });
    expect(out).toMatch(/\[exit code 0\]$/);
    expect(out).toContain("PATH=");
    expect(out).not.toMatch(LEAK);
  });

  it("passes a configured name through, and only that one", async () => {
    const out = await exec("env", { sandbox, envNames: ["SMTP_PASSWORD"] });
    expect(out).toContain(`SMTP_PASSWORD=${SECRETS.SMTP_PASSWORD}`);
    expect(out).not.toContain(SECRETS.OPENAI_API_KEY);
    expect(out).not.toContain(SECRETS.COUNTD_WEBHOOK_SECRET);
  });
});

describe("countd's own environment through /proc", () => {
  it("is refused under the workspace restriction when commands run without a sandbox", async () => {
    for (const command of ["cat /proc/$PPID/environ", `cat /proc/${process.pid}/environ`, "tr '\\0' '\\n' < /proc/$PPID/environ"]) {
      const err = await exec(command).catch((e: unknown) => e);
      expect(err, command).toBeInstanceOf(ToolRefusal);
      expect((err as Error).message).toMatch(/^refused: .*\/proc\/.*is outside the workspace/);
    }
  });

  it.runIf(bwrapWorks)("is out of sight inside the sandbox, even without the workspace restriction", async () => {
    const out = await exec("cat /proc/$PPID/environ /proc/1/environ; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'", {
      sandbox: "bwrap",
      restrict: false,
    });
    expect(out).toContain("PATH=");
    expect(out).not.toMatch(LEAK);
  });
});
