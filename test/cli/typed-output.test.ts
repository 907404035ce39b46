import { mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { startAnthropicSSE } from "../support/anthropic-sse.js";
import { runCountd } from "../support/daemon-process.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const SCHEMA = `output:
  schema:
    type: object
    required: [count, items]
    properties:
      count: { type: integer }
      items:
        type: array
        items: { type: object, required: [id], properties: { id: { type: string } } }
`;

describe("typed output", () => {
  const mock = useAimock();
  let dir: string;
  let hook: WebhookReceiver;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "countd-typed-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    sandbox: none\n");
    hook = await startWebhookReceiver({ secret: SECRET });
  });
  afterEach(async () => {
    await hook.close();
  });

  const countd = (args: string[], env: Record<string, string> = {}) =>
    runCountd(args, {
      cwd: dir,
      env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-typed-test-key", ...env },
    });

  const job = (repair = 1) =>
    writeFile(
      join(dir, "jobs", "items.yaml"),
      `prompt: List the new items.\ntools: []\n${SCHEMA}  repair: ${repair}\ndeliver:\n  - webhook: { url: '${hook.url}', secret: '${SECRET}' }\n`,
    );

  it("repairs an invalid first answer on the second request and delivers the output as signed JSON", async () => {
    mock.onMessage("List the new items", { content: '{"count": "two", "items": [{"id": 7}]}' });
    mock.onMessage("not valid against the required JSON Schema", { content: '{"count": 2, "items": [{"id": "a"}, {"id": "b"}]}' });
    await job();
    const run = await countd(["run", "items"]);
    expect(run.code, run.stderr).toBe(0);
    // stdout is the valid answer alone, as JSON a script can pipe on: not the rejected attempt before it.
    expect(JSON.parse(run.stdout)).toEqual({ count: 2, items: [{ id: "a" }, { id: "b" }] });

    const requests = mock.getRequests();
    expect(requests).toHaveLength(2);
    const first = requests[0]!.body as Record<string, unknown>;
    expect(first.response_format).toMatchObject({ type: "json_schema", json_schema: { name: "answer", schema: { type: "object" } } });
    const repairRequest = JSON.stringify(requests[1]!.body);
    expect(repairRequest).toContain("at /count: must be integer");
    expect(repairRequest).toContain("at /items/0/id: must be string");

    expect(hook.requests).toHaveLength(1);
    expect(hook.requests[0]!.verified).toBe(true);
    const body = JSON.parse(hook.requests[0]!.body) as Record<string, unknown>;
    expect(body).toMatchObject({ type: "run.completed", job: "items", output: { count: 2, items: [{ id: "a" }, { id: "b" }] } });

    // countd show has the repair among the steps, and the output.
    const [record] = await (await StateStore.open(join(dir, "state"))).runs("items");
    const show = await countd(["show", record!.id, "--job", "items"]);
    expect(show.stdout).toContain("  repair asked: the answer is not valid against output.schema\n    at /count: must be integer\n");
    expect(show.stdout).toContain('Output\n  {\n    "count": 2,');
  });

  it("ends the run with status error and each error at its pointer when the answer stays invalid", async () => {
    mock.onMessage("List the new items", { content: '{"items": [{"id": 7}]}' });
    mock.onMessage("not valid against the required JSON Schema", { content: '{"items": [{"id": 8}]}' });
    await job(1);
    const run = await countd(["run", "items"]);
    expect(run.code).toBe(1);
    const [record] = await (await StateStore.open(join(dir, "state"))).runs("items");
    expect(record).toMatchObject({ status: "error" });
    expect(record!.error).toContain("the answer is not valid against output.schema after 1 repair request");
    expect(record!.error).toContain("at /: must have required property 'count'");
    expect(record!.error).toContain("at /items/0/id: must be string");
    expect(mock.getRequests()).toHaveLength(2);
    expect(hook.requests).toHaveLength(0);
  });

  it("sends only the output as the whole body with format: output, still signed", async () => {
    mock.onMessage("List the new items", { content: '{"count": 0, "items": []}' });
    await writeFile(
      join(dir, "jobs", "items.yaml"),
      `prompt: List the new items.\ntools: []\n${SCHEMA}deliver:\n  - webhook: { url: '${hook.url}', secret: '${SECRET}', format: output }\n`,
    );
    const run = await countd(["run", "items"]);
    expect(run.code, run.stderr).toBe(0);
    expect(hook.requests[0]!.verified).toBe(true);
    expect(JSON.parse(hook.requests[0]!.body)).toEqual({ count: 0, items: [] });
  });

  it("fills an email subject's {{output.…}} from the output", async () => {
    mock.onMessage("List the new items", { content: '{"count": 2, "items": [{"id": "a-1"}, {"id": "b-2"}]}' });
    await writeFile(
      join(dir, "jobs", "items.yaml"),
      `prompt: List the new items.\ntools: []\n${SCHEMA}deliver:\n  - email: { to: [ops@example.com], subject: "{{output.count}} new, first {{output.items.0.id}}{{output.missing}}" }\n`,
    );
    const run = await countd(["run", "items"]);
    expect(run.code, run.stderr).toBe(0);
    const [mail] = await readdir(join(dir, "state", "mail"));
    expect(await readFile(join(dir, "state", "mail", mail!), "utf8")).toMatch(/^Subject: 2 new, first a-1$/m);
  });

  it("asks Anthropic through a forced answer tool and takes its input as the answer", async () => {
    const anthropic = await startAnthropicSSE();
    try {
      const input = JSON.stringify({ count: 1, items: [{ id: "x" }] });
      anthropic.reply({
        sse: [
          {
            type: "message_start",
            message: {
              id: "m1",
              type: "message",
              role: "assistant",
              content: [],
              model: "claude-sonnet-5",
              usage: { input_tokens: 10, output_tokens: 0 },
            },
          },
          { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "answer", input: {} } },
          { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: input } },
          { type: "content_block_stop", index: 0 },
          { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 12 } },
          { type: "message_stop" },
        ],
      });
      await writeFile(join(dir, "countd.yaml"), "provider: { preset: anthropic }\ntools:\n  exec:\n    sandbox: none\n");
      await job();
      const run = await countd(["run", "items"], { ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: "sk-ant-test" });
      expect(run.code, run.stderr).toBe(0);
      expect(anthropic.bodies[0]).toMatchObject({
        tool_choice: { type: "tool", name: "answer" },
        tools: [{ name: "answer", input_schema: { type: "object", required: ["count", "items"] } }],
      });
      expect(JSON.parse(hook.requests[0]!.body)).toMatchObject({ output: { count: 1, items: [{ id: "x" }] } });
    } finally {
      await anthropic.close();
    }
  });

  it("asks by instruction where the preset has no json_schema mode, and takes a fenced answer", async () => {
    mock.onMessage("List the new items", { content: '```json\n{"count": 0, "items": []}\n```' });
    await writeFile(
      join(dir, "countd.yaml"),
      `provider: { preset: custom, base_url: "${mock.url}/v1", model: gpt-4o-mini }\ntools:\n  exec:\n    sandbox: none\n`,
    );
    await job();
    const run = await countd(["run", "items"]);
    expect(run.code, run.stderr).toBe(0);
    const body = mock.getRequests()[0]!.body as Record<string, unknown>;
    expect(body.response_format).toBeUndefined();
    expect(JSON.stringify(body.messages)).toContain("Give your final answer as one JSON value");
    expect(JSON.parse(hook.requests[0]!.body)).toMatchObject({ output: { count: 0, items: [] } });
  });

  it("refuses a schema that is not a valid JSON Schema at file:line:col", async () => {
    await writeFile(join(dir, "jobs", "bad.yaml"), "prompt: p\noutput:\n  schema:\n    type: objekt\n");
    const run = await countd(["validate"]);
    expect(run.code).toBe(1);
    expect(run.stdout + run.stderr).toMatch(/bad\.yaml:4:5: output\.schema: not a valid JSON Schema: .*type/);
  });
});
