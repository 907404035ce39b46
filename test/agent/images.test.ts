import { mkdir, mkdtemp, open, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { loadImages, MAX_IMAGE_BYTES } from "../../src/agent/images.js";

const PNG_1x1 = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0xff, 0xd9]);
const GIF = Buffer.concat([Buffer.from("GIF89a", "latin1"), Buffer.from([1, 0, 1, 0, 0, 0, 0, 0x3b])]);
const WEBP = Buffer.concat([
  Buffer.from("RIFF", "latin1"),
  Buffer.from([0x1a, 0, 0, 0]),
  Buffer.from("WEBPVP8 ", "latin1"),
  Buffer.alloc(14),
]);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "countd-images-"));
});

describe("loadImages", () => {
  it("turns png, jpeg, gif and webp files into data-URL parts in the given order", async () => {
    const files: Array<[string, Buffer, string]> = [
      ["b.webp", WEBP, "image/webp"],
      ["a.png", PNG_1x1, "image/png"],
      ["photo.jpg", JPEG, "image/jpeg"],
      ["anim.gif", GIF, "image/gif"],
    ];
    for (const [name, bytes] of files) await writeFile(join(dir, name), bytes);

    const parts = await loadImages(files.map(([name]) => join(dir, name)));
    expect(parts).toEqual(
      files.map(([, bytes, mime]) => ({ type: "image_url", image_url: { url: `data:${mime};base64,${bytes.toString("base64")}` } })),
    );
  });

  it("detects the type from the bytes, not the file name", async () => {
    await writeFile(join(dir, "really-a-png.jpg"), PNG_1x1);
    const [part] = await loadImages(["really-a-png.jpg"], dir);
    expect(part).toMatchObject({ type: "image_url", image_url: { url: expect.stringMatching(/^data:image\/png;base64,/) } });
  });

  it("rejects an unknown type, naming the file and the supported types", async () => {
    await writeFile(join(dir, "notes.png"), "just text, not an image");
    await expect(loadImages([join(dir, "notes.png")])).rejects.toThrow(
      `image ${join(dir, "notes.png")}: not a supported image type (supported: PNG, JPEG, GIF, WebP)`,
    );
  });

  it("rejects a missing file, naming it", async () => {
    await writeFile(join(dir, "ok.png"), PNG_1x1);
    await expect(loadImages(["ok.png", "missing.png"], dir)).rejects.toThrow(
      `image missing.png: cannot read ${join(dir, "missing.png")}: file not found`,
    );
  });

  it("rejects a directory given as an image", async () => {
    await mkdir(join(dir, "folder.png"));
    await expect(loadImages(["folder.png"], dir)).rejects.toThrow(`image folder.png: ${join(dir, "folder.png")} is not a regular file`);
  });

  it("rejects a file over 20 MB before reading it", async () => {
    const big = join(dir, "huge.png");
    await writeFile(big, PNG_1x1);
    const handle = await open(big, "r+");
    await handle.truncate(MAX_IMAGE_BYTES + 1);
    await handle.close();
    await expect(loadImages([big])).rejects.toThrow(
      `image ${big}: ${MAX_IMAGE_BYTES + 1} bytes is over the ${MAX_IMAGE_BYTES}-byte (20 MB) limit`,
    );
  });

  it("accepts a file of exactly 20 MB", async () => {
    const edge = join(dir, "edge.png");
    await writeFile(edge, PNG_1x1);
    const handle = await open(edge, "r+");
    await handle.truncate(MAX_IMAGE_BYTES);
    await handle.close();
    const [part] = await loadImages([edge]);
    expect(part).toMatchObject({ image_url: { url: expect.stringMatching(/^data:image\/png;base64,iVBOR/) } });
  });
});
