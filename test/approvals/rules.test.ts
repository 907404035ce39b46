import { beforeAll, describe, expect, it } from "vitest";
import { matchApproval } from "../../src/approvals/match.js";
import { approveSchema, type ApproveSettings } from "../../src/approvals/rules.js";
import { formatPath } from "../../src/config/yaml-errors.js";
import { loadShellSyntax, type ShellSyntax } from "../../src/tools/shell-syntax.js";

let shell: ShellSyntax;

beforeAll(async () => {
  shell = await loadShellSyntax();
});

function settings(input: unknown): ApproveSettings {
  return approveSchema.parse(input);
}

/** Each problem as `field: message`, the way countd reports a job file's. */
function problems(input: unknown): string[] {
  const parsed = approveSchema.safeParse(input);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) =>
    issue.code === "unrecognized_keys"
      ? `${formatPath(["approve", ...issue.path])}: unknown key ${issue.keys.join(", ")}`
      : `${formatPath(["approve", ...issue.path])}: ${issue.message}`,
  );
}

const execRules = settings({ rules: [{ exec: "git push *" }] }).rules;

/** The reason an exec of `line` waits for approval under "git push *", or undefined. */
function exec(line: string, rules = execRules): string | undefined {
  return matchApproval(rules, { name: "exec", arguments: { command: line } }, shell)?.why;
}

describe("approve: exec rules match words of each simple command", () => {
  it("matches the program and argument patterns", () => {
    expect(exec("git push origin main")).toBe('the command "git push origin main" matches "git push *"');
    expect(exec("git push")).toBe('the command "git push" matches "git push *"');
    expect(exec("git  push   --force origin")).toBe('the command "git push --force origin" matches "git push *"');
    expect(exec("/usr/bin/git push origin")).toBe('the command "/usr/bin/git push origin" matches "git push *"');
  });

  it("does not match other commands, nor the words inside an argument", () => {
    expect(exec("git pull origin main")).toBeUndefined();
    expect(exec("git status")).toBeUndefined();
    expect(exec('echo "git push"')).toBeUndefined();
    expect(exec("echo git push")).toBeUndefined();
    expect(exec("grep -r 'git push origin' docs")).toBeUndefined();
  });

  it("checks every command of a list, pipeline, subshell, substitution and wrapper", () => {
    expect(exec("cd repo && git push")).toBe('the command "git push" matches "git push *"');
    expect(exec("git status | cat; (cd repo; git push origin)")).toBe('the command "git push origin" matches "git push *"');
    expect(exec("echo $(git push origin)")).toBe('the command "git push origin" matches "git push *"');
    expect(exec("sh -c 'git push origin main'")).toBe('the command "git push origin main" matches "git push *"');
    expect(exec("env GIT_TRACE=1 git push")).toBe('the command "git push" matches "git push *"');
    expect(exec("timeout 60 git push origin")).toBe('the command "git push origin" matches "git push *"');
  });

  it("compares the words after quote removal, as the shell runs them", () => {
    expect(exec('"git" push origin')).toBe('the command "git push origin" matches "git push *"');
    expect(exec("g\\it push")).toBe('the command "git push" matches "git push *"');
    expect(exec("git 'push' origin")).toBe('the command "git push origin" matches "git push *"');
    expect(exec("git $'\\x70ush'")).toBe('the command "git push" matches "git push *"');
    expect(exec('git "push origin"')).toBeUndefined();
  });

  it("takes a word decided at run time as possibly any words", () => {
    expect(exec("git $(echo push) origin")).toBe('the command "git $(echo push) origin" matches "git push *"');
    expect(exec('git "$ACTION" origin')).toBe('the command "git \\"$ACTION\\" origin" matches "git push *"');
    expect(exec("git pu* origin")).toBe('the command "git pu* origin" matches "git push *"');
  });

  it("matches a line it cannot read word by word, conservatively", () => {
    expect(exec("$(echo git) push")).toBe(
      'the command line cannot be read word by word ($(echo git) (the command name is decided at run time, so it cannot be checked)), so it is taken as matching "git push *"',
    );
    expect(exec("git push 'origin")).toMatch(/^the command line cannot be read word by word \(.*the shell parser cannot read it: /);
    expect(exec("G=git; $G push")).toMatch(/^the command line cannot be read word by word/);
    expect(matchApproval(execRules, { name: "exec", arguments: {} }, shell)?.why).toBe(
      'the command line cannot be read word by word (the call has no command line), so it is taken as matching "git push *"',
    );
  });

  it("reads each pattern word as a glob of one word, and a lone * as any number of words", () => {
    const rules = settings({ rules: [{ exec: "rm -rf *" }, { exec: "git * push *" }, { exec: "npm publish" }] }).rules;
    expect(exec("rm -rf build", rules)).toBe('the command "rm -rf build" matches "rm -rf *"');
    expect(exec("rm -r build", rules)).toBeUndefined();
    expect(exec("git -C repo push origin", rules)).toBe('the command "git -C repo push origin" matches "git * push *"');
    expect(exec("npm publish", rules)).toBe('the command "npm publish" matches "npm publish"');
    expect(exec("npm publish --dry-run", rules)).toBeUndefined();
    expect(matchApproval(rules, { name: "exec", arguments: { command: "git -C repo push" } }, shell)?.rule).toBe(1);
  });

  it("leaves calls of other tools to the other rules", () => {
    expect(matchApproval(execRules, { name: "read_file", arguments: { path: "git push" } }, shell)).toBeUndefined();
  });
});

describe("approve: tool rules", () => {
  const rules = settings({ rules: [{ exec: "make deploy" }, { tool: "mcp_github_*" }, { tool: "write_file" }] }).rules;
  const call = (name: string) => matchApproval(rules, { name, arguments: {} }, shell);

  it("match a tool by exact name or glob", () => {
    expect(call("mcp_github_create_issue")).toEqual({ rule: 1, why: 'the tool mcp_github_create_issue matches "mcp_github_*"' });
    expect(call("write_file")).toEqual({ rule: 2, why: 'the tool write_file matches "write_file"' });
  });

  it("do not match other tools", () => {
    expect(call("mcp_gitlab_create_issue")).toBeUndefined();
    expect(call("write_file_2")).toBeUndefined();
    expect(call("read_file")).toBeUndefined();
  });
});

describe("approve: web_fetch rules", () => {
  const fetch = (rule: unknown, url: unknown) =>
    matchApproval(settings({ rules: [{ web_fetch: rule }] }).rules, { name: "web_fetch", arguments: { url } }, shell)?.why;

  it("match the URL's host against a glob", () => {
    expect(fetch({ host: "*.example.com" }, "https://api.example.com/v1")).toBe('web_fetch of api.example.com matches "*.example.com"');
    expect(fetch({ host: "*.example.com" }, "https://API.Example.COM./v1")).toBe('web_fetch of api.example.com matches "*.example.com"');
    expect(fetch({ host: "example.com" }, "http://example.com:8080/")).toBe('web_fetch of example.com matches "example.com"');
    expect(fetch({}, "https://anything.test/")).toBe("web_fetch matches the rule for every host");
  });

  it("do not match another host", () => {
    expect(fetch({ host: "*.example.com" }, "https://example.com/")).toBeUndefined();
    expect(fetch({ host: "*.example.com" }, "https://example.com.evil.test/")).toBeUndefined();
    expect(fetch({ host: "*.example.com" }, "https://evil.test/?next=api.example.com")).toBeUndefined();
  });

  it("compare the method with GET, the only one web_fetch sends", () => {
    expect(fetch({ method: "GET", host: "*.example.com" }, "https://api.example.com/")).toBe(
      'web_fetch GET of api.example.com matches "*.example.com"',
    );
    expect(fetch({ method: "POST", host: "*.example.com" }, "https://api.example.com/")).toBeUndefined();
  });

  it("match a URL whose host cannot be read, conservatively", () => {
    expect(fetch({ host: "*.example.com" }, "not a url")).toBe(
      'web_fetch of "not a url", whose host cannot be read, is taken as matching "*.example.com"',
    );
  });

  it("leave other tools alone", () => {
    const rules = settings({ rules: [{ web_fetch: {} }] }).rules;
    expect(matchApproval(rules, { name: "exec", arguments: { command: "curl https://example.com" } }, shell)).toBeUndefined();
  });
});

describe("approve: the block's schema", () => {
  it("defaults the timeout to 4h and on_timeout to deny, and leaves ask to the job's on_failure", () => {
    expect(settings({ rules: [{ tool: "x" }] })).toEqual({
      rules: [{ kind: "tool", name: "x" }],
      timeout: 4 * 3_600_000,
      on_timeout: "deny",
    });
  });

  it("reads ask as delivery targets and the timeout as a duration", () => {
    const read = settings({
      rules: [{ exec: "git push *" }],
      ask: [{ email: { to: ["me@example.com"] } }],
      timeout: "30m",
      on_timeout: "fail",
    });
    expect(read.ask).toEqual([{ kind: "email", to: ["me@example.com"], cc: [], bcc: [], attach: [] }]);
    expect(read.timeout).toBe(1_800_000);
    expect(read.on_timeout).toBe("fail");
  });

  it("names each bad field and value", () => {
    expect(problems({ rules: [] })).toEqual(["approve.rules: expected at least one rule: an approve: block without rules gates nothing"]);
    expect(problems({})).toEqual(["approve.rules: expected a list of rules, got nothing"]);
    expect(problems({ rules: [{}] })).toEqual(['approve.rules[0]: expected a rule: "exec:", "tool:" or "web_fetch:"']);
    expect(problems({ rules: [{ exec: "a", tool: "b" }] })).toEqual([
      "approve.rules[0]: one kind per rule: put exec and tool in separate items",
    ]);
    expect(problems({ rules: [{ shell: "a" }] })).toEqual([
      "approve.rules[0]: unknown key shell",
      'approve.rules[0]: expected a rule: "exec:", "tool:" or "web_fetch:"',
    ]);
    expect(problems({ rules: [{ exec: "" }] })).toEqual(['approve.rules[0].exec: expected a non-empty string, got ""']);
    expect(problems({ rules: [{ web_fetch: { method: "SEND" } }] })).toEqual([
      'approve.rules[0].web_fetch.method: expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got "SEND"',
    ]);
    expect(problems({ rules: [{ tool: "x" }], timeout: "soon" })).toEqual([
      'approve.timeout: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
    ]);
    expect(problems({ rules: [{ tool: "x" }], on_timeout: "retry" })).toEqual([
      'approve.on_timeout: expected one of deny, fail, got "retry"',
    ]);
    expect(problems({ rules: [{ tool: "x" }], ask: [] })).toEqual([
      "approve.ask: expected at least one target: leave ask: out to ask the job's on_failure targets",
    ]);
    expect(problems({ rules: [{ tool: "x" }], ask: [{ email: { to: ["not-an-address"] } }] })).toHaveLength(1);
    expect(problems({ rules: [{ tool: "x" }], asks: [] })).toEqual(["approve: unknown key asks"]);
  });
});
