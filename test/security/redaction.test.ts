import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatCompletionRequest, FixtureResponse } from "@copilotkit/aimock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { allRuns, runCountd, spawnDaemon, type DaemonProcess } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { startDaemon } from "../support/cli-daemon.js";
import { mcpFolder } from "../mcp/support.js";

/*
 * The built daemon (dist/): a secret that reaches countd inside a provider's error, a file a tool
 * read, or the model's answer, is stored and sent nowhere, in none of its usual encodings.
 */

vi.setConfig({ testTimeout: 90_000 });
const SLOW = { timeout: 30_000, interval: 200 };

const PROVIDER_KEY = "sk-proj-quoted-in-the-401-body-4f9a";
const LISTED = "listed-secret-value-7c1e";
const HOOK_TOKEN = "hook-path-token-93b2d0";

/** Every form a secret must not be found in: as written, base64 (both alphabets) and hex. */
const forms = (secret: string): string[] => {
  const base64 = Buffer.from(secret).toString("base64");
  return [secret, base64, base64.replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_"), Buffer.from(secret).toString("hex")];
};

/** Every file under `dir`, as text: what a reader of the state directory finds. */
async function filesUnder(dir: string): Promise<Array<{ path: string; text: string }>> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return Promise.all(
    entries
      .filter((e) => e.isFile())
      .map(async (e) => ({ path: join(e.parentPath, e.name), text: await readFile(join(e.parentPath, e.name), "utf8") })),
  );
}

function expectNone(where: string, text: string, secrets: string[]): void {
  for (const secret of secrets) expect(text, `${where} carries ${secret}`).not.toContain(secret);
}

describe("secrets in what countd stores and sends", () => {
  const mock = useAimock();
  let dir: string;
  let daemon: DaemonProcess | undefined;
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-redaction-"));
    await mkdir(join(dir, "jobs"));
    await mkdir(join(dir, "workspace"));
    await writeFile(
      join(dir, "countd.yaml"),
      "provider:\n  attempts: 1\nrunner:\n  shutdown_grace: 1s\nsecrets: [LISTED]\njob_env: [HOOK_TOKEN]\ntools:\n  exec:\n    sandbox: none\n",
    );
    receiver = await startWebhookReceiver();
  });
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  const env = () => ({ OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: PROVIDER_KEY, LISTED, HOOK_TOKEN });
  const stop = async () => {
    daemon!.child.kill("SIGTERM");
    expect(await daemon!.exited, daemon!.output()).toBe(0);
  };
  const countd = (args: string[]) => runCountd(args, { cwd: dir, env: env() });

  it("keeps a provider key quoted in its 401 out of the failure alert, the run records, the outbox, the mail and countd history", async () => {
    mock.onMessage("break", {
      error: { message: `Incorrect API key provided: ${PROVIDER_KEY}.`, type: "invalid_request_error" },
      status: 401,
    });
    await writeFile(
      join(dir, "jobs", "broken.yaml"),
      [
        'schedule: "* * * * * *"',
        "prompt: break",
        "on_failure:",
        `  - webhook: { url: "${receiver.url}" }`,
        "  - email: { to: [ops@example.com] }",
        "",
      ].join("\n"),
    );
    daemon = spawnDaemon(dir, env());
    await receiver.waitFor(1);
    await vi.waitFor(async () => expect((await filesUnder(join(dir, "state", "mail"))).length).toBeGreaterThan(0), SLOW);
    await stop();

    const alert = JSON.parse(receiver.requests[0]!.body) as { error: string };
    expect(alert.error).toContain("Incorrect API key provided: [REDACTED]");
    expectNone("the on_failure webhook", receiver.requests[0]!.body, forms(PROVIDER_KEY));
    const runs = await allRuns(join(dir, "state"));
    expect(runs.some((run) => run.error?.includes("[REDACTED]"))).toBe(true);
    for (const file of await filesUnder(join(dir, "state"))) expectNone(file.path, file.text, forms(PROVIDER_KEY));
    const table = await countd(["history", "broken"]);
    const json = await countd(["history", "broken", "--json"]);
    expect(json.stdout).toContain("[REDACTED]");
    expectNone("countd history", table.stdout, forms(PROVIDER_KEY));
    expectNone("countd history --json", json.stdout, forms(PROVIDER_KEY));
  });

  it("redacts a secret a tool read, and its base64 and hex, in the session file, run records, outbox and delivered answer", async () => {
    const encoded = [...forms(LISTED), ...forms(HOOK_TOKEN)];
    await writeFile(join(dir, "workspace", "notes.txt"), `notes: ${encoded.join(" ")}\n`);
    mock.addFixture({
      match: { predicate: () => true },
      response: (request: ChatCompletionRequest): FixtureResponse =>
        request.messages.some((message) => message.role === "tool")
          ? { content: `The notes say ${encoded.join(", ")}; and the basic header is ${Buffer.from(`user:${LISTED}`).toString("base64")}` }
          : { toolCalls: [{ name: "read_file", arguments: JSON.stringify({ path: "notes.txt" }) }] },
    });
    await writeFile(
      join(dir, "jobs", "echo.yaml"),
      ["every: 1h", "prompt: read the notes", "deliver:", `  - webhook: { url: "${receiver.url}/\${HOOK_TOKEN}" }`, ""].join("\n"),
    );
    // Started first: a `countd run` retried while the daemon starts could run the job twice.
    daemon = await startDaemon(dir, env());
    expect((await countd(["run", "echo"])).code).toBe(0);
    await receiver.waitFor(1);
    await stop();

    const delivered = receiver.requests[0]!;
    // The target itself is sent as configured: the token is the path it was given.
    expect(delivered.url.endsWith(`/${HOOK_TOKEN}`)).toBe(true);
    expect(delivered.body).toContain("[REDACTED]");
    expectNone("the delivered answer", delivered.body, encoded);
    // Inside a longer base64 text (a Basic header's user:secret) the secret is found too.
    const decoded = [...delivered.body.matchAll(/[A-Za-z0-9+/_-]{8,}/g)].map((m) => Buffer.from(m[0], "base64").toString("latin1"));
    expectNone("the delivered answer, decoded", decoded.join(" "), [LISTED.slice(0, 10), HOOK_TOKEN.slice(0, 10)]);
    const sessions = await filesUnder(join(dir, "state", "sessions"));
    expect(sessions.length).toBeGreaterThan(0);
    for (const file of await filesUnder(join(dir, "state"))) expectNone(file.path, file.text, encoded);
    for (const file of await filesUnder(join(dir, "logs"))) expectNone(file.path, file.text, encoded);
    expectNone("countd history --json", (await countd(["history", "echo", "--json"])).stdout, encoded);
  });

  it("redacts a secret a receiver quotes in its refusal from the outbox journal and countd outbox", async () => {
    receiver.script({ status: 400, body: `unknown client credential ${LISTED}` });
    mock.onMessage("say fine", { content: "fine" });
    await writeFile(
      join(dir, "jobs", "refused.yaml"),
      ["every: 1h", "prompt: say fine", "deliver:", `  - webhook: { url: "${receiver.url}" }`, ""].join("\n"),
    );
    // Started first: a `countd run` retried while the daemon starts could run the job twice.
    daemon = await startDaemon(dir, env());
    expect((await countd(["run", "refused"])).code).toBe(0);
    await receiver.waitFor(1);
    const listed = async () => (await countd(["outbox"])).stdout;
    await vi.waitFor(async () => expect(await listed()).toContain("answered HTTP 400"), SLOW);
    await stop();
    expect(await listed()).toContain("unknown client credential [REDACTED]");
    expectNone("countd outbox", await listed(), forms(LISTED));
    for (const file of await filesUnder(join(dir, "state"))) expectNone(file.path, file.text, forms(LISTED));
  });
});

describe("countd mcp", () => {
  it("shows a server's secret quoted in its stderr redacted", async () => {
    const secret = "notes-token-quoted-on-stderr-51ad";
    const script = "process.stderr.write('auth failed for token ' + process.env.NOTES_TOKEN + '\\n'); process.exit(3)";
    const dir = await mcpFolder({
      notes: { command: process.execPath, args: ["-e", script], env: { NOTES_TOKEN: "${NOTES_TOKEN}" }, connect_timeout: "60s" },
    });
    const run = await runCountd(["mcp"], { cwd: dir, env: { NOTES_TOKEN: secret } });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("auth failed for token [REDACTED]");
    expectNone("countd mcp", run.stdout + run.stderr, forms(secret));
  });
});
