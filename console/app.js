// @ts-check
import { render } from "/assets/vendor/preact.js";
import { useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import { onSignedOut, signOut, startSession } from "./api.js";
import { ApprovalsNav, ApprovalsPage } from "./approvals.js";
import { JobPage } from "./job.js";
import { startLive, stopLive, useLiveState } from "./live.js";
import { OutboxPage } from "./outbox.js";
import { Overview } from "./overview.js";
import { RehearsalPage } from "./rehearsal.js";
import { RunPage } from "./run.js";
import { ActionButton, html } from "./ui.js";

/**
 * @typedef {{ title: string } & (
 *   | { screen: "overview" | "outbox" | "approvals" | "missing" }
 *   | { screen: "job"; name: string }
 *   | { screen: "run"; job: string; id: string }
 *   | { screen: "rehearsal"; id: string }
 * )} Route
 */

/**
 * `#/`, `#/jobs/<name>`, `#/runs/<job>/<id>`, `#/rehearsals/<id>`, `#/outbox`, `#/approvals`: the screen for an address.
 * @param {string} hash
 * @returns {Route}
 */
function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { screen: "overview", title: "Overview" };
  const [first, second = "", third = ""] = parts;
  if (first === "jobs" && parts.length === 2) return { screen: "job", name: second, title: second };
  if (first === "runs" && parts.length === 3) return { screen: "run", job: second, id: third, title: `${second} run ${third}` };
  if (first === "rehearsals" && parts.length === 2) return { screen: "rehearsal", id: second, title: `Rehearsal ${second}` };
  if (first === "outbox" && parts.length === 1) return { screen: "outbox", title: "Outbox" };
  if (first === "approvals" && parts.length === 1) return { screen: "approvals", title: "Approvals" };
  return { screen: "missing", title: "Not found" };
}

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener("hashchange", changed);
    // The address may have changed between the first render and now.
    changed();
    return () => removeEventListener("hashchange", changed);
  }, []);
  return { key: hash, ...route(hash) };
}

/**
 * @typedef {{ state: "loading" } | { state: "signed-out" } | { state: "error"; error: Error } | { state: "ready"; version: string }} Session
 */

function App() {
  const [session, setSession] = useState(/** @type {Session} */ ({ state: "loading" }));
  useEffect(() => {
    onSignedOut(() => {
      stopLive();
      setSession({ state: "signed-out" });
    });
    startSession().then(
      (answer) => {
        setSession({ state: "ready", version: answer.version });
        startLive();
      },
      (/** @type {Error} */ error) => setSession((previous) => (previous.state === "signed-out" ? previous : { state: "error", error })),
    );
  }, []);
  if (session.state === "loading") return html`<p class="boot">Loading the console…</p>`;
  if (session.state === "signed-out") return html`<${SignIn} />`;
  if (session.state === "error")
    return html`<main class="signin">
      <h1>countd console</h1>
      <p class="error-text">${session.error.message}</p>
      <p><button type="button" onClick=${() => location.reload()}>Try again</button></p>
    </main>`;
  return html`<${Shell} version=${session.version} />`;
}

function SignIn() {
  // The server answers an address with a wrong token with this page: the token is not kept in the address bar either.
  const [wrongToken] = useState(() => {
    const had = new URLSearchParams(location.search).has("token");
    // Out of the address bar before the page is drawn, not after, when it has been on show.
    if (had) history.replaceState(null, "", "/");
    return had;
  });
  useEffect(() => {
    document.title = "Sign in · countd";
  }, []);
  return html`<main class="signin" id="main">
    <h1>Sign in to the countd console</h1>
    <p>
      ${wrongToken ? "The token in that address is not the console's token (it changes when console.token is removed)." : "This browser is not signed in: a sign-in lasts until you sign out or the daemon restarts."}
    </p>
    <p>On the machine that runs countd, run</p>
    <pre class="command">countd console</pre>
    <p>
      and open the address it prints (<span class="mono">http://127.0.0.1:7420/?token=…</span>). The token leaves the address bar at once; a
      cookie keeps you signed in.
    </p>
  </main>`;
}

/** @param {{ version: string }} props */
function Shell({ version }) {
  const page = useRoute();
  const connection = useLiveState();
  useGoShortcuts();
  // A new screen: its title, the top of the page, and the keyboard focus on its heading, as a page
  // load would put it at the top; on the first screen it stays there, before the skip link.
  const first = useRef(true);
  useEffect(() => {
    document.title = `${page.title} · countd`;
    if (first.current) {
      first.current = false;
      return;
    }
    scrollTo(0, 0);
    document.querySelector("#main")?.querySelector("h1")?.focus();
  }, [page.key]);
  return html`
    <a class="skip" href="#main" onClick=${skipToMain}>Skip to content</a>
    <header class="top">
      <a class="brand" href="#/">countd</a>
      <nav aria-label="Sections">
        <a href="#/" aria-current=${page.screen === "overview" ? "page" : undefined}>Overview</a>
        <a href="#/outbox" aria-current=${page.screen === "outbox" ? "page" : undefined}>Outbox</a>
        <${ApprovalsNav} current=${page.screen === "approvals"} />
      </nav>
      <span class=${`connection connection-${connection}`} role="status">
        <span class="dot" aria-hidden="true"></span
        >${connection === "live" ? "live" : connection === "reconnecting" ? "reconnecting…" : "connecting…"}
      </span>
    </header>
    <main id="main" tabindex="-1">${screen(page)}</main>
    <footer class="foot muted small">
      countd ${version} · keys: <kbd>g</kbd> <kbd>o</kbd> overview, <kbd>g</kbd> <kbd>b</kbd> outbox ·
      <${ActionButton} class="link" act=${signOut} onDone=${signedOutOrSay}>Sign out<//>
    </footer>
  `;
}

/**
 * A sign-out the daemon did not answer leaves the session alive: the user is told, not shown the sign-in screen.
 * @param {import("./ui.js").ActionResult<unknown>} result
 */
function signedOutOrSay(result) {
  if (!result.ok) alert(`Not signed out: ${result.error.message}`);
}

/** @param {Route} page */
function screen(page) {
  switch (page.screen) {
    case "overview":
      return html`<${Overview} />`;
    case "job":
      return html`<${JobPage} key=${page.name} name=${page.name} />`;
    case "run":
      return html`<${RunPage} key=${`${page.job}/${page.id}`} job=${page.job} id=${page.id} />`;
    case "rehearsal":
      return html`<${RehearsalPage} key=${page.id} id=${page.id} />`;
    case "outbox":
      return html`<${OutboxPage} />`;
    case "approvals":
      return html`<${ApprovalsPage} />`;
    default:
      return html`<h1 tabindex="-1">Not found</h1>
        <p>No page at this address. <a href="#/">Back to the overview</a></p>`;
  }
}

/**
 * The skip link moves focus without touching the address: the hash is the router's.
 * @param {MouseEvent} event
 */
function skipToMain(event) {
  event.preventDefault();
  document.getElementById("main")?.focus();
}

/** @type {Record<string, string | undefined>} */
const GO = { o: "#/", b: "#/outbox" };
/** A second key within this of `g` completes a shortcut. */
const CHORD_MS = 1500;

function useGoShortcuts() {
  useEffect(() => {
    let pressedG = 0;
    /** @param {KeyboardEvent} event */
    const keydown = (event) => {
      const { target } = event;
      const typing = target instanceof Element && target.closest("input, textarea, select, [contenteditable]");
      if (event.ctrlKey || event.metaKey || event.altKey || typing) return;
      const go = GO[event.key];
      if (pressedG && event.timeStamp - pressedG < CHORD_MS && go) {
        event.preventDefault();
        location.hash = go;
        pressedG = 0;
        return;
      }
      pressedG = event.key === "g" ? event.timeStamp : 0;
    };
    addEventListener("keydown", keydown);
    return () => removeEventListener("keydown", keydown);
  }, []);
}

render(html`<${App} />`, /** @type {HTMLElement} */ (document.getElementById("app")));
