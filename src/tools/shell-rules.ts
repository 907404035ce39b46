/**
 * The tables and rules of the shell policy that a reviewer edits: which programs are shells,
 * which wrap another command (and how to find it), which variables change what code runs, which
 * set options are harmless, and the deny-list. Programs that run code named inside their own
 * arguments (sed, tar, git...) are in shell-runners.ts, sed's script reader in shell-sed.ts.
 */
import type { Arg } from "./shell-expand.js";

export const SHELLS = new Set(["sh", "bash", "rbash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh"]);

/** Programs that run the command given in their arguments, with the options that take a value. */
export const WRAPPERS: Record<string, { valueOptions: string[]; operandsBefore?: number }> = {
  command: { valueOptions: [] },
  builtin: { valueOptions: [] },
  exec: { valueOptions: ["-a"] },
  nohup: { valueOptions: [] },
  setsid: { valueOptions: [] },
  time: { valueOptions: ["-f", "--format", "-o", "--output"] },
  nice: { valueOptions: ["-n", "--adjustment"] },
  ionice: { valueOptions: ["-c", "-n", "--class", "--classdata"] },
  stdbuf: { valueOptions: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  timeout: { valueOptions: ["-s", "--signal", "-k", "--kill-after"], operandsBefore: 1 },
  sudo: {
    valueOptions: [
      "-u",
      "-g",
      "-h",
      "-p",
      "-C",
      "-D",
      "-r",
      "-t",
      "-T",
      "-U",
      "--user",
      "--group",
      "--host",
      "--prompt",
      "--chdir",
      "--role",
      "--type",
    ],
  },
  doas: { valueOptions: ["-u", "-C"] },
  env: { valueOptions: ["-u", "--unset", "-C", "--chdir"] },
  xargs: {
    valueOptions: [
      "-a",
      "-d",
      "-E",
      "-I",
      "-L",
      "-n",
      "-P",
      "-s",
      "--arg-file",
      "--delimiter",
      "--eof",
      "--replace",
      "--max-lines",
      "--max-args",
      "--max-procs",
      "--max-chars",
      "--process-slot-var",
    ],
  },
  busybox: { valueOptions: [] },
  flock: { valueOptions: ["-w", "--timeout", "-E", "--conflict-exit-code"], operandsBefore: 1 },
  chroot: { valueOptions: ["--userspec", "--groups"], operandsBefore: 1 },
  taskset: { valueOptions: [], operandsBefore: 1 },
  chrt: { valueOptions: [], operandsBefore: 1 },
  unshare: { valueOptions: ["-S", "-G", "--setuid", "--setgid", "-R", "--root", "-w", "--wd"] },
  nsenter: { valueOptions: ["-t", "--target", "-S", "-G", "--setuid", "--setgid", "-r", "-w"] },
  prlimit: { valueOptions: ["-p", "--pid", "-o", "--output"] },
  runuser: { valueOptions: ["-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w", "--whitelist-environment"] },
  strace: { valueOptions: ["-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-X"] },
  ltrace: { valueOptions: ["-e", "-o", "-p", "-s", "-u", "-a", "-l", "-n", "-x", "-A", "-D", "-F"] },
  valgrind: { valueOptions: [] },
  fakeroot: { valueOptions: ["-l", "--lib", "--faked", "-s", "-i"] },
  firejail: { valueOptions: [] },
  catchsegv: { valueOptions: [] },
  torsocks: { valueOptions: ["-u", "-p", "-a", "-P"] },
  proxychains: { valueOptions: ["-f"] },
  proxychains4: { valueOptions: ["-f"] },
  chronic: { valueOptions: [] },
};

/** Variables that make a later command run other code than the one named. */
export const CODE_VARIABLES = new Set([
  "PATH",
  "BASH_ENV",
  "ENV",
  "LD_PRELOAD",
  "LD_LIBRARY_PATH",
  "LD_AUDIT",
  "PROMPT_COMMAND",
  "PS4",
  "SHELLOPTS",
  "BASHOPTS",
  "IFS",
]);

/** set options that change nothing the check relies on; any other is refused. */
export const SAFE_SET_LETTERS = "euxvfnC";
export const SAFE_SET_OPTIONS = new Set(["errexit", "nounset", "xtrace", "verbose", "noglob", "noexec", "noclobber", "pipefail"]);

export const DISK_DEVICE = /^\/dev\/(sd|hd|vd|xvd|nvme|mmcblk|disk)/;
/** Device files a command may name even under the workspace restriction. */
export const HARMLESS_DEVICES = new Set([
  "/dev/null",
  "/dev/zero",
  "/dev/random",
  "/dev/urandom",
  "/dev/stdin",
  "/dev/stdout",
  "/dev/stderr",
  "/dev/tty",
]);

/**
 * The original deny-list, applied to a command whatever wrapper or nesting it came in: why
 * `program` with `args` is refused, or undefined.
 */
export function denyReason(program: string, args: Arg[]): string | undefined {
  const values = args.map((arg) => arg.value);
  if (program === "rm") {
    const end = values.indexOf("--");
    const options = end >= 0 ? args.slice(0, end) : args;
    if (options.some((arg) => arg.value === undefined)) {
      return "an argument of rm decided at run time could be -rf; put -- before it";
    }
    const recursive = options.some((arg) => /^-[^-]*[rR]/.test(arg.value!) || arg.value === "--recursive");
    const force = options.some((arg) => /^-[^-]*f/.test(arg.value!) || arg.value === "--force");
    if (recursive && force) return "rm with -r and -f is on the deny-list";
  }
  if (program.startsWith("mkfs") || program === "mke2fs" || program === "format" || program === "diskpart") {
    return `${program} formats disks and is on the deny-list`;
  }
  if (program === "dd") {
    if (values.some((v) => v === undefined)) return "an argument of dd decided at run time could be if=";
    if (values.some((v) => v!.startsWith("if="))) return "dd if= is on the deny-list";
  }
  if (["shutdown", "reboot", "poweroff", "halt"].includes(program)) return `${program} is on the deny-list`;
  if (program === "systemctl" && values.some((v) => ["poweroff", "reboot", "halt", "kexec"].includes(v ?? ""))) {
    return "systemctl poweroff/reboot/halt is on the deny-list";
  }
  if ((program === "init" || program === "telinit") && values.some((v) => v === undefined || v === "0" || v === "6")) {
    return `${program} 0/6 is on the deny-list`;
  }
  for (const value of values) {
    const target = value?.slice(value.indexOf("=") + 1);
    if (target !== undefined && DISK_DEVICE.test(target)) return `${value} names a disk device; writing to disks is on the deny-list`;
  }
  return undefined;
}

/** Index of the first operand after the options a program reads (and their values). */
export function skipOptions(args: Arg[], valueOptions: string[]): number {
  let i = 0;
  for (; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined || value === "-" || !value.startsWith("-")) return i;
    if (value === "--") return i + 1;
    if (value.startsWith("--")) {
      // getopt_long takes any unambiguous prefix: `timeout --sig KILL 5 rm` is `--signal KILL`.
      if (!value.includes("=") && value.length > 3 && valueOptions.some((option) => option.startsWith("--") && option.startsWith(value)))
        i++;
      continue;
    }
    for (let k = 1; k < value.length; k++) {
      if (valueOptions.includes(`-${value[k]}`)) {
        if (k === value.length - 1) i++;
        break;
      }
    }
  }
  return i;
}

/**
 * Index of env's command: options read as GNU env reads them, grouped letters (`-iS'…'`) and long
 * prefixes (`--split`) included; or why env is refused: for -S and an option env does not have.
 */
export function envCommandStart(args: Arg[]): number | { refuse: string } {
  const longs = [
    "--ignore-environment",
    "--null",
    "--unset",
    "--chdir",
    "--split-string",
    "--block-signal",
    "--default-signal",
    "--ignore-signal",
    "--list-signal-handling",
    "--debug",
  ];
  let i = 0;
  for (; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined) return { refuse: "an option of env decided at run time could be -S, which splits a string into a command" };
    if (value === "-") continue;
    if (value === "--") return i + 1;
    if (!value.startsWith("-")) return i;
    if (value.startsWith("--")) {
      const written = value.split("=")[0]!;
      const matches = longs.filter((name) => name.startsWith(written));
      if (matches.length !== 1)
        return { refuse: `env ${written} is not an option env reads unambiguously, so what it runs cannot be checked` };
      if (matches[0] === "--split-string") return { refuse: "env -S splits a string into a command, which is not checked" };
      if ((matches[0] === "--unset" || matches[0] === "--chdir") && !value.includes("=")) i++;
      continue;
    }
    for (let k = 1; k < value.length; k++) {
      const letter = value[k]!;
      if (letter === "S") return { refuse: "env -S splits a string into a command, which is not checked" };
      if (letter === "u" || letter === "C") {
        if (k === value.length - 1) i++;
        break;
      }
      if (!"i0v".includes(letter)) return { refuse: `env -${letter} is not an option env reads, so what it runs cannot be checked` };
    }
  }
  return i;
}
