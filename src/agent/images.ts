import { readFile, stat } from "node:fs/promises";
import { resolve } from "node:path";
import type { ContentPart } from "../providers/types.js";

/** Providers reject larger images (Anthropic and OpenAI cap around 20 MB), so fail before the call. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

const SUPPORTED = "PNG, JPEG, GIF, WebP";

function mimeType(bytes: Buffer): string | undefined {
  const ascii = (start: number, end: number): string => bytes.toString("latin1", start, end);
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return "image/png";
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "image/jpeg";
  if (ascii(0, 6) === "GIF87a" || ascii(0, 6) === "GIF89a") return "image/gif";
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return "image/webp";
  return undefined;
}

function unreadable(path: string, file: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  const why = code === "ENOENT" ? "file not found" : code === "EACCES" || code === "EPERM" ? "permission denied" : (err as Error).message;
  return new Error(`image ${path}: cannot read ${file}: ${why}`);
}

async function loadImage(path: string, cwd: string): Promise<ContentPart> {
  const file = resolve(cwd, path);
  const info = await stat(file).catch((err: unknown) => {
    throw unreadable(path, file, err);
  });
  if (!info.isFile()) throw new Error(`image ${path}: ${file} is not a regular file`);
  if (info.size > MAX_IMAGE_BYTES) {
    throw new Error(`image ${path}: ${info.size} bytes is over the ${MAX_IMAGE_BYTES}-byte (20 MB) limit`);
  }
  const bytes = await readFile(file).catch((err: unknown) => {
    throw unreadable(path, file, err);
  });
  const mime = mimeType(bytes);
  if (!mime) throw new Error(`image ${path}: not a supported image type (supported: ${SUPPORTED})`);
  return { type: "image_url", image_url: { url: `data:${mime};base64,${bytes.toString("base64")}` } };
}

/** Reads image files into data-URL content parts, in the given order; relative paths resolve against cwd. */
export function loadImages(paths: string[], cwd: string = process.cwd()): Promise<ContentPart[]> {
  return Promise.all(paths.map((p) => loadImage(p, cwd)));
}
