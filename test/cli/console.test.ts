import { rm } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { StatusView } from "../../src/console/protocol.js";
import { useAimock } from "../support/aimock.js";
import { countdFolder, countdIn, llmEnv, startDaemon, stopDaemon, type DaemonProcess } from "../support/cli-daemon.js";

/** One GET as a browser or a script sends it, redirects not followed. */
function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    })
      .on("error", reject)
      .end();
  });
}

// Every step is a countd process of its own, as a user runs it: slow on a loaded machine.
describe("countd console", { timeout: 90_000 }, () => {
  const mock = useAimock();
  let daemon: DaemonProcess | undefined;
  afterEach(async () => {
    await stopDaemon(daemon);
    daemon = undefined;
  });

  it("prints the sign-in address as one line: it signs a browser in, and its token opens the API", async () => {
    const dir = await countdFolder({ weekly: "prompt: weekly\n" });
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    expect(await countd(["console"])).toMatchObject({
      code: 3,
      stdout: "",
      stderr: expect.stringMatching(
        /^countd: countd is not running with the state directory .*: the daemon serves the console \(countd start\)\n$/,
      ),
    });

    daemon = await startDaemon(dir, env);
    const shown = await countd(["console"]);
    expect(shown).toMatchObject({ code: 0, stderr: "" });
    expect(shown.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{20,}\n$/);
    const address = shown.stdout.trim();
    const token = new URL(address).searchParams.get("token")!;

    const signIn = await get(address);
    expect(signIn.status).toBe(303);
    expect(signIn.headers["location"]).toBe("/");
    expect(String(signIn.headers["set-cookie"])).toMatch(/HttpOnly; SameSite=Strict/);
    const api = new URL("/api/status", address).href;
    const status = await get(api, { authorization: `Bearer ${token}` });
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body) as StatusView).toMatchObject({ up: true, pid: daemon.child.pid });
    expect((await get(api)).status).toBe(401);
  });

  it("with the socket gone, the commands reach the daemon through the console's address and token", async () => {
    mock.onMessage("weekly", { content: "Through the console." });
    const dir = await countdFolder({ weekly: "prompt: weekly\n" });
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    daemon = await startDaemon(dir, env);
    await rm(join(dir, "state", "countd.sock"));

    const status = await countd(["status"]);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^version: /m);
    // The live stream over TCP too: the answer is streamed from the daemon's run.
    expect(await countd(["run", "weekly"])).toMatchObject({ code: 0, stdout: "Through the console.\n" });
  });

  it("with console.enabled: false there is no address to print (exit 3), and the control socket still serves the commands", async () => {
    mock.onMessage("weekly", { content: "Through the socket." });
    const dir = await countdFolder({ weekly: "prompt: weekly\n" }, "{ enabled: false }");
    const env = llmEnv(`${mock.url}/v1`);
    const countd = countdIn(dir, env);
    expect(await countd(["console"])).toMatchObject({
      code: 3,
      stdout: "",
      stderr: "countd: the console is switched off (console.enabled: false): set it to true and restart countd to serve it\n",
    });
    daemon = await startDaemon(dir, env);
    expect(await countd(["console"])).toMatchObject({ code: 3, stdout: "", stderr: expect.stringContaining("console.enabled: false") });
    expect((await countd(["status"])).code).toBe(0);
    expect(await countd(["run", "weekly"])).toMatchObject({ code: 0, stdout: "Through the socket.\n" });
  });
});
