import { userInfo } from "node:os";
import { ApprovalDesk } from "../approvals/desk.js";
import { FileApprovals } from "../approvals/file-store.js";
import { approvalKey, type ApprovalAnswer } from "../approvals/links.js";
import { approvalView, type Approval, type AnswerResult } from "../approvals/types.js";
import { loadJobsDir } from "../jobs/load.js";
import { zoneOf } from "../jobs/zones.js";
import { acquireLock } from "../store/lock.js";
import { shownTime } from "../time.js";
import { DaemonRefused, findDaemon } from "./control.js";
import { EXIT, shortArgs, table } from "./output.js";
import { setting } from "./setting.js";

/** approvalView's fields this command shows: the daemon's API sends the same object. */
interface ApprovalView {
  id: string;
  job: string;
  run: string;
  tool: string;
  arguments: unknown;
  asked_at: string;
  expires_at: string;
  status: Approval["status"];
  answer?: { answer: string; via: string; by: string; at: string; note?: string };
}

/**
 * `countd approvals`: the calls waiting for a yes, newest first; `--all` adds the answered ones
 * still kept. Asked of the running daemon, else read from the state directory's approvals.
 */
export async function listApprovals(opts: { config?: string; json?: boolean; all?: boolean }): Promise<number> {
  const { config, ctx } = await setting(opts.config);
  const daemon = await findDaemon(config.paths.state);
  const all = daemon
    ? (await daemon.call<{ approvals: ApprovalView[] }>("GET", "/api/approvals")).approvals
    : (await (await FileApprovals.open(config.paths.state)).list()).map((approval) => approvalView(approval) as unknown as ApprovalView);
  const shown = opts.all ? all : all.filter((approval) => approval.status === "waiting");
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
    return EXIT.ok;
  }
  if (shown.length === 0) {
    process.stdout.write(
      opts.all ? "No approvals.\n" : "No call waits for an approval (countd approvals --all lists the answered ones).\n",
    );
    return EXIT.ok;
  }
  const zone = zoneOf(config, (await loadJobsDir(config.paths.jobs, ctx)).jobs);
  const rows = shown.map((approval) => {
    const at = (time: string) => shownTime(time, zone(approval.job));
    const asked = [
      approval.id,
      approval.job,
      approval.run,
      approval.tool,
      shortArgs(approval.arguments),
      at(approval.asked_at),
      at(approval.expires_at),
    ];
    if (!opts.all) return asked;
    const answer = approval.answer;
    return [...asked, approval.status, answer ? `${answer.by} (${answer.via}) ${at(answer.at)}` : "", answer?.note ?? ""];
  });
  const header = ["ID", "JOB", "RUN", "TOOL", "ARGUMENTS", "ASKED", "EXPIRES", ...(opts.all ? ["STATUS", "ANSWERED", "NOTE"] : [])];
  process.stdout.write(table(header, rows));
  return EXIT.ok;
}

/**
 * `countd approve <id>` and `countd deny <id>`, answered as the user's login. Through the running
 * daemon, which goes on with the run at once; without one, kept in the state directory under its
 * lock, and the daemon goes on with the run when it starts.
 */
export async function answerApproval(answer: ApprovalAnswer, id: string, opts: { config?: string; note?: string }): Promise<number> {
  const { config } = await setting(opts.config);
  const by = login();
  const daemon = await findDaemon(config.paths.state);
  if (daemon) {
    const body = answer === "approve" ? { note: opts.note, by } : { reason: opts.note, by };
    const path = `/api/approvals/${encodeURIComponent(id)}/${answer}`;
    const answered = await daemon.call<{ approval: ApprovalView }>("POST", path, body).catch((err: unknown) => {
      if (err instanceof DaemonRefused && err.status === 404) throw new Error(unknownId(id));
      if (err instanceof DaemonRefused && err.status === 409) throw new Error(`approval ${id} cannot be answered: ${err.message}`);
      throw err;
    });
    process.stdout.write(`${done(answer, answered.approval)}: the run goes on now\n`);
    return EXIT.ok;
  }
  const release = await acquireLock(config.paths.state);
  let result: AnswerResult;
  try {
    // The daemon goes on with every answered run when it starts: nothing resumes here.
    const desk = new ApprovalDesk({
      store: await FileApprovals.open(config.paths.state),
      key: await approvalKey(config.paths.state),
      resume: () => {},
    });
    result = await desk.answer(id, answer, { via: "cli", by, ...(opts.note !== undefined ? { note: opts.note } : {}) });
  } finally {
    await release();
  }
  if (!result.ok) throw new Error(refusal(id, result));
  process.stdout.write(`${done(answer, result.approval)}: the run goes on when the daemon starts (countd start)\n`);
  return EXIT.ok;
}

const done = (answer: ApprovalAnswer, approval: Pick<Approval, "id" | "job" | "run">) =>
  `${answer === "approve" ? "approved" : "denied"} ${approval.id} (job ${approval.job}, run ${approval.run})`;

const unknownId = (id: string) => `no approval ${id} (countd approvals --all lists them)`;

function refusal(id: string, result: Extract<AnswerResult, { ok: false }>): string {
  const { why, approval } = result;
  if (why === "unknown" || !approval) return unknownId(id);
  if (why === "expired") return `approval ${id} expired at ${approval.expiresAt}: it can no longer be answered`;
  const answer = approval.answer;
  return `approval ${id} is already answered: ${approval.status}${answer ? ` by ${answer.by} (${answer.via}) at ${answer.at}` : ""}`;
}

/** Who answers from the CLI, for the journal: the OS login, or the uid where it has no name. */
function login(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? "unknown"}`;
  }
}
