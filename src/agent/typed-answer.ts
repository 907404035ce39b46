import { checkOutput, type OutputSpec, type OutputVerdict } from "../jobs/output-schema.js";
import type { AnswerFormat } from "../providers/types.js";
import { plural } from "../text.js";

/** The tool or schema name the provider's structured-output request carries. */
export const ANSWER_NAME = "answer";

/**
 * How a message with typed output asks for its answer and checks it. The provider's structured
 * mode (`format`) where the preset has one and the schema's root is an object (both OpenAI's
 * json_schema and Anthropic's tool input must be objects); otherwise the schema goes into the
 * prompt (`instruction`). Either way the answer is checked here, never trusted.
 */
export class TypedAnswer {
  readonly format: AnswerFormat | undefined;
  readonly instruction: string | undefined;
  private repairsLeft: number;

  constructor(
    private readonly spec: OutputSpec,
    structuredOutput: boolean,
  ) {
    const native = structuredOutput && spec.schema.type === "object";
    this.format = native ? { name: ANSWER_NAME, schema: spec.schema } : undefined;
    this.instruction = native ? undefined : instructionFor(spec.schema);
    this.repairsLeft = spec.repair;
  }

  /** The message as the model is given it: with the schema appended when it is asked by instruction. */
  message(message: string): string {
    return this.instruction ? `${message}\n\n${this.instruction}` : message;
  }

  check(text: string): OutputVerdict {
    const parsed = parseAnswer(text);
    return "error" in parsed ? { ok: false, errors: [parsed.error] } : checkOutput(this.spec, parsed.value);
  }

  /** The request that shows the model its errors, or the failure once no repair is left. */
  repair(errors: string[]): { request: string } | { failure: InvalidOutput } {
    if (this.repairsLeft === 0) return { failure: new InvalidOutput(errors, this.spec.repair) };
    this.repairsLeft--;
    const list = errors.map((error) => `- ${error}`).join("\n");
    return {
      request: `Your answer is not valid against the required JSON Schema:\n${list}\nAnswer again with one JSON value that satisfies the schema, and nothing else.`,
    };
  }
}

/** The run's answer stayed invalid: its message lists each error at its JSON pointer, one a line. */
export class InvalidOutput extends Error {
  constructor(
    readonly errors: string[],
    repairs: number,
  ) {
    const after = repairs > 0 ? ` after ${plural(repairs, "repair request")}` : "";
    super(`the answer is not valid against output.schema${after}:\n${errors.join("\n")}`);
  }
}

function instructionFor(schema: Record<string, unknown>): string {
  return [
    "Give your final answer as one JSON value, with no other text around it, valid against this JSON Schema:",
    "```json",
    JSON.stringify(schema, null, 2),
    "```",
  ].join("\n");
}

/** The answer's JSON; a model asked by instruction often fences it as a code block, which is taken off. */
function parseAnswer(text: string): { value: unknown } | { error: string } {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n\s*```$/.exec(trimmed);
  const json = fenced ? fenced[1]! : trimmed;
  if (json === "") return { error: "at /: the answer is empty, expected one JSON value" };
  try {
    return { value: JSON.parse(json) };
  } catch (err) {
    return { error: `at /: not JSON: ${(err as Error).message}` };
  }
}
