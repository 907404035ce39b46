import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useAimock } from "../support/aimock.js";
import { consoleFolder, daemonsOf, raw, SLOW, startConsoleDaemon, writeJob, type ConsoleDaemon } from "../support/console-daemon.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/*
 * The console's Rehearse, Replay and Fork against a real daemon and the LLM simulator: each POST
 * answers an id at once, the work runs in the daemon, and what it would have sent is read back
 * through the files endpoint, with nothing sent.
 */

describe("the console's rehearsal API", { timeout: 60_000 }, () => {
  const mock = useAimock();
  const daemons = daemonsOf();
  let receiver: WebhookReceiver;
  let env: Record<string, string>;

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
    env = { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-rehearsal-api-test" };
  });
  afterEach(async () => {
    await daemons.cleanup();
    await receiver.close();
  });

  async function start(jobs: Record<string, string>): Promise<ConsoleDaemon> {
    const dir = await consoleFolder();
    for (const [name, yaml] of Object.entries(jobs)) await writeJob(dir, name, yaml);
    const started = await startConsoleDaemon(dir, env);
    daemons.started.push(started);
    return started;
  }

  const send = (d: ConsoleDaemon, path: string, body?: unknown) =>
    d.api(path, { method: "POST", ...(body !== undefined ? { body: JSON.stringify(body) } : {}) }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as any,
    }));

  /** The rehearsal's view once it has ended. */
  const ended = (d: ConsoleDaemon, id: string) =>
    vi.waitFor(async () => {
      const view = await d.get(`/api/rehearsals/${id}`);
      if (view.state !== "done") throw new Error(`still ${view.state}: ${JSON.stringify(view)}`);
      return view;
    }, SLOW);

  it("rehearses a disabled job from its name: the mail and webhook it would send are served, nothing is sent", async () => {
    mock.onMessage("Write the Monday digest", { content: "Digest: **three** things happened." });
    const d = await start({
      digest:
        "enabled: false\nprompt: Write the Monday digest for {{date}}.\n" +
        `deliver:\n  - email: { to: [team@example.com], subject: "Monday digest" }\n  - webhook: { url: "${receiver.url}" }\n`,
    });

    const started = await send(d, "/api/jobs/digest/rehearse", { at: "2026-12-07T09:00" });
    expect(started).toEqual({ status: 202, body: { id: expect.stringMatching(/^\d{8}T\d{6}Z-[0-9a-f]+$/) } });
    const id = started.body.id as string;
    const view = await ended(d, id);
    expect(view).toMatchObject({ state: "done", id, kind: "rehearsal", job: "digest", answer: "Digest: **three** things happened." });
    expect(view.run).toMatchObject({ job: "digest", reason: "rehearsal", status: "ok" });
    const mail = view.deliveries.find((delivery: any) => delivery.target === "email");
    expect(mail).toMatchObject({ to: "email to team@example.com", subject: "Monday digest" });
    const hook = view.deliveries.find((delivery: any) => delivery.target === "webhook");

    const eml = await d.api(`/api/rehearsals/${id}/files/${mail.files.find((f: string) => f.endsWith(".eml"))}`);
    expect(eml.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await eml.text()).toMatch(/^To: team@example\.com$/m);
    const page = await d.api(`/api/rehearsals/${id}/files/${mail.files.find((f: string) => f.endsWith(".html"))}`);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'; sandbox",
    );
    expect(await page.text()).toContain("<strong>three</strong>");
    const body = await d.api(`/api/rehearsals/${id}/files/${hook.files.find((f: string) => f.endsWith(".body"))}`);
    expect(await body.text()).toContain("three");
    expect(receiver.requests).toHaveLength(0);
    await expect(readdir(join(d.dir, "state", "mail"))).rejects.toThrow(/ENOENT/);

    // Nothing outside its deliveries is served, however the path is written.
    for (const path of ["rehearsal.json", "deliveries/..%2F..%2F..%2Fcountd.yaml", "deliveries/%2e%2e/rehearsal.json", "workspace/x"]) {
      const refused = await raw({
        port: d.port,
        path: `/api/rehearsals/${id}/files/${path}`,
        headers: { authorization: `Bearer ${d.token}` },
      });
      expect(refused.status, path).toBe(404);
      expect(refused.text).not.toContain("console:");
    }

    expect((await d.get("/api/rehearsals")).rehearsals).toEqual([
      { id, kind: "rehearsal", job: "digest", run: view.run.id, status: "ok", started: view.run.startedAt },
    ]);
    // The run page finds the rehearsal's run, though the job's history does not hold it.
    const run = await d.get(`/api/runs/${view.run.id}`);
    expect(run.run).toMatchObject({ id: view.run.id, reason: "rehearsal" });
    expect((await d.get("/api/runs?job=digest")).runs).toEqual([]);
  });

  it("refuses bad input naming the field and its value, and a change without the console's credential", async () => {
    const d = await start({ digest: "prompt: Write the digest.\n" });
    expect(await send(d, "/api/jobs/digest/rehearse", { at: "tomorrow" })).toEqual({
      status: 400,
      body: { error: expect.stringMatching(/^at "tomorrow" is not a time: give YYYY-MM-DDTHH:MM/) },
    });
    expect(await send(d, "/api/jobs/digest/rehearse", { files: "in/a.csv" })).toEqual({
      status: 400,
      body: { error: 'files must be a list of paths, got "in/a.csv"' },
    });
    expect(await send(d, "/api/jobs/digest/rehearse", { payload: 3 })).toEqual({
      status: 400,
      body: { error: "payload must be the webhook's body as text, got 3" },
    });
    expect(await send(d, "/api/jobs/digest/rehearse", { when: "now" })).toEqual({
      status: 400,
      body: { error: 'unknown field "when": give at, files, payload' },
    });
    expect(await send(d, "/api/runs/20261207T090000Z-abcd/replay", { recorded_only: "yes" })).toEqual({
      status: 400,
      body: { error: 'recorded_only must be true or false, got "yes"' },
    });
    expect((await send(d, "/api/jobs/nope/rehearse", {})).status).toBe(404);
    expect(await send(d, "/api/runs/20261207T090000Z-abcd/replay", {})).toEqual({
      status: 404,
      body: { error: expect.stringMatching(/^no journal of a run "20261207T090000Z-abcd"/) },
    });
    expect((await d.api("/api/rehearsals/20261207T090000Z-abcd")).status).toBe(404);

    // A POST without the token, and one with the browser's cookie but no CSRF proof, are refused before anything runs.
    const anonymous = await fetch(`${d.origin}/api/jobs/digest/rehearse`, { method: "POST", body: "{}" });
    expect(anonymous.status).toBe(401);
    const signIn = await fetch(`${d.origin}/?token=${encodeURIComponent(d.token)}`, { redirect: "manual" });
    const cookie = signIn.headers.get("set-cookie")!.split(";", 1)[0]!;
    for (const path of ["/api/jobs/digest/rehearse", "/api/runs/20261207T090000Z-abcd/replay"]) {
      const forged = await fetch(`${d.origin}${path}`, { method: "POST", headers: { cookie, origin: d.origin }, body: "{}" });
      expect(forged.status, path).toBe(403);
    }
    expect((await d.get("/api/rehearsals")).rehearsals).toEqual([]);
    expect(mock.getRequests()).toHaveLength(0);
  });

  it("replays a run with no LLM request and says it is identical; a fork with a new prompt shows the answer's diff", async () => {
    mock.onMessage("Write the digest", { content: "Two things happened.\nBoth went well." });
    mock.onMessage("Write it as a haiku", { content: "Two things happened.\nBoth went well, said the crow." });
    const d = await start({ digest: `prompt: Write the digest.\ndeliver:\n  - webhook: { url: "${receiver.url}" }\n` });
    const ran = await send(d, "/api/jobs/digest/run");
    expect(ran.status).toBe(202);
    const runId = ran.body.run_id as string;
    await vi.waitFor(async () => expect((await d.get(`/api/runs/${runId}`)).run.status).toBe("ok"), SLOW);
    await vi.waitFor(() => expect(receiver.requests).toHaveLength(1), SLOW);
    const requests = mock.getRequests().length;

    const replayed = await send(d, `/api/runs/${runId}/replay`, {});
    expect(replayed.status).toBe(202);
    const replay = await ended(d, replayed.body.id);
    expect(replay).toMatchObject({
      kind: "replay",
      job: "digest",
      replay: { kind: "replay", identical: true, of: { job: "digest", run: runId } },
    });
    expect(mock.getRequests()).toHaveLength(requests);

    const forked = await send(d, `/api/runs/${runId}/replay`, { prompt: "Write it as a haiku." });
    expect(forked.status).toBe(202);
    const fork = await ended(d, forked.body.id);
    expect(fork.replay).toMatchObject({
      kind: "fork",
      identical: false,
      answer: { original: "Two things happened.\nBoth went well.", replayed: "Two things happened.\nBoth went well, said the crow." },
    });
    expect(fork.replay.answer.diff).toContain("-Both went well.\n+Both went well, said the crow.");
    expect(receiver.requests).toHaveLength(1);

    const listed = (await d.get("/api/rehearsals")).rehearsals;
    expect(listed.map((item: any) => [item.id, item.kind, item.of])).toEqual([
      [fork.id, "fork", { job: "digest", run: runId }],
      [replay.id, "replay", { job: "digest", run: runId }],
    ]);
  });
});
