import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openBackend, withBackend } from "../../src/backend/open.js";
import { clusterApprovalKey, RedisApprovals } from "../../src/cluster/approvals.js";
import { loadConfig } from "../../src/config/load.js";
import { approval, approvalStoreCases, suspendedRun, yesterday } from "../support/approval-store-cases.js";
import { nodeFolder } from "../support/cluster-nodes.js";
import { hasSystemPackage } from "../support/system-package.js";
import { useRedis } from "../support/use-redis.js";

const hasRedis = await hasSystemPackage("redis-server", import.meta.filename);

const DAY = 86_400_000;

describe.skipIf(!hasRedis)("the cluster's approvals in Redis", () => {
  const redis = useRedis();
  afterEach(async () => {
    await (await redis.connect()).flushdb();
  });

  // Each store on a connection of its own, as each node has.
  approvalStoreCases({
    open: async (opts) => new RedisApprovals(await redis.connect(), opts),
    damage: async (id, askedAt, text) => {
      const client = await redis.connect();
      await client.multi().set(`countd:approval:${id}`, text).zadd("countd:approvals", Date.parse(askedAt), id).exec();
      return `countd:approval:${id}`;
    },
    where: "key",
  });

  it("treats an id that names another key, such as an approval's run, as unknown", async () => {
    const store = new RedisApprovals(await redis.connect());
    const a = approval(yesterday(9));
    await store.add(a, suspendedRun(a));
    expect(await store.get(`${a.id}:run`)).toBeUndefined();
    expect(await store.answer(`${a.id}:run`, "approve", { via: "cli", by: "alice" }, new Date())).toEqual({ ok: false, why: "unknown" });
    expect(await store.resumed(`${a.id}:answer`)).toBe(false);
  });

  it("lets an answered approval, its answer and its run expire 30 days after the answer; a waiting one stays", async () => {
    const client = await redis.connect();
    const store = new RedisApprovals(client);
    const [answered, waiting] = [approval(yesterday(9)), approval(yesterday(9))];
    for (const a of [answered, waiting]) await store.add(a, suspendedRun(a));
    const at = Date.now() - 2 * DAY;
    await store.answer(answered.id, "deny", { via: "cli", by: "alice" }, new Date(at));

    for (const key of ["", ":answer", ":run"]) {
      expect(await client.pexpiretime(`countd:approval:${answered.id}${key}`)).toBe(at + 30 * DAY);
      expect(await client.pttl(`countd:approval:${waiting.id}${key}`)).toBeLessThan(0);
    }
    expect(await client.pttl("countd:approvals")).toBe(-1);
  });

  it("signs links with one key on every node: made once, read by every connection", async () => {
    const [one, two] = [await redis.connect(), await redis.connect()];
    const [first, second] = await Promise.all([clusterApprovalKey(one), clusterApprovalKey(two)]);
    expect(first).toHaveLength(32);
    expect(second).toEqual(first);
    expect(await clusterApprovalKey(await redis.connect())).toEqual(first);
    expect(await one.pttl("countd:approval-key")).toBe(-1);
  });

  it("refuses a signing key in Redis that is not 32 bytes, naming the key", async () => {
    await (await redis.connect()).set("countd:approval-key", "short");
    await expect(clusterApprovalKey(await redis.connect())).rejects.toThrow(/countd:approval-key holds no approval key/);
  });

  it("is what countd.yaml's cluster gives commands and daemons: an approval a daemon added is answered by a command on another node", async () => {
    const configOf = async (node: string) => loadConfig({ file: join(await nodeFolder(redis.url, node, {}), "countd.yaml"), needs: [] });
    const [n1, n2] = [await configOf("n1"), await configOf("n2")];
    const a = approval(yesterday(9));
    const daemon = await openBackend(n1, { role: "daemon" });
    const key1 = await (async () => {
      try {
        const { store, key } = await daemon.approvals();
        await store.add(a, suspendedRun(a));
        return key;
      } finally {
        await daemon.close();
      }
    })();
    await withBackend(n2, async (backend) => {
      const { store, key } = await backend.approvals();
      expect(key).toEqual(key1);
      expect(await store.answer(a.id, "approve", { via: "cli", by: "alice" }, new Date(yesterday(9.5)))).toMatchObject({ ok: true });
      expect(await store.suspended(a.id)).toEqual(suspendedRun(a));
      expect(await store.resumed(a.id)).toBe(true);
    });
  });
});
