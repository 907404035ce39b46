import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeEach, describe, expect, it } from "vitest";
import { execOn, expectRefused, makeSandbox, type Sandbox } from "../support/sandbox.js";

/**
 * Attacks where the shell parser and bash disagree, where text becomes code later (arithmetic,
 * here-documents), and programs that run programs (issue 10 item 4). As in shell.test.ts the tool
 * runs without a sandbox, so a line let through would really change the sentinel folder beside
 * the workspace (`../outside` from it): every case asserts the refusal and that nothing outside
 * changed. The first block runs some of the lines with bash itself, proving the attacks are real.
 */

let sb: Sandbox;

beforeEach(async () => {
  sb = await makeSandbox();
  // Text a command can read back and evaluate: the payload arrives in a file, not in the line.
  await writeFile(join(sb.workspace, "f"), "a[$(rm -rf ../outside)]\n");
});

const signal = () => new AbortController().signal;

const RM_RF = "rm with -r and -f is on the deny-list";
const BRACE = "brace expansion holding .. is refused";
const ENV_S = "env -S splits a string into a command";
const ARITH_TEXT = "arithmetic on text holding $( or a backquote is refused";
const ARITH_RUNTIME = "arithmetic on variables in a line that sets variables at run time";
const SYMLINK = "has .. after a folder name";
const DOT_GLOB = 'can match "..", the parent folder';
const OPTIONS = "changing shell options (shopt, set -o) is refused";

describe("the attacks are real: bash itself runs them", () => {
  it.each([
    ["a brace list holding ..", "{rm,-rf,../outside}"],
    ["env -S in a cluster", "env -iS 'rm -rf ../outside'"],
    ["let evaluating a subscript", "let 'x=a[$(rm -rf ../outside)]'"],
    ["a here-string read and evaluated", "read x <<< 'a[$(rm -rf ../outside)]'; echo $((x))"],
    ["a file read and evaluated", "read x < f; echo $((x))"],
    ["a symlink followed by ..", "ln -s . l && rm -r l/../outside"],
    ["a dot glob without globskipdots", "shopt -u globskipdots; rm -r .*/outside"],
    ["sed's e command", "echo | sed 'e rm -rf ../outside'"],
    ["tar -I", "touch x && tar -I 'rm -rf ../outside' -cf a.tar x"],
  ])("%s", async (_name, command) => {
    const before = await sb.snapshot();
    await promisify(execFile)("/bin/bash", ["-c", command], { cwd: sb.workspace }).catch(() => undefined);
    expect(await sb.snapshot()).not.toBe(before);
  });
});

describe("brace expansion holding ..", () => {
  it.each([
    ["the whole command in a list", "{rm,-rf,../outside}", BRACE],
    ["a list that reads outside", "{cat,../outside/secret.txt}", BRACE],
    ["a list that moves a file in", "{mv,../outside/secret.txt,stolen}", BRACE],
    ["a list as an argument", "rm {x,../outside/secret.txt}", BRACE],
    ["a list in the middle of a path", "touch {x,..}/outside/new", BRACE],
    ["a list with .. as an element", "{rm,-rf,..}", BRACE],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });

  it("a plain sequence still runs", async () => {
    expect(
      await execOn(sb.workspace).execute({ command: "echo {1..3} {a..c}" }, { sessionId: "t", workspace: sb.workspace, signal: signal() }),
    ).toBe("1 2 3 a b c\n[exit code 0]");
  });
});

describe("env options read as GNU env reads them", () => {
  it.each([
    ["-S in a cluster", "env -iS 'rm -rf ../outside'", ENV_S],
    ["-S glued to its string", "env -vS'rm -rf ../outside'", ENV_S],
    ["-S after -0 in a cluster", "env -i0S 'rm -rf ../outside'", ENV_S],
    ["an abbreviated --split-string", "env --split='rm -rf ../outside'", ENV_S],
    ["a shorter abbreviation", "env --sp 'rm -rf ../outside'", ENV_S],
    ["-u taking S as its name, then the command", "env -uS rm -rf ../outside", RM_RF],
    ["--unset taking a value, then the command", "env --unset X rm -rf ../outside", RM_RF],
    ["an option env does not have", "env -Z rm ../outside/secret.txt", "env -Z is not an option env reads"],
    ["an option decided at run time", "env $OPT rm ../outside/secret.txt", "an option of env decided at run time"],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });
});

describe("text that arithmetic evaluates as code", () => {
  it.each([
    ["let with a subscript", "let 'x=a[$(rm -rf ../outside)]'", ARITH_TEXT],
    ["let in double quotes", 'let "x=a[\\$(rm -rf ../outside)]"', ARITH_TEXT],
    ["[[ -eq ]] with a subscript", "[[ 'a[$(rm -rf ../outside)]' -eq 1 ]]", ARITH_TEXT],
    ["[[ -lt ]] on the right", "[[ 1 -lt 'a[`rm -rf ../outside`]' ]]", ARITH_TEXT],
    ["[[ -v ]] with a subscript", "[[ -v 'a[$(rm -rf ../outside)]' ]]", "[[ -v ]] on a name holding $( or a backquote is refused"],
    ["a here-string read, then $(( ))", "read x <<< 'a[$(rm -rf ../outside)]'; echo $((x))", RM_RF],
    ["a quoted here-document read, then (( ))", "read x <<'E'\na[$(rm -rf ../outside)]\nE\n(( x ))", RM_RF],
    ["an escaped here-document read, then let", "read x <<E\na[\\$(rm -rf ../outside)]\nE\nlet x", RM_RF],
    ["a file read, then $(( ))", "read x < f; echo $((x))", ARITH_RUNTIME],
    ["a file read with $(cat), then (( ))", "x=$(cat f); (( x ))", ARITH_RUNTIME],
    ["a loop over a file, then $(( ))", "for v in $(cat f); do echo $((v)); done", ARITH_RUNTIME],
    ["mapfile, then an array subscript", "mapfile -t a < f; echo ${b[a]}", ARITH_RUNTIME],
    ["printf -v, then [[ -gt ]]", 'printf -v n %s "$(cat f)"; [[ n -gt 0 ]]', ARITH_RUNTIME],
    ["an integer variable assigned from a file", "declare -i n; n=$(cat f)", ARITH_RUNTIME],
    ["a slice offset read from a file", "read o < f; echo ${x:o}", ARITH_RUNTIME],
    ["a C-style loop on a file's number", "read n < f; for ((i=0; i<n; i++)); do :; done", ARITH_RUNTIME],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });

  it("arithmetic on numbers and on variables the line sets itself still runs", async () => {
    const out = await execOn(sb.workspace).execute(
      { command: "n=3; for ((i=0; i<n; i++)); do :; done; echo $(( n * 2 )) $((i))" },
      { sessionId: "t", workspace: sb.workspace, signal: signal() },
    );
    expect(out).toBe("6 3\n[exit code 0]");
  });
});

describe("here-string and here-document bodies are scanned", () => {
  it.each([
    ["a here-string into read", "read -r x <<< '$(rm -rf ../outside)'", RM_RF],
    ["a quoted here-document into cat", "cat <<'E' > s.sh\nrm -rf ../outside\n$(rm -rf ../outside)\nE", RM_RF],
    ["a here-document into mapfile", "mapfile a <<'E'\n`rm -rf ../outside`\nE", RM_RF],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });

  it.each([
    ["a quoted here-document holding $(", "cat <<'E'\n$(rm ../outside/secret.txt)\nE", "text holding $( or a backquote is refused"],
    ["a here-string holding a backquote", "cat <<< '`rm ../outside/secret.txt`'", "text holding $( or a backquote is refused"],
  ])("in allow-list mode: %s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message, { allowList: ["cat", "read"] });
  });
});

describe("a symbolic link followed by ..", () => {
  it.each([
    ["a write through l/..", "ln -s . l && echo pwned > l/../outside/secret.txt"],
    ["a delete through l/..", "ln -s . l && rm -r l/../outside"],
    ["a read through l/..", "ln -s . l; cat l/../outside/secret.txt"],
    ["a copy in through l/..", "ln -s . l && cp l/../outside/secret.txt here"],
    ["a move out through a deeper link", "mkdir -p a && ln -s . a/l && touch x && mv x a/l/../../outside/"],
    ["an absolute path through the link", (ws: string) => `ln -s . l && rm ${ws}/l/../outside/secret.txt`],
    ["cd into the link first", "ln -s . l && cd l/.. && rm outside/secret.txt"],
  ])("%s", async (_name, attack) => {
    await expectRefused(sb, typeof attack === "string" ? attack : attack(sb.workspace), SYMLINK);
  });
});

describe("file-name patterns that can match ..", () => {
  it.each([
    ["with globskipdots switched off", "shopt -u globskipdots; rm -r .*/outside"],
    ["a read", "cat .*/outside/secret.txt"],
    ["one character after the dot", "cp .?/outside/secret.txt x"],
    ["a bracket after the dot", "rm .[.]/outside/secret.txt"],
    ["a redirection target", "echo pwned > .*/outside/secret.txt"],
    ["as the last component", "rm -r .*"],
  ])("%s", async (_name, attack) => {
    await expectRefused(sb, attack, DOT_GLOB);
  });
});

describe("shell options, set -o and enable", () => {
  it.each([
    ["shopt -u globskipdots", "shopt -u globskipdots", OPTIONS],
    ["shopt -s extglob", "shopt -s extglob; ls", OPTIONS],
    ["shopt -s dotglob", "shopt -s dotglob; ls *", OPTIONS],
    ["set -o posix", "set -o posix", OPTIONS],
    ["set -k (assignments anywhere)", "set -k; ls PATH=.", OPTIONS],
    ["set +B (no brace expansion)", "set +B; ls", OPTIONS],
    ["a nested bash with -O", "bash -O extglob -c 'ls'", OPTIONS],
    ["shopt with an option decided at run time", "shopt -s $OPT", OPTIONS],
    ["enable -n", "enable -n echo; echo", "enable changes which builtins run"],
    ["enable -f", "enable -f ./x.so x", "enable changes which builtins run"],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });

  it("the usual set options still run", async () => {
    const out = await execOn(sb.workspace).execute(
      { command: "set -euo pipefail; set -x; set +x; set +e; shopt -q extglob; echo ok" },
      { sessionId: "t", workspace: sb.workspace, signal: signal() },
    );
    // set -x traces to stderr, which may arrive before or after stdout's "ok".
    expect(out).toMatch(/^ok$/m);
    expect(out).toMatch(/\[exit code 0\]$/);
  });
});

describe("allow-list mode: variables written without an assignment word", () => {
  const allowList = ["ls", "cat", "echo", "printf", "read", "mapfile", "readarray", "declare", "typeset", "getopts", "hash"];
  beforeEach(async () => {
    // A workspace script that would run instead of ls were PATH pointed at the workspace.
    await writeFile(join(sb.workspace, "ls"), `#!/bin/sh\nrm ${sb.outside}/secret.txt\n`, { mode: 0o755 });
  });
  const PATH_REFUSED = "setting PATH is refused";

  it.each([
    ["printf -v PATH", "printf -v PATH %s .; ls", PATH_REFUSED],
    ["read PATH", "read PATH <<< .; ls", PATH_REFUSED],
    ["read -a PATH", "read -a PATH <<< .; ls", PATH_REFUSED],
    ["mapfile PATH", "mapfile -t PATH <<< .; ls", PATH_REFUSED],
    ["readarray into BASH_ENV", "readarray BASH_ENV <<< ./x", "setting BASH_ENV is refused"],
    ["getopts into PATH", "getopts a PATH", PATH_REFUSED],
    ["printf -v a name decided at run time", 'printf -v "$N" %s .; ls', "into a variable named at run time is refused"],
    ["declare -n to PATH", "declare -n p=PATH; p=.; ls", "declare -n is refused"],
    ["typeset -n to PATH", "typeset -n p=PATH", "typeset -n is refused"],
    ["declare -i", "declare -i n=1", "integer variables (-i) are refused"],
    ["mapfile -C running a callback", "mapfile -C ls -c 1 a < f", "mapfile -C runs a callback"],
    ["hash -p pointing a name at a workspace file", "hash -p ./ls cat; cat", "hash -p makes a name run another program"],
  ])("%s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message, { allowList });
  });
});

describe("programs that run programs", () => {
  const notAllowed = /not in the allow-list/;
  it.each([
    ["sed's e command", "echo | sed 'e rm ../outside/secret.txt'", ["sed", "echo"], "sed's e command runs a shell command"],
    ["sed's e command after an address", "sed -n '1e rm ../outside/secret.txt' f", ["sed"], "sed's e command runs a shell command"],
    ["sed's s///e flag", "echo rm ../outside/secret.txt | sed 's/x/x/e'", ["sed", "echo"], "s///e flag runs the pattern space"],
    ["sed's s///e with other flags", "sed -e 's|a|b|ge' f", ["sed"], "s///e flag runs the pattern space"],
    ["sed's w writing outside", "sed -n 'w ../outside/secret.txt' f", ["sed"], "is outside the workspace"],
    ["sed's s///w writing outside", "sed 's/a/b/w ../outside/new' f", ["sed"], "is outside the workspace"],
    ["sed -f running a script file", "sed -f script.sed f", ["sed"], "sed -f runs a script from a file"],
    ["awk system()", "awk 'BEGIN{system(\"rm ../outside/secret.txt\")}'", ["awk"], "runs commands (system())"],
    ["awk piping to a command", "awk '{print | \"sh\"}' f", ["awk"], "pipes to or from a command"],
    ["awk reading from a command", "awk 'BEGIN{\"id\" | getline x}'", ["awk"], "pipes to or from a command"],
    ["awk writing outside", "awk '{print > \"../outside/secret.txt\"}' f", ["awk"], "is outside the workspace"],
    ["awk writing to a computed name", "awk '{print > $1}' f", ["awk"], "writes to a file whose name is computed"],
    ["awk -f", "awk -f prog.awk f", ["awk"], "loads or writes code"],
    ["gawk @load", "gawk '@load \"x\"; BEGIN{}'", ["gawk"], "loads code"],
    ["sort --compress-program", "sort --compress-program=rm f", ["sort"], notAllowed],
    ["sort with an abbreviated option", "sort --compress-prog sh f", ["sort"], notAllowed],
    ["tar --use-compress-program", "tar --use-compress-program='rm ../outside/secret.txt' -cf a.tar f", ["tar"], notAllowed],
    ["tar -I", "tar -I 'rm ../outside/secret.txt' -cf a.tar f", ["tar"], notAllowed],
    ["tar --to-command", "tar -xf a.tar --to-command='rm ../outside/secret.txt'", ["tar"], notAllowed],
    [
      "tar --checkpoint-action=exec",
      "tar -cf a.tar --checkpoint=1 --checkpoint-action=exec='rm ../outside/secret.txt' f",
      ["tar"],
      notAllowed,
    ],
    ["tar I inside a group of options", "tar -cIf 'rm ../outside/secret.txt' a.tar f", ["tar"], "inside a group of options"],
    ["find -exec", "find . -exec rm ../outside/secret.txt \\;", ["find"], notAllowed],
    ["find -execdir", "find . -execdir rm {} +", ["find"], notAllowed],
    ["find -ok", "find . -ok rm {} \\;", ["find"], notAllowed],
    ["find -delete outside", "find ../outside -delete", ["find"], "outside the workspace"],
    ["find -fprint outside", "find . -fprint ../outside/secret.txt", ["find"], "is outside the workspace"],
    ["xargs", "echo ../outside/secret.txt | xargs rm", ["xargs", "echo"], notAllowed],
    ["git -c core.pager", "git -c core.pager='rm ../outside/secret.txt' log", ["git"], notAllowed],
    ["git -c with an alias to a shell", "git -c alias.x='!rm ../outside/secret.txt' x", ["git"], notAllowed],
    ["git -c core.sshCommand", "git -c core.sshCommand='rm ../outside/secret.txt' fetch", ["git"], notAllowed],
    ["git -c include.path", "git -c include.path=../outside/cfg log", ["git"], "changes what git runs or reads"],
    ["git --upload-pack", "git ls-remote --upload-pack='rm ../outside/secret.txt' .", ["git"], notAllowed],
    ["git clone -u", "git clone -u 'rm ../outside/secret.txt' . x", ["git"], notAllowed],
    ["git config core.pager", "git config core.pager 'rm ../outside/secret.txt'", ["git"], "sets a program for git to run"],
    ["git submodule foreach", "git submodule foreach 'rm ../outside/secret.txt'", ["git"], "runs commands given to it"],
    ["git rebase --exec", "git rebase --exec 'rm ../outside/secret.txt' HEAD", ["git"], notAllowed],
    ["git rebase -x", "git rebase -x 'rm ../outside/secret.txt' HEAD", ["git"], "runs commands given to it"],
    ["less +!", "less '+!rm ../outside/secret.txt' f", ["less"], "runs its commands given as +cmd"],
    ["vi", "vi -c '!rm ../outside/secret.txt' f", ["vi"], "its commands can run a shell"],
    ["ed reading commands", "ed f <<< '!rm ../outside/secret.txt'", ["ed"], "its commands can run a shell"],
    ["sqlite3 .shell", "sqlite3 db '.shell rm ../outside/secret.txt'", ["sqlite3"], "its commands can run a shell"],
    ["psql \\!", "psql -c '\\! rm ../outside/secret.txt'", ["psql"], "its commands can run a shell"],
    ["dc !", "dc -e '!rm ../outside/secret.txt'", ["dc"], "its commands can run a shell"],
    ["env", "env rm ../outside/secret.txt", ["env"], notAllowed],
    ["nice", "nice -n 5 rm ../outside/secret.txt", ["nice"], notAllowed],
    ["timeout with an abbreviated --signal", "timeout --sig KILL 5 rm ../outside/secret.txt", ["timeout"], notAllowed],
    ["nohup", "nohup rm ../outside/secret.txt", ["nohup"], notAllowed],
    ["setsid", "setsid rm ../outside/secret.txt", ["setsid"], notAllowed],
    ["flock with a command", "flock l rm ../outside/secret.txt", ["flock"], notAllowed],
    ["flock -c", "flock l -c 'rm ../outside/secret.txt'", ["flock"], notAllowed],
    ["watch", "watch -n 1 rm ../outside/secret.txt", ["watch"], notAllowed],
    ["parallel", "parallel rm ::: ../outside/secret.txt", ["parallel"], "parallel builds the commands it runs"],
    ["make", "make -f ../outside/Makefile", ["make"], "runs code from its arguments or from files a command can write"],
    ["perl -e", "perl -e 'unlink \"../outside/secret.txt\"'", ["perl"], "runs code from its arguments"],
    ["python -c", "python3 -c 'import os; os.remove(\"../outside/secret.txt\")'", ["python3"], "runs code from its arguments"],
    ["node -e", 'node -e \'require("fs").rmSync("../outside/secret.txt")\'', ["node"], "runs code from its arguments"],
    ["ssh -o ProxyCommand", "ssh -o ProxyCommand='rm ../outside/secret.txt' host", ["ssh"], notAllowed],
    ["ssh -oProxyCommand glued", "ssh -oProxyCommand='rm ../outside/secret.txt' host", ["ssh"], notAllowed],
    ["ssh -F a config file", "ssh -F cfg host", ["ssh"], "reads a configuration file"],
    ["scp -S", "scp -S rm a host:b", ["scp"], notAllowed],
    ["rsync -e", "rsync -e 'rm ../outside/secret.txt' a host:b", ["rsync"], notAllowed],
    ["rsync --rsh=", "rsync --rsh='rm ../outside/secret.txt' a host:b", ["rsync"], notAllowed],
    ["zip -TT", "zip -T -TT 'rm ../outside/secret.txt' a.zip f", ["zip"], notAllowed],
    ["man -P", "man -P 'rm ../outside/secret.txt' ls", ["man"], notAllowed],
    ["split --filter", "split --filter='rm ../outside/secret.txt' f", ["split"], notAllowed],
    ["curl -K reading options from a file", "curl -K cfg", ["curl"], "options read from a file"],
    ["nc -e", "nc -e /bin/sh 127.0.0.1 9", ["nc"], "would run a program for each connection"],
    ["crontab", "crontab f", ["crontab"], "runs commands later or elsewhere"],
    ["at", "at now <<< 'rm ../outside/secret.txt'", ["at"], "runs commands later or elsewhere"],
  ])("%s", async (_name, attack, allowList, message) => {
    await writeFile(join(sb.workspace, "l"), "");
    await expectRefused(sb, attack, message, { allowList: allowList as string[] });
  });

  it.each([
    ["tar -I", "touch x && tar -I 'rm -rf ../outside' -cf a.tar x", RM_RF],
    ["tar --use-compress-prog (abbreviated)", "tar --use-compress-prog='rm -rf ../outside' -cf a.tar f", RM_RF],
    ["tar --checkpoint-action=exec", "tar -cf a.tar --checkpoint=1 --checkpoint-action=exec='rm -rf ../outside' f", RM_RF],
    ["sort --compress-program running a shell", "sort --compress-program=sh f", "sh would run commands read from"],
    ["git -c core.pager", "git -c core.pager='rm -rf ../outside' log", RM_RF],
    ["git -c alias with !", "git -c alias.x='!rm -rf ../outside' x", RM_RF],
    ["ssh -o ProxyCommand", "ssh -o ProxyCommand='rm -rf ../outside' host", RM_RF],
    ["rsync -e", "rsync -e 'rm -rf ../outside' a host:b", RM_RF],
    ["zip -TT", "zip -T -TT 'rm -rf ../outside' a.zip f", RM_RF],
    ["man -P", "man -P 'rm -rf ../outside' ls", RM_RF],
    ["timeout --sig", "timeout --sig KILL 5 rm -rf ../outside", RM_RF],
    ["flock -c", "flock l -c 'rm -rf ../outside'", RM_RF],
    ["sed e", "echo | sed 'e rm -rf ../outside'", "sed's e command runs a shell command"],
    ["awk system()", "awk 'BEGIN{system(\"rm -rf ../outside\")}'", "runs commands (system())"],
  ])("without an allow-list: %s", async (_name, attack, message) => {
    await expectRefused(sb, attack, message);
  });

  it("sed and awk scripts that only edit text still run", async () => {
    await writeFile(join(sb.workspace, "t.txt"), "hello world\n");
    const out = await execOn(sb.workspace, { allowList: ["sed", "awk"] }).execute(
      {
        command:
          "sed -e 's/hello/bye/g;p' -n t.txt && awk '{ if ($1 > 0) print $2 > \"out.txt\" } END { print NR }' t.txt && sed '1w copy.txt' t.txt",
      },
      { sessionId: "t", workspace: sb.workspace, signal: signal() },
    );
    expect(out).toBe("bye world\n1\nhello world\n[exit code 0]");
  });
});
