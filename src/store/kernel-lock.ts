import { createHash } from "node:crypto";
import { connect, createServer, type Server } from "node:net";

/** How long a holder has to say its pid; a daemon whose event loop is stuck may never answer. */
const ASK_TIMEOUT_MS = 2_000;

export type KernelLock = { held: true; release: () => Promise<void> } | { held: false; holderPid: number | undefined };

/**
 * The lock that decides which process owns a state directory: a Unix socket in Linux's abstract
 * namespace, named after the directory's real path. The kernel lets one process at a time bind a
 * name and frees it when that process exits, however it exits, so unlike a file it cannot be left
 * stale by a crash nor be removed by hand while its owner runs. It is shared by the processes of
 * one network namespace (one machine, outside containers). A process that finds the name taken
 * connects and reads the holder's pid, for the refusal message.
 */
export async function takeKernelLock(realStateDir: string, pid: number): Promise<KernelLock> {
  const name = `\0countd-state-${createHash("sha256").update(realStateDir).digest("hex").slice(0, 40)}`;
  const server = createServer((socket) => socket.end(`${pid}\n`));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(name, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    return { held: false, holderPid: await askHolder(name) };
  }
  // The lock must not keep a process alive that is otherwise done.
  server.unref();
  return { held: true, release: () => close(server) };
}

function askHolder(name: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    let answer = "";
    const socket = connect(name);
    socket.setTimeout(ASK_TIMEOUT_MS, () => socket.destroy());
    socket.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
    socket.on("error", () => {});
    socket.on("close", () => {
      const holder = Number.parseInt(answer, 10);
      resolve(holder > 0 ? holder : undefined);
    });
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
