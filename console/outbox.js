// @ts-check
import { useState } from "/assets/vendor/preact-hooks.js";
import * as api from "./api.js";
import { useLive } from "./live.js";
import { ActionButton, html, Notice, runHref, Status, Time, useDebounced, useResource } from "./ui.js";

/**
 * @typedef {import("../src/console/protocol.js").OutboxItem} OutboxItem
 * @typedef {import("../src/console/protocol.js").RetryAnswer} RetryAnswer
 * @typedef {import("../src/console/protocol.js").PurgeAnswer} PurgeAnswer
 * @typedef {import("./ui.js").NoticeText} NoticeText
 * @typedef {(id: string) => (result: ActionResult<RetryAnswer>) => void} Retried
 */
/**
 * @template T
 * @typedef {import("./ui.js").ActionResult<T>} ActionResult
 */

/** Deliveries not yet acknowledged: pending ones on their way, dead ones given up on until a retry. */
export function OutboxPage() {
  const outbox = useResource(api.outbox, []);
  const [notice, setNotice] = useState(/** @type {NoticeText | undefined} */ (undefined));
  const refresh = useDebounced(outbox.reload, 200);
  useLive({}, (m) => {
    if (m.type === "delivery" || (m.type === "reset" && m.reconnected)) refresh();
  });
  /** @type {Retried} */
  const retried =
    (id) =>
    ({ ok, error }) => {
      setNotice(ok ? { kind: "info", text: `Sending ${id} again.` } : { kind: "error", text: `Retry: ${error.message}` });
      outbox.reload();
    };
  /** @type {(id: string) => (result: ActionResult<unknown>) => void} */
  const released =
    (id) =>
    ({ ok, error }) => {
      setNotice(ok ? { kind: "info", text: `Released ${id}: sending it now.` } : { kind: "error", text: `Release: ${error.message}` });
      outbox.reload();
    };
  // A purge cannot be undone: the dead deliveries and their errors are gone from the outbox.
  const purge = async () =>
    confirm("Remove every dead delivery? They are not sent, and cannot be retried afterwards.") ? api.purgeOutbox() : undefined;
  /** @param {ActionResult<PurgeAnswer | undefined>} result */
  const purged = ({ ok, value, error }) => {
    if (!ok) setNotice({ kind: "error", text: `Purge: ${error.message}` });
    else if (value) setNotice({ kind: "info", text: `${value.purged} dead ${value.purged === 1 ? "delivery" : "deliveries"} removed.` });
    outbox.reload();
  };
  const o = outbox.data;
  return html`
    <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">Overview</a> / <span>Outbox</span></nav>
    <h1 tabindex="-1">Outbox</h1>
    ${notice && html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>`}
    ${outbox.error && html`<${Notice} kind="error">${outbox.error.message}<//>`}
    ${
      o &&
      o.disabled_targets.length > 0 &&
      html`<${Notice} kind="warn">Disabled after HTTP 410 (nothing is sent to them until a retry): ${o.disabled_targets.join(", ")}<//>`
    }
    ${
      o &&
      html`
        <section aria-labelledby="dead-title">
          <h2 id="dead-title">Dead <span class="muted">(${o.dead.length})</span></h2>
          ${o.dead.length > 0 && html`<${ActionButton} act=${purge} onDone=${purged} label="Purge dead deliveries">Purge<//>`}
          <${Entries} entries=${o.dead} retried=${retried} released=${released} empty="No dead delivery." />
        </section>
        <section aria-labelledby="pending-title">
          <h2 id="pending-title">Pending <span class="muted">(${o.pending.length})</span></h2>
          <${Entries} entries=${o.pending} retried=${retried} released=${released} empty="Nothing waiting to be sent." />
        </section>
      `
    }
  `;
}

/** @param {{ entries: OutboxItem[]; retried: Retried; released: (id: string) => (result: ActionResult<unknown>) => void; empty: string }} props */
function Entries({ entries, retried, released, empty }) {
  if (entries.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<div class="table-wrap">
    <table class="outbox">
      <thead>
        <tr>
          <th scope="col">Run</th>
          <th scope="col">Target</th>
          <th scope="col">Status</th>
          <th scope="col" class="num">Attempts</th>
          <th scope="col">Last error</th>
          <th scope="col">Created</th>
          <th scope="col"><span class="sr-only">Action</span></th>
        </tr>
      </thead>
      <tbody>
        ${entries.map(
          (entry) =>
            html`<tr key=${entry.id}>
              <td>
                ${
                  entry.job && entry.run_id
                    ? html`<a href=${runHref(entry.job, entry.run_id)}>${entry.job}</a>
                        <div class="mono small muted">${entry.run_id}</div>`
                    : html`<span class="mono small">${entry.id}</span>`
                }
              </td>
              <td><span class="badge">${entry.kind}</span> ${entry.to}</td>
              <td>
                <${Status}
                  status=${entry.held !== undefined ? "held" : entry.status}
                />${entry.held !== undefined && html`<div class="muted small">${entry.held}</div>`}${entry.next_attempt_at && html`<div class="muted small">next <${Time} at=${entry.next_attempt_at} zone=${entry.timezone} /></div>`}
              </td>
              <td class="num">${entry.attempts}</td>
              <td class="error-text">${entry.last_error ?? ""}</td>
              <td><${Time} at=${entry.created_at} zone=${entry.timezone} /></td>
              <td>
                ${
                  entry.held !== undefined
                    ? html`<${ActionButton} act=${() => api.releaseDelivery(entry.id)} onDone=${released(entry.id)} label=${`Release ${entry.id}`}
                        >Release<//
                      >`
                    : html`<${ActionButton} act=${() => api.retryDelivery(entry.id)} onDone=${retried(entry.id)} label=${`Retry ${entry.id}`}>Retry<//>`
                }
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}
