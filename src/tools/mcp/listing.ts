import { setMaxListeners } from "node:events";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { excerpt } from "../../text.js";
import { MAX_DESCRIPTION_CHARS, MAX_LIST_PAGES, MAX_TOOLS } from "./bounds.js";

export type ListedTool = Pick<McpTool, "name" | "description" | "inputSchema">;

export interface Listing {
  tools: ListedTool[];
  /** Why the list was cut short (the server has more pages or tools than countd takes); undefined when it was not. */
  cut?: string;
}

/**
 * The server's tool list, page after page, within `signal` (connect_timeout for the whole
 * listing, not each page) and at most MAX_LIST_PAGES pages and MAX_TOOLS tools; each description
 * cut to MAX_DESCRIPTION_CHARS, since every request naming the tool carries it to the model.
 */
export async function listTools(client: Client, timeout: number, signal: AbortSignal): Promise<Listing> {
  const tools: ListedTool[] = [];
  let cursor: string | undefined;
  // The SDK leaves a listener on the signal for each request: one per page, a known number.
  const listing = AbortSignal.any([signal]);
  setMaxListeners(MAX_LIST_PAGES, listing);
  for (let pages = 0; pages < MAX_LIST_PAGES; pages++) {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout, signal: listing });
    const room = MAX_TOOLS - tools.length;
    for (const { name, description, inputSchema } of page.tools.slice(0, room)) {
      tools.push({ name, description: description === undefined ? undefined : cutDescription(description), inputSchema });
    }
    cursor = page.nextCursor;
    if (page.tools.length > room || (tools.length === MAX_TOOLS && cursor !== undefined)) {
      return { tools, cut: `the server's list goes on past ${MAX_TOOLS} tools; countd offers the first ${MAX_TOOLS}` };
    }
    if (cursor === undefined) return { tools };
  }
  return {
    tools,
    cut: `the server's tool list has more than ${MAX_LIST_PAGES} pages; countd offers the tools of the first ${MAX_LIST_PAGES}`,
  };
}

function cutDescription(description: string): string {
  return excerpt(
    description,
    MAX_DESCRIPTION_CHARS,
    ` [description cut: it has ${description.length} characters; countd offers the first ${MAX_DESCRIPTION_CHARS}]`,
  );
}

export interface Coalesced {
  /** Asks for a run: started at once when none ran within the interval, else once, later. */
  request(): void;
  /** No more runs (the connection closed). */
  stop(): void;
}

/**
 * `run` at most once per `intervalMs` and one at a time, however often it is requested: one in
 * flight and one pending at most, the pending one standing for every request made meanwhile.
 */
export function coalesced(run: () => Promise<void>, intervalMs: number): Coalesced {
  let running = false;
  let pending = false;
  let stopped = false;
  let lastStart = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  const start = () => {
    timer = undefined;
    if (stopped) return;
    running = true;
    lastStart = Date.now();
    void run().finally(() => {
      running = false;
      if (pending) {
        pending = false;
        schedule();
      }
    });
  };
  const schedule = () => {
    if (stopped || timer) return;
    timer = setTimeout(start, Math.max(0, lastStart + intervalMs - Date.now()));
  };
  return {
    request: () => {
      if (running) pending = true;
      else schedule();
    },
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
