import * as z from "zod";
import { runRecordShape, usageShape } from "../store/run-history.js";
import { RUN_STATUSES } from "../store/run-record.js";

/*
 * A live message as another node passes it on, checked field by field against what the live hub
 * and the console read of it (console/protocol.ts's LiveMessage): anyone who can publish on the
 * cluster's channel can send anything, and one message the hub cannot read must not break
 * `/api/status` on every node.
 */

const ofRun = { run_id: z.string().min(1), job: z.string().min(1), node: z.string().optional() };
const count = z.number().int().nonnegative();

export const liveMessageShape = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("run_started"), ...ofRun, run: runRecordShape }),
  z.looseObject({ type: z.literal("iteration"), ...ofRun, iteration: count }),
  z.looseObject({ type: z.literal("stream"), ...ofRun, content: z.string() }),
  z.looseObject({ type: z.literal("tool_start"), ...ofRun, call_id: z.string(), name: z.string() }),
  z.looseObject({
    type: z.literal("tool_result"),
    ...ofRun,
    call_id: z.string(),
    name: z.string(),
    result: z.string(),
    duration_ms: z.number().nonnegative(),
    attempts: count,
    error: z.string().optional(),
  }),
  z.looseObject({
    type: z.literal("llm"),
    ...ofRun,
    model: z.string(),
    usage: usageShape,
    cost: z.number().nonnegative().nullable(),
    duration_ms: z.number().nonnegative(),
    error: z.string().optional(),
  }),
  z.looseObject({
    type: z.literal("run_finished"),
    ...ofRun,
    status: z.enum(RUN_STATUSES),
    usage: usageShape,
    cost: z.number().nonnegative().nullable().optional(),
    error: z.string().optional(),
    run: runRecordShape,
  }),
  z.looseObject({
    type: z.literal("delivery"),
    id: z.string(),
    job: z.string().optional(),
    run_id: z.string().optional(),
    status: z.string(),
    attempts: count,
    target: z.string(),
    to: z.string(),
    kind: z.string(),
    error: z.string().optional(),
    next_attempt_at: z.string().optional(),
    node: z.string().optional(),
  }),
]);
