import { AT_FORM, parseAt } from "../jobs/schedule.js";

/**
 * The instant a rehearsal's prompt sees, as `countd rehearse --at` and the console's `at` give it:
 * an instant (2026-12-05T09:00:00Z, or with an offset), or a local time in the job's zone
 * (2026-12-05T09:00). `field` names where it came from in the error.
 */
export function rehearsalAt(value: string, timezone: string, field: string): Date {
  try {
    if (!AT_FORM.test(value)) throw new Error(value);
    return parseAt(value, timezone);
  } catch {
    throw new Error(
      `${field} ${JSON.stringify(value)} is not a time: give YYYY-MM-DDTHH:MM[:SS], with Z or ±HH:MM for an instant, else read in ${timezone}`,
    );
  }
}
