import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/errors.js";
import { loadConfig } from "../../src/config/load.js";
import type { Config } from "../../src/config/schema.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "countd-cluster-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(text: string, env: NodeJS.ProcessEnv = {}): Promise<Config> {
  await writeFile(path.join(dir, "countd.yaml"), text);
  return loadConfig({ cwd: dir, env });
}

async function problems(text: string): Promise<readonly string[]> {
  const err = await load(text).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).problems;
}

describe("countd.yaml cluster:", () => {
  it("is absent by default: the daemon runs alone", async () => {
    expect((await load("")).cluster).toBeUndefined();
    expect((await load("cluster:\n")).cluster).toBeUndefined();
  });

  it("names Redis and this node, the host name by default", async () => {
    expect((await load("cluster:\n  redis: redis://127.0.0.1:6379/0\n")).cluster).toEqual({
      redis: "redis://127.0.0.1:6379/0",
      node: hostname(),
      hold: 20_000,
    });
    expect((await load("cluster: { redis: 'rediss://redis.example.com:6380', node: web-1 }\n")).cluster).toEqual({
      redis: "rediss://redis.example.com:6380",
      node: "web-1",
      hold: 20_000,
    });
  });

  it("holds a fire or delivery a daemon took 20 s unless renewed; cluster.hold sets it, not below 2 s", async () => {
    expect((await load("cluster:\n  redis: redis://127.0.0.1\n  hold: 4s\n")).cluster?.hold).toBe(4_000);
    expect(await problems("cluster:\n  redis: redis://127.0.0.1\n  hold: 1500ms\n")).toEqual([
      'countd.yaml:3:9: cluster.hold: expected a hold of at least 2s, like "20s", got 1500 ms',
    ]);
    expect(await problems("cluster:\n  redis: redis://127.0.0.1\n  hold: soon\n")).toEqual([
      'countd.yaml:3:9: cluster.hold: expected a positive duration like "30s", "10m", "500ms" or a number of seconds, got "soon"',
    ]);
  });

  it("takes the URL from the environment, and its password is a secret", async () => {
    const config = await load("cluster:\n  redis: ${REDIS_URL}\n", { REDIS_URL: "redis://countd:s3cret%21pw@10.0.0.5:6379/2" });
    expect(config.cluster?.redis).toBe("redis://countd:s3cret%21pw@10.0.0.5:6379/2");
    expect(config.secrets).toEqual(expect.arrayContaining(["s3cret%21pw", "s3cret!pw"]));
    // Over redis:// the user name is no secret: "countd" would be blanked out of every log line.
    expect(config.secrets).not.toContain("countd");
  });

  it("treats the user name of a rediss:// URL as a secret too", async () => {
    const config = await load("cluster:\n  redis: rediss://tok-user-9f:tok-pass-7e@cache.example.com:6380\n");
    expect(config.secrets).toEqual(expect.arrayContaining(["tok-user-9f", "tok-pass-7e"]));
  });

  it("reports a wrong URL or node name at file:line:col", async () => {
    expect(await problems("cluster:\n  redis: http://127.0.0.1:6379\n  node: web 1\n")).toEqual([
      'countd.yaml:2:10: cluster.redis: expected a Redis URL like "redis://127.0.0.1:6379/0" (or rediss:// for TLS), got "http://127.0.0.1:6379"',
      'countd.yaml:3:9: cluster.node: expected a node name of letters, digits, . _ - (like a host name), got "web 1"',
    ]);
    expect(await problems("cluster:\n  node: web-1\n")).toEqual([
      expect.stringMatching(/^countd\.yaml:2:3: cluster\.redis: expected a Redis URL .*, got nothing$/),
    ]);
    expect(await problems("cluster:\n  redis: redis://127.0.0.1\n  nodes: 3\n")).toEqual([
      expect.stringMatching(/^countd\.yaml:3:3: cluster\.nodes: unknown key/),
    ]);
  });
});
