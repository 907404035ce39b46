import { constants } from "node:fs";
import { mkdir, open, readlink, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname, join, relative, sep } from "node:path";
import { ToolRefusal } from "./paths.js";

/**
 * Opening what the guard checked, not whatever the name leads to by the time it is opened: any
 * concurrent writer (another run's exec, a background process) can swap a folder on the path for
 * a link out of the workspace between the check and the open, and O_NOFOLLOW covers only the last
 * component. So every descriptor is checked against the kernel's own account of it
 * (/proc/self/fd), and files and folders are created through a descriptor of their verified
 * parent folder (`/proc/self/fd/N/name`: Node has no openat), which no rename can redirect.
 */

const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;
// O_NONBLOCK: a pipe swapped in for the file must fail or open at once, never hang the call.
const BASE = O_NOFOLLOW | O_NONBLOCK;

function swapped(shown: string): ToolRefusal {
  return new ToolRefusal(
    `refused: ${shown} changed while it was being opened (a folder or link on its path was replaced); nothing was read or written through it`,
  );
}

/** What the descriptor really refers to: the kernel's answer, not the name that was opened. */
async function isAt(handle: FileHandle, real: string): Promise<boolean> {
  return (await readlink(`/proc/self/fd/${handle.fd}`).catch(() => "")) === real;
}

async function verified(handle: FileHandle, real: string, shown: string): Promise<FileHandle> {
  if (await isAt(handle, real)) return handle;
  await handle.close();
  throw swapped(shown);
}

/** The entry `name` of the folder the descriptor holds, wherever that folder is now. */
const entry = (dir: FileHandle, name: string): string => `/proc/self/fd/${dir.fd}/${name}`;

/** Opens `real`, a path the guard resolved, for reading. */
export async function openRead(real: string, shown: string): Promise<FileHandle> {
  return verified(await open(real, O_RDONLY | BASE), real, shown);
}

/** Opens the folder `real` for listing. */
export async function openFolder(real: string, shown: string): Promise<FileHandle> {
  return verified(await open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW), real, shown);
}

/** A path under an open folder's descriptor: reads through it stay in that folder. */
export function underFolder(folder: FileHandle, name = ""): string {
  return name === "" ? `/proc/self/fd/${folder.fd}` : entry(folder, name);
}

/**
 * Creates the missing folders on the way to `dir`, a real path inside `root` (also real), one at
 * a time, each inside the verified folder above it.
 */
export async function makeFolders(root: string, dir: string, shown: string): Promise<void> {
  let current = root;
  for (const name of relative(root, dir).split(sep).filter(Boolean)) {
    const parent = await openFolder(current, shown).catch((err: unknown) => {
      throw linkRefusal(err, shown);
    });
    try {
      await mkdir(entry(parent, name)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "EEXIST") throw err;
      });
    } finally {
      await parent.close();
    }
    current = join(current, name);
  }
}

export interface WriteOpen {
  handle: FileHandle;
  /** The file did not exist and was created by this open. */
  created: boolean;
}

/**
 * Opens the file `real` for writing (`edit`: reading too) through its verified parent folder,
 * creating it when `create` is set and it does not exist; nothing is truncated here, so a
 * refused open changes nothing.
 */
export async function openWrite(
  real: string,
  shown: string,
  opts: { create: boolean; append?: boolean; edit?: boolean },
): Promise<WriteOpen> {
  const parent = await openFolder(dirname(real), shown).catch((err: unknown) => {
    throw linkRefusal(err, shown);
  });
  try {
    const mode = (opts.edit ? O_RDWR : O_WRONLY) | (opts.append ? constants.O_APPEND : 0) | BASE;
    const name = entry(parent, basename(real));
    let handle: FileHandle;
    let created = false;
    try {
      handle = await open(name, mode);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || !opts.create) throw err;
      handle = await open(name, mode | O_CREAT | O_EXCL, 0o666);
      created = true;
    }
    if (await isAt(handle, real)) return { handle, created };
    // Only a file this call created is removed: it was planted where it must not be.
    if (created) await unlink(await readlink(`/proc/self/fd/${handle.fd}`)).catch(() => {});
    await handle.close();
    throw swapped(shown);
  } finally {
    await parent.close();
  }
}

/** A folder on the way that is a link now (O_NOFOLLOW refused it) was swapped in after the check. */
function linkRefusal(err: unknown, shown: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ELOOP" || code === "ENOTDIR" ? swapped(shown) : err;
}
