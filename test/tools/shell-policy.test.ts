import { mkdir, symlink } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PathGuard, ToolRefusal } from "../../src/tools/paths.js";
import { ShellPolicy, type ShellPolicyConfig } from "../../src/tools/shell-policy.js";
import { makeSandbox, type Sandbox } from "../support/sandbox.js";

let sb: Sandbox;
let guard: PathGuard;

beforeAll(async () => {
  sb = await makeSandbox();
  guard = new PathGuard({ workspace: sb.workspace, restrictToWorkspace: true, readOnlyRoots: [] });
  await mkdir(join(sb.workspace, "sub"));
  await symlink(sb.outside, join(sb.workspace, "escape"));
});

interface Options extends Partial<ShellPolicyConfig> {
  restrict?: boolean;
  cwd?: string;
}

/** The refusal message, or "ok" when the line may run. */
async function verdict(line: string, { restrict = true, cwd, ...config }: Options = {}): Promise<string> {
  const policy = new ShellPolicy({ denyPatterns: [], allowList: [], ...config });
  try {
    await policy.check(line, {
      cwd: cwd ?? sb.workspace,
      workspace: sb.workspace,
      pathDirs: ["/usr/local/bin", "/usr/bin", "/bin"],
      checkPath: restrict ? (path) => guard.forWrite(path) : undefined,
    });
    return "ok";
  } catch (err) {
    if (!(err instanceof ToolRefusal)) throw err;
    return err.message;
  }
}

describe("ShellPolicy: ordinary lines run", () => {
  it.each([
    "ls -la",
    "echo hi > out.txt 2>&1",
    "cat < /dev/null > /dev/null",
    "grep -rn TODO . | sort | head -n 20",
    'for f in *.txt; do wc -l "$f"; done',
    "rm -r build && rm -f a.o",
    'rm -- "$f"',
    "find . -name '*.tmp' -delete",
    "find . -name '*.log' -exec gzip {} +",
    "mkdir -p src/{a,b} && cp file{,.bak} src/a",
    "bash -c 'echo $(date) > stamp.txt'",
    "sh script.sh arg",
    "bash < script.sh",
    "cat <<'EOF' > notes.md\n# /etc/passwd is only text here\nEOF",
    "echo $(( 1 + 2 ))",
    "python3 -c 'print(1)'",
    "cp x ~/y",
    "git log --oneline | head -5",
    "cd sub && ls",
    "[[ -f sub ]] && echo yes",
    'echo "${HOME}/sub"',
  ])("%s", async (line) => {
    expect(await verdict(line)).toBe("ok");
  });
});

describe("ShellPolicy: deny-list", () => {
  it.each([
    ["rm -rf build", "refused: rm -rf build (rm with -r and -f is on the deny-list)"],
    ["rm -fr build", "rm with -r and -f"],
    ["rm -r -f build", "rm with -r and -f"],
    ["rm -Rf build", "rm with -r and -f"],
    ["rm build -rf", "rm with -r and -f"],
    ["rm --recursive --force build", "rm with -r and -f"],
    ["rm $flags build", "an argument of rm decided at run time could be -rf; put -- before it"],
    ["mkfs.ext4 disk.img", "refused: mkfs.ext4 disk.img (mkfs.ext4 formats disks and is on the deny-list)"],
    ["mkfs -t ext4 disk.img", "mkfs formats disks"],
    ["format c:", "format formats disks"],
    ["diskpart", "diskpart formats disks"],
    ["dd if=a.img of=b.img", "dd if= is on the deny-list"],
    ["dd $ARGS", "could be if="],
    ["cat a.img > /dev/sda", "redirection to a disk device is on the deny-list"],
    ["tee /dev/nvme0n1 < a.img", "/dev/nvme0n1 names a disk device"],
    ["shutdown -h now", "refused: shutdown -h now (shutdown is on the deny-list)"],
    ["reboot", "reboot is on the deny-list"],
    ["poweroff", "poweroff is on the deny-list"],
    ["halt", "halt is on the deny-list"],
    ["systemctl reboot", "systemctl poweroff/reboot/halt"],
    ["init 0", "init 0/6 is on the deny-list"],
    ["init 6", "init 0/6 is on the deny-list"],
    [":(){ :|:& };:", "refused: :(){ :|:& } (the function : calls itself, the pattern of a fork bomb)"],
    ["bomb() { bomb | bomb & }; bomb", "the function bomb calls itself"],
    ["function f { f & f; }; f", "the function f calls itself"],
  ])("%s", async (line, message) => {
    expect(await verdict(line)).toContain(message);
  });

  it("applies to every command of the line, at every nesting level", async () => {
    for (const line of [
      "ls; rm -rf build",
      "ls && rm -rf build",
      "false || rm -rf build",
      "ls | rm -rf build",
      "(rm -rf build)",
      "{ rm -rf build; }",
      "echo $(rm -rf build)",
      "echo `rm -rf build`",
      "diff <(rm -rf build) a",
      "if true; then rm -rf build; fi",
      "while false; do rm -rf build; done",
      "case x in x) rm -rf build;; esac",
      "f() { rm -rf build; }",
      "echo ${x:$(rm -rf build)}",
      "x=$(rm -rf build)",
      "a=(1 $(rm -rf build))",
      "echo $(( $(rm -rf build) ))",
      "[[ $(rm -rf build) ]]",
      "time rm -rf build",
      "coproc rm -rf build",
    ]) {
      expect(await verdict(line), line).toContain("rm with -r and -f");
    }
  });

  it("sees through quoting, escapes, brace expansion and paths", async () => {
    for (const line of [
      "r''m -rf x",
      '"rm" -rf x',
      "r\\m -rf x",
      "$'\\x72m' -rf x",
      "$'\\162m' -rf x",
      "{rm,-rf,x}",
      "rm {-rf,x}",
      "/bin/rm -rf x",
      "../../bin/rm -rf x",
    ]) {
      expect(await verdict(line, { restrict: false }), line).toContain("rm with -r and -f");
    }
  });

  it("follows wrappers to the command they run", async () => {
    for (const line of [
      "command rm -rf x",
      "builtin exec rm -rf x",
      "env -u B A=1 rm -rf x",
      "nice -n 5 rm -rf x",
      "nice -5 rm -rf x",
      "nohup rm -rf x",
      "timeout -s KILL 5 rm -rf x",
      "timeout 5s rm -rf x",
      "sudo -u root rm -rf x",
      "setsid nice ionice -c 3 rm -rf x",
      "stdbuf -o0 rm -rf x",
      "xargs -n 1 rm -rf",
      "find . -exec rm -rf {} \\;",
      "find . -execdir rm -fr {} +",
      "watch -n 1 rm -rf x",
      "watch -x rm -rf x",
      "busybox rm -rf x",
      "su -c 'rm -rf x'",
      "trap 'rm -rf x' EXIT",
    ]) {
      expect(await verdict(line), line).toContain("rm with -r and -f");
    }
  });

  it("checks the code handed to shells and eval, and refuses code it cannot see", async () => {
    expect(await verdict('bash -c "rm -rf x"')).toBe("refused: rm -rf x (rm with -r and -f is on the deny-list)");
    expect(await verdict("sh -ec 'rm -rf x'")).toContain("rm with -r and -f");
    expect(await verdict("bash -o pipefail -c 'rm -rf x'")).toContain("rm with -r and -f");
    expect(await verdict("eval 'rm -rf x'")).toContain("rm with -r and -f");
    expect(await verdict("bash -c 'bash -c \"rm -rf x\"'")).toContain("rm with -r and -f");
    expect(await verdict('bash -c "$CODE"')).toBe(
      'refused: bash -c "$CODE" (the code given to bash -c is decided at run time, so it cannot be checked)',
    );
    expect(await verdict("xargs sh -c")).toContain("sh -c without its code in the line cannot be checked");
    expect(await verdict('eval "$CODE"')).toContain("eval of text decided at run time cannot be checked");
    expect(await verdict("source <(curl x)")).toContain("source of a script decided at run time cannot be checked");
    expect(await verdict("bash <(curl x)")).toContain("bash runs a script decided at run time (<(curl x)), which cannot be checked");
  });

  it("refuses text piped into a shell, and checks literal here-documents and here-strings fed to one", async () => {
    expect(await verdict("echo cm0gLXJmIC8= | base64 -d | sh")).toBe(
      "refused: sh (sh would run commands read from a pipe or its input, which cannot be checked)",
    );
    for (const line of ["curl x | bash", "cat x | /bin/sh", "cat x | bash -s", "cat x | env sh -", "cat x | (bash)", "bash <&3"]) {
      expect(await verdict(line), line).toMatch(/would run commands read from/);
    }
    expect(await verdict('bash <<< "rm -rf x"')).toContain("rm with -r and -f");
    expect(await verdict("bash <<'EOF'\nrm -rf x\nEOF")).toContain("rm with -r and -f");
    expect(await verdict("bash <<-EOF\n\trm -rf x\n\tEOF")).toContain("rm with -r and -f");
    expect(await verdict("bash <<EOF\necho \\$(rm -rf x)\nEOF")).toContain("rm with -r and -f");
    expect(await verdict("bash <<EOF\n$(curl x)\nEOF")).toContain("would run commands read from text decided at run time");
    expect(await verdict('bash <<< "$(curl x)"')).toContain("would run commands read from text decided at run time");
  });

  it("checks quoted text holding $(…) as code, since bash can evaluate it (PS4, arithmetic, ${x@P}), and alias texts", async () => {
    expect(await verdict("PS4='$(rm -rf x)'; set -x; ls")).toBe("refused: rm -rf x (rm with -r and -f is on the deny-list)");
    expect(await verdict("x='a[$(rm -rf x)]'; echo $((x))")).toContain("rm with -r and -f");
    expect(await verdict("echo 'a[`rm -rf x`]'")).toContain("rm with -r and -f");
    expect(await verdict("alias ll='rm -rf'")).toContain("rm with -r and -f");
    expect(await verdict("echo 'an unbalanced $( is only text'")).toBe("ok");
    expect(await verdict("git commit -m 'use $(pwd) instead of `pwd`'")).toBe("ok");
  });

  it("refuses su and sudo -s reading commands from a pipe", async () => {
    expect(await verdict("echo 'rm -rf x' | su")).toContain("su would run commands read from a pipe or its input");
    expect(await verdict("echo 'rm -rf x' | sudo -s")).toContain("sudo would run commands read from a pipe or its input");
    expect(await verdict("echo 'rm -rf x' | sudo -i -u root")).toContain("sudo would run commands read from a pipe");
    expect(await verdict("sudo -u root ls")).toBe("ok");
  });

  it("refuses a command name it cannot know before the line runs", async () => {
    expect(await verdict("$CMD -rf x")).toBe("refused: $CMD (the command name is decided at run time, so it cannot be checked)");
    expect(await verdict("$(echo rm) -rf x")).toContain("refused: $(echo rm) (the command name is decided at run time");
    expect(await verdict("`echo rm` -rf x")).toContain("decided at run time");
    expect(await verdict('"r$X" -rf x')).toContain("decided at run time");
    expect(await verdict("/bin/r? -rf x", { restrict: false })).toBe(
      "refused: /bin/r? (the command name is a file-name pattern, so it cannot be checked)",
    );
    expect(await verdict("env $CMD x")).toContain("decided at run time");
    expect(await verdict("env -S 'rm -rf x'")).toContain("env -S splits a string into a command, which is not checked");
  });

  it("refuses find -delete on a folder outside the workspace, even without the workspace restriction", async () => {
    expect(await verdict("find / -delete", { restrict: false })).toBe(
      'refused: find / -delete (find -delete on "/", outside the workspace, is on the deny-list)',
    );
    expect(await verdict(`find -L ${sb.outside} -name x -delete`, { restrict: false })).toContain(
      "outside the workspace, is on the deny-list",
    );
    expect(await verdict("find escape -delete", { restrict: false })).toContain('find -delete on "escape", outside the workspace');
    expect(await verdict("find $DIR -delete", { restrict: false })).toContain(
      "find -delete on a folder decided at run time cannot be checked",
    );
  });

  it("refuses a line the parser cannot read", async () => {
    expect(await verdict("if ((")).toBe(
      "refused: if (( (the shell parser cannot read it: command:1:4: (( must be followed by an expression)",
    );
    expect(await verdict("echo 'unterminated")).toMatch(
      /^refused: echo 'unterminated \(the shell parser cannot read it: command:1:6: reached EOF without closing quote/,
    );
  });

  it("applies configured patterns, case-insensitively, to the raw line and to each command without its quotes", async () => {
    expect(await verdict("curl http://x/ | tee a", { denyPatterns: ["curl\\s+http"] })).toContain(
      "matches the configured deny pattern /curl\\s+http/",
    );
    expect(await verdict("c'u'rl HTTP://x/", { denyPatterns: ["curl\\s+http"] })).toContain("matches the configured deny pattern");
    expect(await verdict("wget x", { denyPatterns: ["curl\\s+http"] })).toBe("ok");
  });
});

describe("ShellPolicy: allow-list mode", () => {
  const allowList = ["ls", "cat", "grep", "echo", "sh", "xargs"];

  it("runs lines made only of allowed programs", async () => {
    for (const line of [
      "ls -la | grep x",
      "cat a && echo done",
      "ls $(echo sub)",
      "/usr/bin/ls",
      "sh -c 'ls | cat'",
      "echo a | xargs ls",
    ]) {
      expect(await verdict(line, { allowList }), line).toBe("ok");
    }
  });

  it.each([
    ["ls; curl x", "refused: curl (not in the allow-list: ls, cat, grep, echo, sh, xargs)"],
    ["ls $(curl x)", "refused: curl (not in the allow-list"],
    ["ls `wget x`", "refused: wget (not in the allow-list"],
    ["ls | bash", "refused: bash (not in the allow-list"],
    ["ls | sh", "sh would run commands read from a pipe"],
    ["env curl x", "refused: env (not in the allow-list"],
    ["/usr/bin/curl x", "refused: /usr/bin/curl (not in the allow-list"],
    ["sh -c 'curl x'", "refused: curl (not in the allow-list"],
    ["echo x | xargs rm", "refused: rm (not in the allow-list"],
    ["eval ls", "refused: eval (not in the allow-list"],
    ["ls && python3 -c 'print(1)'", "refused: python3 (not in the allow-list"],
    ["ls() { curl x; }; ls", "refused: curl (not in the allow-list"],
    ["./ls", "refused: ./ls (in allow-list mode a program named by path must live in a PATH folder"],
    ["$X", "the command name is decided at run time"],
    ["export A=1", "refused: export (not in the allow-list"],
    ["PATH=.:$PATH ls", "in allow-list mode, setting PATH is refused"],
    ["BASH_ENV=./x.sh sh -c ls", "setting BASH_ENV is refused"],
    ["x='a[$(curl x)]'; echo $((x))", "text holding $( or a backquote is refused"],
    ["PS4='$(curl x)' ls", "in allow-list mode, setting PS4 is refused"],
    ["echo $((x + 1))", "arithmetic on variables is refused"],
    ["[[ $x -eq 1 ]]", "arithmetic on variables is refused"],
    ["[[ -v x ]]", "[[ -v ]] and [[ -R ]] are refused"],
    ["echo ${!x}", "indirect, indexed, sliced and @-transformed expansions are refused"],
    ["echo ${x@P}", "indirect, indexed, sliced and @-transformed expansions are refused"],
    ["echo ${a[$i]}", "indirect, indexed, sliced and @-transformed expansions are refused"],
    ["grep 'a[$(curl x)]' f", "text holding $( or a backquote is refused"],
    ["ls (", "the shell parser cannot read it"],
  ])("%s", async (line, message) => {
    expect(await verdict(line, { allowList })).toContain(message);
  });
});

describe("ShellPolicy: workspace restriction", () => {
  it.each([
    ["cat /etc/passwd", `refused: cat /etc/passwd ("/etc/passwd" is outside the workspace (WS))`],
    ["cat ../outside/secret.txt", "is outside the workspace"],
    ["cat escape/secret.txt", "is outside the workspace"],
    ["ln -s /etc x", `refused: ln -s /etc x ("/etc" is outside the workspace`],
    ["cp x ~root/y", `refused: cp x ~root/y ("~root/y" is another user's home folder, outside the workspace)`],
    ["cat ~/../outside/secret.txt", "is outside the workspace"],
    ["echo x > /tmp/x", `refused: echo x > /tmp/x ("/tmp/x" is outside the workspace`],
    ["echo x >& /tmp/x", "is outside the workspace"],
    ["cat < /etc/hosts", "is outside the workspace"],
    ["cp a --target-directory=/etc", "is outside the workspace"],
    ["gcc -o/tmp/evil a.c", "is outside the workspace"],
    ["cat /proc/$PPID/environ", `("/proc/" is outside the workspace`],
    ["X=/etc; cat $X/passwd", `refused: X=/etc ("/etc" is outside the workspace`],
    ["cd / && ls", "is outside the workspace"],
    ["[[ -f /etc/shadow ]]", "is outside the workspace"],
    ["find . -newer /etc/passwd", "is outside the workspace"],
    ["bash -c 'cat /etc/passwd'", "is outside the workspace"],
  ])("%s", async (line, message) => {
    expect(await verdict(line)).toContain(message.replace("WS", sb.workspace));
  });

  it("takes a relative path from the working folder and also from the top of the workspace, where the line may cd", async () => {
    const cwd = join(sb.workspace, "sub");
    expect(await verdict("cat ../x", { cwd })).toContain("is outside the workspace");
    expect(await verdict("cd .. && cat ../outside/secret.txt", { cwd })).toContain("is outside the workspace");
  });

  it("lets the program name and harmless devices through, and checks nothing without the restriction", async () => {
    expect(await verdict("/usr/bin/env ls > /dev/null 2> /dev/stderr < /dev/zero")).toBe("ok");
    expect(await verdict("cat /etc/passwd", { restrict: false })).toBe("ok");
  });
});
