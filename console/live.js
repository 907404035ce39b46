// @ts-check
import { useEffect, useRef, useState } from "/assets/vendor/preact-hooks.js";
import { session } from "./api.js";

/**
 * The page's one WebSocket to /api/ws. The screen on show chooses what it receives (every run, one
 * job, one run); each choice, and each reconnection, makes the daemon replay what runs in progress
 * produced so far and then send `live`. Screens therefore get a `reset` before each replay and
 * rebuild what they show from it, so nothing is counted twice and nothing missed while
 * disconnected stays missing. The daemon marks where its answer to a subscription begins
 * (`replay`): what arrives between sending a subscription and that mark was chosen by the one
 * before, and would repeat steps the replay brings again, so it is dropped.
 */

/**
 * @typedef {import("../src/console/protocol.js").LiveMessage} LiveMessage
 * @typedef {import("../src/console/protocol.js").Subscription} Subscription
 * @typedef {{ type: "reset"; reconnected: boolean }} Reset
 * @typedef {Exclude<LiveMessage, { type: "replay" }> | Reset} PageMessage what a screen's `useLive` callback gets: the replay marks stay here
 * @typedef {Omit<Subscription, "type">} Wanted
 * @typedef {"connecting" | "live" | "reconnecting"} LiveState
 */

const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 15_000;

/** @type {Set<(message: PageMessage) => void>} */
const listeners = new Set();
/** @type {Set<(state: LiveState) => void>} */
const stateListeners = new Set();
/** @type {WebSocket | undefined} */
let socket;
/** @type {Wanted} */
let filter = {};
let retries = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let retryTimer;
let stopped = true;
/** Answers to subscriptions (or to the connection) whose `replay` mark has not come: until it has, messages belong to an earlier filter. */
let pendingReplays = 0;
/** Whether the next reset follows a reconnection. */
let reconnected = false;
/** @type {LiveState} */
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
  // The daemon answers the connection itself with a replay of everything, before the subscription.
  pendingReplays = 1;
  ws.onopen = () => {
    reconnected = retries > 0;
    retries = 0;
    subscribe();
  };
  ws.onmessage = (event) => {
    if (ws !== socket) return;
    /** @type {LiveMessage} */
    const message = JSON.parse(event.data);
    if (message.type === "replay") {
      pendingReplays--;
      if (pendingReplays === 0) reset();
      return;
    }
    if (pendingReplays > 0) return;
    if (message.type === "live") setState("live");
    for (const listener of listeners) listener(message);
  };
  ws.onclose = () => {
    if (ws !== socket || stopped) return;
    setState("reconnecting");
    // A refused upgrade looks like any dropped connection: ask the API whether the sign-in is gone (a 401 signs the page out).
    session().catch(() => {});
    const wait = Math.min(FIRST_RETRY_MS * 2 ** retries, MAX_RETRY_MS) * (0.8 + Math.random() * 0.4);
    retries++;
    retryTimer = setTimeout(() => !stopped && connect(), wait);
  };
}

function subscribe() {
  /** @satisfies {Subscription} */
  const subscription = { type: "subscribe", ...filter };
  socket?.send(JSON.stringify(subscription));
  pendingReplays++;
}

function reset() {
  /** @type {Reset} */
  const message = { type: "reset", reconnected };
  reconnected = false;
  for (const listener of listeners) listener(message);
}

/** @param {LiveState} next */
function setState(next) {
  if (next === state) return;
  state = next;
  for (const listener of stateListeners) listener(state);
}

/**
 * Live messages for the screen that calls it: `{}` every run and delivery, `{job}` or `{run}` one
 * job's or one run's. `onMessage` gets `{type: "reset", reconnected}` before each replay.
 * @param {Wanted} wanted
 * @param {(message: PageMessage) => void} onMessage
 */
export function useLive(wanted, onMessage) {
  const handler = useRef(onMessage);
  handler.current = onMessage;
  const key = JSON.stringify(wanted);
  useEffect(() => {
    /** @param {PageMessage} message */
    const listener = (message) => handler.current(message);
    listeners.add(listener);
    filter = wanted;
    if (socket?.readyState === WebSocket.OPEN) subscribe();
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
