import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DeliveryOutbox } from "../delivery/delivery-outbox.js";
import { messageIdLocalPart, type Mailer } from "../delivery/email.js";
import type { DeliveryMessage } from "../delivery/message.js";
import { deliveryId } from "../delivery/outbox.js";
import { resolveTarget } from "../delivery/secrets.js";
import { describeTarget, type DeliveryTarget } from "../delivery/targets.js";
import { webhookHeaders, webhookRequests } from "../delivery/webhook.js";
import { errorText } from "../text.js";

/** One delivery a rehearsal would have made, and the files that hold it, relative to the rehearsal's folder. */
export interface CapturedDelivery {
  id: string;
  kind: DeliveryMessage["kind"];
  to: string;
  target: DeliveryTarget["kind"];
  files: string[];
  /** A mail's subject as its reader sees it (the .eml may hold it encoded). */
  subject?: string;
}

/** The folder, inside a rehearsal's, where its deliveries are written. */
export const DELIVERIES_DIR = "deliveries";

/**
 * A delivery rendered as sending would render it, as files: the .eml of a mail; each request of a
 * webhook as its body and its headers. A webhook is signed with its secret filled in, but its URL
 * and headers are written as the job file has them: `${VAR}` references stay references, so no
 * secret lands on disk.
 */
export async function renderDelivery(
  mailer: Pick<Mailer, "render">,
  env: NodeJS.ProcessEnv,
  entry: { id: string; target: DeliveryTarget; message: DeliveryMessage; workspace: string },
): Promise<{ files: Array<{ name: string; bytes: string | Buffer }>; subject?: string }> {
  const { id, target, message } = entry;
  const base = messageIdLocalPart(id);
  if (target.kind === "email") {
    const mail = await mailer.render(target, message, id, entry.workspace);
    // The HTML beside the .eml: what the console shows as the recipient would see it.
    return {
      files: [
        { name: `${base}.eml`, bytes: mail.eml },
        { name: `${base}.html`, bytes: mail.html },
      ],
      subject: mail.subject,
    };
  }
  let signing = target;
  let unsigned = "";
  try {
    signing = resolveTarget(target, env);
  } catch (err) {
    unsigned = `# not as sent: ${errorText(err)}\n`;
  }
  const requests = webhookRequests(signing, message, id, new Date(message.run.finishedAt));
  const files = requests.flatMap((request, index) => {
    const name = requests.length > 1 ? `${base}.${index + 1}` : base;
    const headers = Object.entries(webhookHeaders(target, request)).map(([key, value]) => `${key}: ${value}\n`);
    const url = requests.length > 1 || target.format === "json" || target.format === "output" ? target.url : request.url;
    return [
      { name: `${name}.headers`, bytes: `${unsigned}POST ${url}\n${headers.join("")}` },
      { name: `${name}.body`, bytes: request.body },
    ];
  });
  return { files };
}

/**
 * The outbox of a rehearsal: every delivery is rendered into the rehearsal's folder at once and
 * counted delivered; nothing is sent and nothing is stored in the real outbox. `shape` lets a
 * replay give a delivery the id and times of the run it replays, so both render alike.
 */
export class CaptureOutbox implements DeliveryOutbox {
  readonly captured: CapturedDelivery[] = [];
  /** Each captured delivery's target, by id: a replay renders the original's message to the same one. */
  readonly targets = new Map<string, DeliveryTarget>();

  constructor(
    private readonly folder: string,
    private readonly render: (entry: {
      id: string;
      target: DeliveryTarget;
      message: DeliveryMessage;
      workspace: string;
    }) => ReturnType<typeof renderDelivery>,
    private readonly shape: (runKey: string, message: DeliveryMessage) => { runKey: string; message: DeliveryMessage } = (
      runKey,
      message,
    ) => ({
      runKey,
      message,
    }),
  ) {}

  async enqueue(key: string, targets: readonly DeliveryTarget[], original: DeliveryMessage, workspace: string): Promise<string[]> {
    const { runKey, message } = this.shape(key, original);
    const dir = join(this.folder, DELIVERIES_DIR);
    await mkdir(dir, { recursive: true });
    const ids: string[] = [];
    for (const target of targets) {
      const id = deliveryId(runKey, target);
      const { files, subject } = await this.render({ id, target, message, workspace });
      for (const file of files) await writeFile(join(dir, file.name), file.bytes, { mode: 0o600 });
      this.captured.push({
        id,
        kind: message.kind,
        to: describeTarget(target),
        target: target.kind,
        files: files.map((f) => `${DELIVERIES_DIR}/${f.name}`),
        ...(subject !== undefined ? { subject } : {}),
      });
      this.targets.set(id, target);
      ids.push(id);
    }
    return ids;
  }

  start(): void {}
  async stop(): Promise<void> {}
  async close(): Promise<void> {}
  async runDue(): Promise<void> {}
  async settled(ids: readonly string[]) {
    return ids.map((id) => ({ id, delivered: true as const }));
  }
  list() {
    return { pending: [], dead: [] };
  }
  counts() {
    return { pending: 0, dead: 0 };
  }
  deliveredAt(id: string): Date | undefined {
    return this.captured.some((c) => c.id === id) ? new Date() : undefined;
  }
  deliveredIds(prefix: string) {
    return this.captured.filter((c) => c.id.startsWith(prefix)).map((c) => ({ id: c.id, at: new Date().toISOString() }));
  }
  async release(): Promise<void> {}

  async retry(): Promise<number> {
    return 0;
  }
  async purge(): Promise<number> {
    return 0;
  }
  disabledTargets(): string[] {
    return [];
  }
  async enableTargets(): Promise<string[]> {
    return [];
  }
}
