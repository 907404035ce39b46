import { ToolRefusal } from "./paths.js";
import { excerpt } from "../text.js";

/** The refusal of a command line, quoting the part refused. */
export function refusal(what: string, why: string): ToolRefusal {
  return new ToolRefusal(`refused: ${shown(what)} (${why})`);
}

/** A command quoted back in a refusal, on one line and short enough to read. */
export function shown(text: string): string {
  return excerpt(text.replace(/\s*\n\s*/g, " ").trim(), 120);
}
