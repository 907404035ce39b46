import type { Redis } from "ioredis";
import { z } from "zod";
import type { Redactor } from "../audit/redact.js";
import { silentLogger, type Logger } from "../log.js";
import { RUNS_KEPT_PER_JOB } from "../store/run-history.js";
import type { RunRecord } from "../store/run-record.js";
import type { Transcript, TranscriptStep } from "../store/transcript.js";
import type { TranscriptStore } from "../store/transcripts.js";
import { errorText, excerpt } from "../text.js";

/** A run's transcript in Redis: `countd:transcript:<job>:<run id>`; job names hold no ":", run ids neither. */
const transcriptsOf = (job: string) => `countd:transcript:${job}:`;
const transcriptKey = (job: string, id: string) => `${transcriptsOf(job)}${id}`;
/** A job's stored transcripts by start time, to keep the newest RUNS_KEPT_PER_JOB as its records are. */
const orderKey = (job: string) => `countd:transcripts:${job}`;

/**
 * Stores a transcript for keepMs and drops the job's oldest past the cap, in one step.
 * KEYS: transcript, order; ARGV: JSON, keepMs, run id, start time (ms), cap, the job's key prefix.
 */
const SAVE = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do redis.call('DEL', ARGV[6] .. id) end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 0
`;

/** A tool result stored is cut here, as the live stream cuts it: the run's node keeps the whole result in its session file. */
export const STORED_RESULT_CHARS = 16_000;
/** The most a stored transcript takes (its JSON), as much as the live stream keeps of a run for a client that connects mid-run. */
export const STORED_TRANSCRIPT_BYTES = 1_000_000;

const transcriptShape = z.object({
  prompt: z.string().optional(),
  steps: z.array(z.looseObject({ kind: z.enum(["text", "tool", "llm"]) })),
  incomplete: z.string().optional(),
});

/**
 * The transcripts of a cluster: a run of this node is put together from its files, as a daemon
 * alone does; a run of another node is read from Redis, where that node stored it when the run
 * ended (save()). A stored transcript is redacted, its tool results cut at STORED_RESULT_CHARS and
 * the whole at STORED_TRANSCRIPT_BYTES. It goes after retention.sessions, the age at which the
 * node's own session file goes, or once it is not among the job's newest RUNS_KEPT_PER_JOB, as a
 * run record goes.
 */
export class RedisTranscripts implements TranscriptStore {
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    private readonly opts: { node: string; local: TranscriptStore; log?: Logger },
  ) {
    this.log = (opts.log ?? silentLogger).child({ component: "transcripts" });
  }

  async read(run: RunRecord): Promise<Transcript> {
    if (run.node === undefined || run.node === this.opts.node) return this.opts.local.read(run);
    // In progress on its node: its live messages are on the stream; its transcript is stored when it ends.
    if (run.status === "running") return { steps: [] };
    let text: string | null;
    try {
      text = await this.redis.get(transcriptKey(run.job, run.id));
    } catch (err) {
      return { steps: [], incomplete: `this run ran on node ${run.node}; its transcript could not be read from Redis: ${errorText(err)}` };
    }
    if (text === null) {
      return {
        steps: [],
        incomplete: `this run ran on node ${run.node} and its transcript is not in Redis: its node stores it a second after the run ended and it goes after retention.sessions; a node stopped before storing it leaves none`,
      };
    }
    const parsed = transcriptShape.safeParse(JSON.parse(text));
    if (!parsed.success) {
      this.log.warn({ job: run.job, runId: run.id, problem: parsed.error.message }, "transcript in Redis cannot be used");
      return { steps: [], incomplete: `this run ran on node ${run.node}; its transcript in Redis cannot be read by this countd version` };
    }
    return parsed.data as Transcript;
  }

  /** Stores the transcript of a run of this node that ended, for `keepMs`; a failure is logged, never the run's. */
  async save(run: RunRecord, keepMs: number, redactor: Redactor): Promise<void> {
    try {
      const transcript = bounded(redactor.redactValue(await this.opts.local.read(run)) as Transcript);
      const args = [JSON.stringify(transcript), keepMs, run.id, Date.parse(run.startedAt), RUNS_KEPT_PER_JOB, transcriptsOf(run.job)];
      await this.redis.eval(SAVE, 2, transcriptKey(run.job, run.id), orderKey(run.job), ...args);
    } catch (err) {
      this.log.warn(
        { job: run.job, runId: run.id, error: errorText(err) },
        "could not store the run's transcript in Redis; other nodes cannot show it",
      );
    }
  }
}

/** The transcript cut to what Redis keeps: long tool results cut, then the steps past the size limit left out (and said so). */
function bounded(transcript: Transcript): Transcript {
  const steps: TranscriptStep[] = transcript.steps.map((step) =>
    step.kind === "tool" && step.result !== undefined && step.result.length > STORED_RESULT_CHARS
      ? {
          ...step,
          result: excerpt(
            step.result,
            STORED_RESULT_CHARS,
            ` [cut: ${step.result.length} characters in all; the session file on the run's node has the whole result]`,
          ),
        }
      : step,
  );
  let bytes = Buffer.byteLength(JSON.stringify({ ...transcript, steps: [] }));
  const kept: TranscriptStep[] = [];
  for (const step of steps) {
    bytes += Buffer.byteLength(JSON.stringify(step)) + 1;
    if (bytes > STORED_TRANSCRIPT_BYTES) {
      const left = `${steps.length - kept.length} of its ${steps.length} steps are not shown: the transcript passed the ${STORED_TRANSCRIPT_BYTES} bytes kept in Redis (the run's node shows them all)`;
      return { ...transcript, steps: kept, incomplete: transcript.incomplete ? `${transcript.incomplete}; ${left}` : left };
    }
    kept.push(step);
  }
  return { ...transcript, steps: kept };
}
