import { getEventListeners } from "node:events";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AnthropicProvider } from "../../src/providers/anthropic.js";
import { OpenAIProvider } from "../../src/providers/openai.js";
import type { LLMProvider } from "../../src/providers/types.js";
import { StateStore } from "../../src/store/state.js";
import { useAimock } from "../support/aimock.js";
import { runCountd } from "../support/daemon-process.js";

/** One run makes many requests with one signal (the run's): the first 25 iterations' worth. */
const ITERATIONS = 25;

describe("a run's abort signal across many LLM requests", () => {
  const mock = useAimock();

  it.each([
    ["openai", () => new OpenAIProvider({ name: "aimock", baseURL: `${mock.url}/v1`, apiKey: "k" })],
    ["anthropic", () => new AnthropicProvider({ baseURL: mock.url, apiKey: "k" })],
  ] as Array<[string, () => LLMProvider]>)("%s: collects no abort listener per request", async (_name, make) => {
    mock.onMessage("hello", { content: "hi there" });
    const provider = make();
    const run = new AbortController();
    const before = getEventListeners(run.signal, "abort").length;
    const after: Array<[string, number]> = [];
    for (let i = 0; i < ITERATIONS; i++) {
      let text = "";
      for await (const event of provider.chatStream([{ role: "user", content: "hello" }], [], {
        model: "m",
        maxTokens: 100,
        temperature: 0,
        signal: run.signal,
      })) {
        if (event.type === "text") text += event.text;
      }
      after.push([text, getEventListeners(run.signal, "abort").length]);
    }
    expect(after).toEqual(Array.from({ length: ITERATIONS }, () => ["hi there", before]));
  });

  it("a cancelled run still cancels the request in flight", async () => {
    mock.onMessage("slow", { content: "one two three four five six seven eight nine ten" }, { latency: 200, chunkSize: 3 });
    const provider = new OpenAIProvider({ name: "aimock", baseURL: `${mock.url}/v1`, apiKey: "k" });
    const run = new AbortController();
    const seen: string[] = [];
    const drained = (async () => {
      for await (const event of provider.chatStream([{ role: "user", content: "slow" }], [], {
        model: "m",
        maxTokens: 100,
        temperature: 0,
        signal: run.signal,
      })) {
        if (event.type === "text") {
          seen.push(event.text);
          run.abort();
        }
      }
    })();
    await expect(drained).rejects.toMatchObject({ kind: "cancelled" });
    expect(seen.join("").length).toBeLessThan("one two three four five six seven eight nine ten".length);
    expect(getEventListeners(run.signal, "abort")).toEqual([]);
  });

  it(`countd run of a job taking ${ITERATIONS} iterations prints no MaxListenersExceededWarning`, async () => {
    for (let i = 0; i < ITERATIONS - 1; i++) {
      mock.on(
        { userMessage: "look around", sequenceIndex: i },
        { toolCalls: [{ name: "list_dir", arguments: JSON.stringify({ path: "." }) }] },
      );
    }
    mock.on({ userMessage: "look around", sequenceIndex: ITERATIONS - 1 }, { content: "Looked 24 times." });
    const dir = await mkdtemp(join(tmpdir(), "countd-iterations-"));
    await mkdir(join(dir, "jobs"));
    await writeFile(join(dir, "countd.yaml"), "tools:\n  exec:\n    enabled: false\n");
    // 24 identical list_dir calls on purpose: the breaker, which would end them at the third, is off.
    await writeFile(join(dir, "jobs", "looker.yaml"), "prompt: look around\ntools: [list_dir]\nbreaker: false\n");
    const run = await runCountd(["run", "looker"], {
      cwd: dir,
      env: { OPENAI_BASE_URL: `${mock.url}/v1`, OPENAI_API_KEY: "sk-iterations" },
    });
    expect(run.stdout).toBe("Looked 24 times.\n");
    expect(run.code).toBe(0);
    expect(mock.getRequests()).toHaveLength(ITERATIONS);
    expect(run.stderr).not.toContain("Warning");
    const [record] = await (await StateStore.open(join(dir, "state"))).runs("looker");
    // Besides the tool lines, stderr says only which run it was (the job has no deliveries).
    expect(run.stderr.split("\n").filter((line) => line !== "" && !line.startsWith("[tool] list_dir "))).toEqual([
      `countd: run ${record!.id} ok`,
    ]);
    expect(record).toMatchObject({ status: "ok", iterations: ITERATIONS, toolCalls: ITERATIONS - 1 });
  });
});
