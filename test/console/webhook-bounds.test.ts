import { readFile, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { countdFolder, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";
import { logLines } from "../support/daemon-process.js";

/*
 * Requests to POST /hooks/<job> from senders without the secret, against a real daemon process on
 * loopback: what they can make it hold before the signature is checked, and for how long.
 */

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MB = 1024 * 1024;

describe("webhook requests before their signature is checked", { timeout: 90_000 }, () => {
  // The signed request starts a run: its LLM is on loopback, where it answers at once.
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    sockets.splice(0).forEach((socket) => socket.destroy());
    await stopDaemon(daemon);
    daemon = undefined;
  });

  async function start(): Promise<number> {
    const dir = await countdFolder({
      orders: "webhook:\n  secret: ${ORDERS_HOOK}\nprompt: handle {{payload}}\n",
      exports: "webhook:\n  secret: ${ORDERS_HOOK}\n  max_body: 20MB\nprompt: import {{payload}}\n",
    });
    const yaml = await readFile(join(dir, "countd.yaml"), "utf8");
    await writeFile(join(dir, "countd.yaml"), `${yaml}job_env: [ORDERS_HOOK]\nsecrets: [ORDERS_HOOK]\n`);
    daemon = await startDaemon(dir, { ORDERS_HOOK: SECRET, ...llmEnv(`${mock.url}/v1`) });
    const url = logLines(daemon.output()).find((line) => typeof line["url"] === "string")!["url"] as string;
    return Number(new URL(url).port);
  }

  /** A forged request's head: headers that pass every check made before the body is read. */
  const head = (port: number, length: number) =>
    [
      "POST /hooks/orders HTTP/1.1",
      `Host: 127.0.0.1:${port}`,
      "Content-Type: application/json",
      `Content-Length: ${length}`,
      "webhook-id: msg_forged",
      `webhook-timestamp: ${Math.floor(Date.now() / 1000)}`,
      `webhook-signature: v1,${"A".repeat(44)}`,
      "",
      "",
    ].join("\r\n");

  /** A raw connection whose answer's text grows in `answer()`; `closedAt` is set when the daemon closes it. */
  function open(port: number) {
    const socket = connect(port, "127.0.0.1");
    sockets.push(socket);
    let answer = "";
    const state = { answer: () => answer, closedAt: 0, socket };
    socket.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
    socket.on("error", () => {});
    socket.on("close", () => (state.closedAt = Date.now()));
    return state;
  }

  const rssOf = async (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

  it("holds at most 16 MB of unchecked bodies however many senders there are, and answers the rest 503 with Retry-After", async () => {
    const port = await start();
    const pid = daemon!.child.pid!;
    const before = await rssOf(pid);
    // 300 senders each send all but the last byte of a 1 MB body (the job's max_body), and wait.
    const body = Buffer.alloc(MB - 1, "x");
    const senders = Array.from({ length: 300 }, () => {
      const sender = open(port);
      sender.socket.write(head(port, MB));
      sender.socket.write(body);
      return sender;
    });
    let peak = before;
    await vi.waitFor(
      async () => {
        peak = Math.max(peak, await rssOf(pid));
        expect(senders.filter((s) => s.answer().startsWith("HTTP/1.1 503")).length).toBeGreaterThanOrEqual(280);
      },
      { timeout: 30_000, interval: 250 },
    );
    for (let i = 0; i < 8; i++) {
      peak = Math.max(peak, await rssOf(pid));
      await new Promise((done) => setTimeout(done, 250));
    }
    const busy = senders.find((s) => s.answer().startsWith("HTTP/1.1 503"))!.answer();
    expect(busy).toMatch(/\r\nretry-after: 10\r\n/i);
    expect(busy).toContain('{"error":"busy: countd holds 16MB of webhook bodies not yet checked; retry later"}');
    expect(peak - before).toBeLessThan(100 * MB);
  });

  it("cuts a request whose body trickles in after 30 s with 408", async () => {
    const port = await start();
    const sender = open(port);
    const startedAt = Date.now();
    sender.socket.write(head(port, 1_000));
    const trickle = setInterval(() => sender.socket.write("x"), 500);
    try {
      await vi.waitFor(() => expect(sender.closedAt).toBeGreaterThan(0), { timeout: 40_000, interval: 200 });
    } finally {
      clearInterval(trickle);
    }
    expect(sender.answer()).toMatch(/^HTTP\/1\.1 408 /);
    expect(sender.closedAt - startedAt).toBeGreaterThanOrEqual(29_000);
    expect(sender.closedAt - startedAt).toBeLessThan(36_000);
  });

  it("still takes a signed body larger than the total when it is the only one being read", async () => {
    mock.onMessage("import", { content: "imported" });
    const port = await start();
    const body = JSON.stringify({ rows: "r".repeat(17 * MB) });
    const id = "msg_large_export";
    const at = new Date();
    const answer = await fetch(`http://127.0.0.1:${port}/hooks/exports`, {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
        "webhook-signature": new Webhook(SECRET).sign(id, at, body),
      },
    });
    expect({ status: answer.status, body: await answer.json() }).toMatchObject({ status: 202, body: { status: "started" } });
  });
});
