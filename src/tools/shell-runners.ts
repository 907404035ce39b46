/**
 * Programs that run other programs or write files named inside their own arguments: sed's `e`
 * and `w`, awk's system() and pipes, tar's compress program, git's pager, ssh's ProxyCommand...
 * The shell parser sees only words, so for each such program this module says what in its
 * arguments is code, a command, or a path. What cannot be told apart statically is refused.
 */
import { codeOf, longOption, optionValues, type Finding, type Word } from "./shell-args.js";
import { sedFindings } from "./shell-sed.js";

/**
 * Programs that run code taken from their arguments or from files a command can write (a
 * Makefile, package.json, a script): with one of them on an allow-list, every program is allowed.
 */
const INTERPRETERS =
  /^(python[\d.]*|pypy[\d.]*|perl[\d.]*|ruby[\d.]*|irb|node(js)?|deno|bun|php[\d.]*|lua(jit)?[\d.]*|tclsh[\d.]*|wish|expect|Rscript|R|julia|osascript|pwsh|powershell|java|jshell|groovy|scala|make|gmake|bmake|cmake|ninja|npm|npx|pnpm|yarn|pip[\d.]*|cargo|go|gradle|mvn|ant|rake|bundle|gdb|lldb)$/;
/** Editors, pagers and command-line clients whose commands (`:!cmd`, `!cmd`, `.shell`, `\!`) run a shell. */
const EDITORS =
  /^(vi|vim|nvim|view|vimdiff|ex|ed|red|emacs|emacsclient|nano|pico|joe|mcedit|mail|mailx|ftp|lftp|sftp|telnet|sqlite3?|psql|mysql|mariadb|dc|gnuplot)$/;

/** What `program` runs or writes by way of `args`; `allowList`: allow-list mode, where code the policy cannot read is refused. */
export function runnerFindings<W extends Word>(program: string, args: W[], allowList: boolean): Finding<W>[] {
  if (allowList && INTERPRETERS.test(program)) {
    return [
      {
        kind: "refuse",
        why: `in allow-list mode, ${program} is refused: it runs code from its arguments or from files a command can write, so it would allow every program`,
      },
    ];
  }
  if (allowList && EDITORS.test(program)) {
    return [{ kind: "refuse", why: `in allow-list mode, ${program} is refused: its commands can run a shell` }];
  }
  switch (program) {
    case "sed":
    case "gsed":
      return sedFindings(args);
    case "awk":
    case "gawk":
    case "mawk":
    case "nawk":
      return awkFindings(args);
    case "sort": {
      const { found, unknown } = optionValues(args, { "--compress-program": 4 }, []);
      return found.map((prog) =>
        prog === undefined || unknown
          ? { kind: "refuse", why: "sort --compress-program decided at run time cannot be checked" }
          : { kind: "command", argv: [{ value: prog } as W], what: "sort --compress-program" },
      );
    }
    case "tar":
    case "gtar":
      return tarFindings(args);
    case "split": {
      const { found, unknown } = optionValues(args, { "--filter": 3 }, []);
      return codeOf(found, "split --filter", unknown);
    }
    case "git":
      return gitFindings(args);
    case "ssh":
    case "scp":
    case "sftp":
      return sshFindings(program, args);
    case "rsync": {
      const { found, unknown } = optionValues(args, { "--rsh": 4 }, ["e"]);
      return codeOf(found, "rsync -e", unknown);
    }
    case "zip": {
      const { found, unknown } = optionValues(args, { "--unzip-command": 3 }, ["TT"]);
      return codeOf(found, "zip -TT", unknown);
    }
    case "man": {
      const { found, unknown } = optionValues(args, { "--pager": 3, "--html": 3 }, ["P", "H"]);
      return codeOf(found, "man -P", unknown);
    }
    case "less":
    case "more":
    case "most":
      return args.flatMap((arg): Finding<W>[] => {
        const value = arg.value;
        if (value === undefined || (value.startsWith("+") && !/^\+(\d+[gGpP%]?|[FGg]|\/[^!|]*)$/.test(value))) {
          return [{ kind: "refuse", why: `${program} runs its commands given as +cmd, which can start a shell` }];
        }
        if (/^(-k|--lesskey-file|--lesskey-src)/.test(value))
          return [{ kind: "refuse", why: `${program} reads key bindings, which can run a shell, from a file` }];
        return [];
      });
    case "diff3":
    case "sdiff": {
      const { found, unknown } = optionValues(args, { "--diff-program": 4 }, []);
      return found.map((prog) =>
        prog === undefined || unknown
          ? { kind: "refuse", why: `${program} --diff-program decided at run time cannot be checked` }
          : { kind: "command", argv: [{ value: prog } as W], what: `${program} --diff-program` },
      );
    }
    case "script": {
      const { found, unknown } = optionValues(args, { "--command": 4 }, ["c"]);
      if (found.length === 0)
        return [{ kind: "refuse", why: "script without -c runs an interactive shell, whose commands cannot be checked" }];
      return codeOf(found, "script -c", unknown);
    }
    case "nc":
    case "ncat":
    case "netcat":
    case "socat":
      return args.some((arg) => arg.value === undefined || /^(-[ec]|--(sh|lua)-exec|--exec)|(^|[,:!])(EXEC|SYSTEM):/i.test(arg.value))
        ? [{ kind: "refuse", why: `${program} would run a program for each connection, which is not checked` }]
        : [];
    case "parallel":
      return [{ kind: "refuse", why: "parallel builds the commands it runs from its input and arguments, which cannot be checked" }];
    case "crontab":
    case "at":
    case "batch":
    case "systemd-run":
    case "daemonize":
    case "start-stop-daemon":
      return [{ kind: "refuse", why: `${program} runs commands later or elsewhere, outside the command and its check` }];
    case "curl":
    case "wget":
      return allowList && args.some((arg) => arg.value === undefined || /^(-K|--config|-e|--execute)/.test(arg.value))
        ? [
            {
              kind: "refuse",
              why: `in allow-list mode, ${program} options read from a file or given with -e are refused: they are not checked`,
            },
          ]
        : [];
    case "hash":
      return args.some((arg) => arg.value === undefined || /^-[a-z]*p/.test(arg.value))
        ? [{ kind: "refuse", why: "hash -p makes a name run another program, which is refused" }]
        : [];
    case "enable":
      return [{ kind: "refuse", why: "enable changes which builtins run (or loads new ones), which cannot be checked" }];
    default:
      return [];
  }
}

/** tar runs -I/--use-compress-program, --to-command, --checkpoint-action=exec, the volume scripts and a remote shell. */
function tarFindings<W extends Word>(args: W[]): Finding<W>[] {
  const out: Finding<W>[] = [];
  const longs = {
    "--use-compress-program": 5,
    "--to-command": 5,
    "--info-script": 4,
    "--new-volume-script": 5,
    "--rsh-command": 4,
    "--rmt-command": 4,
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === undefined) {
      out.push({ kind: "refuse", why: "an argument of tar decided at run time could name a program for it to run" });
      continue;
    }
    let matched = false;
    for (const [name, min] of Object.entries(longs)) {
      const hit = longOption(arg, name, min);
      if (!hit) continue;
      matched = true;
      const code = hit.value ?? args[++i]?.value;
      out.push(
        code === undefined
          ? { kind: "refuse", why: `tar ${name} decided at run time cannot be checked` }
          : { kind: "code", code, what: `tar ${name}` },
      );
    }
    const action = longOption(arg, "--checkpoint-action", 13);
    if (action) {
      matched = true;
      const value = action.value ?? args[++i]?.value;
      if (value === undefined) out.push({ kind: "refuse", why: "tar --checkpoint-action decided at run time cannot be checked" });
      else if (value.startsWith("exec=")) out.push({ kind: "code", code: value.slice(5), what: "tar --checkpoint-action=exec" });
    }
    if (matched) continue;
    if (arg === "-I" || arg === "-F") {
      const code = args[++i]?.value;
      out.push(
        code === undefined
          ? { kind: "refuse", why: `tar ${arg} decided at run time cannot be checked` }
          : { kind: "code", code, what: `tar ${arg}` },
      );
    } else if (/^-[IF]./.test(arg)) {
      out.push({ kind: "code", code: arg.slice(2), what: `tar ${arg.slice(0, 2)}` });
    } else if ((i === 0 && /^[A-Za-z]*[IF]/.test(arg) && !arg.startsWith("-")) || /^-[A-Za-z]+[IF]/.test(arg)) {
      // In a group of letters (-xI, old-style "cIf") which word is the program depends on their order.
      out.push({ kind: "refuse", why: "tar with I or F inside a group of options names a program to run; write it as -I PROGRAM" });
    }
  }
  return out;
}

/** Configuration keys whose value git runs (or that make git read more configuration). */
const GIT_CODE_KEYS =
  /^(core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass|gitproxy)|sequence\.editor|gpg(\.[^.]+)?\.program|credential(\..+)?\.helper|diff(\..+)?\.(external|textconv|command)|merge\..+\.driver|filter\..+\.(clean|smudge|process)|alias\..+|pager\..+|web\.browser|browser\..+\.(cmd|path)|man\..+\.(cmd|path)|uploadpack\.packobjectshook|include(if\..+)?\.path|remote\..+\.(uploadpack|receivepack|vcs)|protocol\..+|ssh\.variant|difftool\..+\.(cmd|path)|mergetool\..+\.(cmd|path)|submodule\..+\.update|sendemail\..+|instaweb\..+)$/i;

function gitFindings<W extends Word>(args: W[]): Finding<W>[] {
  const out: Finding<W>[] = [];
  const values = args.map((arg) => arg.value);
  if (values.some((value) => value === undefined))
    return [{ kind: "refuse", why: "an argument of git decided at run time could set a program for it to run" }];
  const known = values as string[];
  for (let i = 0; i < known.length; i++) {
    const arg = known[i]!;
    const setting =
      arg === "-c"
        ? known[++i]
        : arg.startsWith("-c") && arg.length > 2
          ? arg.slice(2)
          : longOption(arg, "--config-env", 10)
            ? "env"
            : undefined;
    if (setting === "env") out.push({ kind: "refuse", why: "git --config-env takes a setting from a variable, which cannot be checked" });
    else if (setting !== undefined) {
      const [key = "", ...rest] = setting.split("=");
      if (GIT_CODE_KEYS.test(key)) {
        const value = rest.join("=");
        if (/^include/i.test(key) || /^protocol/i.test(key))
          out.push({ kind: "refuse", why: `git -c ${key} is refused: it changes what git runs or reads` });
        else if (!/^alias\./i.test(key) || value.startsWith("!"))
          out.push({ kind: "code", code: value.replace(/^!/, ""), what: `git -c ${key}` });
      }
    }
    for (const [name, min] of Object.entries({
      "--upload-pack": 4,
      "--receive-pack": 4,
      "--exec": 6,
      "--extcmd": 5,
      "--open-files-in-pager": 4,
    })) {
      const hit = longOption(arg, name, min);
      if (hit)
        out.push(
          hit.value === undefined && name === "--open-files-in-pager"
            ? { kind: "refuse", why: "git grep -O runs a pager" }
            : { kind: "code", code: hit.value ?? known[++i] ?? "", what: `git ${name}` },
        );
    }
    if (arg === "--exec-path" || arg.startsWith("--exec-path="))
      out.push({ kind: "refuse", why: "git --exec-path makes git run its commands from another folder" });
  }
  const sub = known.find(
    (arg, i) => !arg.startsWith("-") && !["-c", "-C", "--git-dir", "--work-tree", "--namespace"].includes(known[i - 1] ?? ""),
  );
  if (sub === "config" && !known.some((arg) => /^(--get|--list|-l$|--get-all|--get-regexp|--show)/.test(arg))) {
    const key = known.slice(known.indexOf("config") + 1).find((arg) => !arg.startsWith("-"));
    if (key === undefined || GIT_CODE_KEYS.test(key))
      out.push({ kind: "refuse", why: `git config ${key ?? ""} sets a program for git to run, which is refused`.replace("  ", " ") });
  }
  if (["submodule", "bisect", "filter-branch", "rebase", "difftool", "mergetool", "daemon", "instaweb", "send-email"].includes(sub ?? "")) {
    const runs =
      sub === "submodule"
        ? known.includes("foreach")
        : sub === "bisect"
          ? known.includes("run")
          : sub === "rebase"
            ? known.some((arg) => /^(-x|--exec)/.test(arg))
            : true;
    if (runs) out.push({ kind: "refuse", why: `git ${sub} runs commands given to it or configured for it, which are not checked` });
  }
  for (let i = 0; i < known.length; i++) {
    if (sub !== undefined && ["clone", "fetch", "pull", "ls-remote", "archive", "push"].includes(sub) && known[i] === "-u")
      out.push({ kind: "code", code: known[i + 1] ?? "", what: `git ${sub} -u` });
  }
  return out;
}

function sshFindings<W extends Word>(program: string, args: W[]): Finding<W>[] {
  const out: Finding<W>[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === undefined) {
      out.push({ kind: "refuse", why: `an argument of ${program} decided at run time could set a command for it to run` });
      continue;
    }
    if (arg === "--") break;
    if (arg === "-F" || (arg.startsWith("-F") && !arg.startsWith("--")))
      out.push({ kind: "refuse", why: `${program} -F reads a configuration file, which can name commands to run` });
    if ((program === "scp" || program === "sftp") && /^-[A-Za-z]*[SD]$/.test(arg)) {
      const prog = args[++i]?.value;
      out.push(
        prog === undefined
          ? { kind: "refuse", why: `${program} -S decided at run time cannot be checked` }
          : { kind: "command", argv: [{ value: prog } as W], what: `${program} -S` },
      );
    }
    if (program === "sftp" && /^-[A-Za-z]*b/.test(arg))
      out.push({ kind: "refuse", why: "sftp -b runs a batch of commands, which can start a shell" });
    const option = arg === "-o" ? args[++i]?.value : /^-o./.test(arg) ? arg.slice(2) : undefined;
    if (arg === "-o" && option === undefined) out.push({ kind: "refuse", why: `${program} -o decided at run time cannot be checked` });
    if (option === undefined) continue;
    const match = /^\s*([A-Za-z]+)\s*[=\s]\s*(.*)$/s.exec(option);
    const name = match?.[1]?.toLowerCase() ?? option.toLowerCase();
    if (["proxycommand", "localcommand", "knownhostscommand", "remotecommand"].includes(name))
      out.push({ kind: "code", code: match?.[2] ?? "", what: `${program} -o ${match?.[1]}` });
    if (
      [
        "include",
        "match",
        "permitlocalcommand",
        "proxyusefdpass",
        "securitykeyprovider",
        "pkcs11provider",
        "controlpath",
        "controlmaster",
      ].includes(name)
    ) {
      out.push({ kind: "refuse", why: `${program} -o ${match?.[1] ?? option} is refused: it can make ${program} run or load other code` });
    }
  }
  return out;
}

/**
 * awk runs commands with system(), `cmd | getline`, `print | "cmd"` and `|&`, writes files with
 * `print > "file"`, and loads code with @load/@include, -f, -i, -l and -E.
 */
function awkFindings<W extends Word>(args: W[]): Finding<W>[] {
  let program: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === undefined) return [{ kind: "refuse", why: "an argument of awk decided at run time could be a program that runs commands" }];
    if (arg === "--") {
      program = args[i + 1]?.value;
      break;
    }
    if (/^(-f|--file|-i|--include|-l|--load|-E|--exec|-o|--pretty-print|-p|--profile|-D|--debug)/.test(arg)) {
      return [{ kind: "refuse", why: `awk ${arg} loads or writes code or files that are not checked` }];
    }
    if (/^(-F|-v|--field-separator|--assign)$/.test(arg)) {
      i++;
      continue;
    }
    if (arg.startsWith("-") && arg !== "-") continue;
    program = arg;
    break;
  }
  if (program === undefined) return [];
  const code = program.replace(/"(\\.|[^"\\])*"/g, (s) => s.replace(/[|>]/g, "_"));
  if (/\bsystem\s*\(/.test(code) || /@(load|include|namespace)/.test(code)) {
    return [{ kind: "refuse", why: "the awk program runs commands (system()) or loads code, which is refused" }];
  }
  if (/\|(?!\|)/.test(code.replace(/\|\|/g, "")))
    return [{ kind: "refuse", why: "the awk program pipes to or from a command, which is refused" }];
  const out: Finding<W>[] = [];
  // `print > "file"`, `printf ... >> "file"`: the file is a path; a name computed at run time is refused.
  for (const statement of program.split(/[;\n{}]/)) {
    const redirect = /\bprintf?\b.*?>>?\s*(.*)$/s.exec(statement);
    if (!redirect) continue;
    const target = /^"((?:\\.|[^"\\])*)"\s*\)?\s*$/.exec(redirect[1]!.trim());
    if (!target) return [{ kind: "refuse", why: "the awk program writes to a file whose name is computed, which cannot be checked" }];
    out.push({ kind: "path", path: target[1]! });
  }
  for (const match of program.matchAll(/getline\s*<\s*"((?:\\.|[^"\\])*)"/g)) out.push({ kind: "path", path: match[1]! });
  return out;
}
