import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { jobJsonSchema } from "../../src/jobs/schema.js";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

describe("schema/job.schema.json", () => {
  it("is what `npm run schema` generates from the zod schema today", async () => {
    const committed = await readFile(path.join(REPO_ROOT, "schema", "job.schema.json"), "utf8");
    expect(committed, "schema/job.schema.json is stale: run `npm run schema`").toBe(jobJsonSchema());
  });

  it("gives editors a titled draft-07 schema with a description and the default of each field", () => {
    const schema = JSON.parse(jobJsonSchema()) as {
      $schema: string;
      title: string;
      required: string[];
      additionalProperties: boolean;
      properties: Record<string, { description?: string; default?: unknown }>;
    };
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
    expect(schema.title).toBe("countd job");
    expect(schema.required).toEqual(["prompt"]);
    expect(schema.additionalProperties).toBe(false);
    const undescribed = Object.entries(schema.properties)
      .filter(([, field]) => !field.description)
      .map(([key]) => key);
    expect(undescribed).toEqual([]);
    expect(schema.properties.timeout?.default).toBe("10m");
    expect(schema.properties.overlap?.default).toBe("skip");
    expect(schema.properties.catch_up?.default).toBe("1h");
    expect(schema.properties.enabled?.default).toBe(true);
  });
});
