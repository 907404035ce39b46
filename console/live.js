import { useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import { get } from "./api.js";

/**
 * The page's one WebSocket to /api/ws. The screen on show chooses what it receives (every run, one
 * job, one run); each choice, and each reconnection, makes the daemon replay what runs in progress
 * produced so far and then send `live`. Screens therefore get a `reset` before each replay and
 * rebuild what they show from it, so nothing is counted twice and nothing missed while
 * disconnected stays missing.
 */

const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 15_000;

const listeners = new Set();
const stateListeners = new Set();
let socket;
let filter = {};
let retries = 0;
let retryTimer;
let stopped = true;
/** `live` markers still to come: messages before the last one's replay belong to an earlier filter. */
let pendingLive = 0;
/** "connecting" | "live" | "reconnecting" */
let state = "connecting";

export function startLive() {
  stopped = false;
  connect();
}

export function stopLive() {
  stopped = true;
  clearTimeout(retryTimer);
  socket?.close();
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}/api/ws`);
  socket = ws;
  pendingLive = 1;
  ws.onopen = () => {
    const reconnected = retries > 0;
    retries = 0;
    subscribe(reconnected);
  };
  ws.onmessage = (event) => {
    if (ws !== socket) return;
    const message = JSON.parse(event.data);
    if (message.type === "live") {
      pendingLive--;
      if (pendingLive > 0) return;
      setState("live");
    } else if (pendingLive > 1) return;
    for (const listener of listeners) listener(message);
  };
  ws.onclose = () => {
    if (ws !== socket || stopped) return;
    setState("reconnecting");
    // A refused upgrade looks like any dropped connection: ask the API whether the sign-in is gone (a 401 signs the page out).
    get("/api/session").catch(() => {});
    const wait = Math.min(FIRST_RETRY_MS * 2 ** retries, MAX_RETRY_MS) * (0.8 + Math.random() * 0.4);
    retries++;
    retryTimer = setTimeout(() => !stopped && connect(), wait);
  };
}

function subscribe(reconnected) {
  socket.send(JSON.stringify({ type: "subscribe", ...filter }));
  pendingLive++;
  for (const listener of listeners) listener({ type: "reset", reconnected });
}

function setState(next) {
  if (next === state) return;
  state = next;
  for (const listener of stateListeners) listener(state);
}

/**
 * Live messages for the screen that calls it: `{}` every run and delivery, `{job}` or `{run}` one
 * job's or one run's. `onMessage` gets `{type: "reset", reconnected}` before each replay.
 */
export function useLive(wanted, onMessage) {
  const handler = useRef(onMessage);
  handler.current = onMessage;
  const key = JSON.stringify(wanted);
  useEffect(() => {
    const listener = (message) => handler.current(message);
    listeners.add(listener);
    filter = wanted;
    if (socket?.readyState === WebSocket.OPEN) subscribe(false);
    return () => listeners.delete(listener);
  }, [key]);
}

export function useLiveState() {
  const [current, setCurrent] = useState(state);
  useEffect(() => {
    stateListeners.add(setCurrent);
    setCurrent(state);
    return () => stateListeners.delete(setCurrent);
  }, []);
  return current;
}
