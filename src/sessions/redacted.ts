import type { Redactor } from "../audit/redact.js";
import type { ChatMessage } from "../providers/types.js";
import type { SessionHistory } from "./store.js";

/**
 * Sessions whose messages are redacted before they are kept, whichever store keeps them (the
 * state directory's files or a shared backend): a secret a tool read or the model repeated
 * reaches neither disk nor the next run's prompt. The current run still holds what it saw.
 */
export function redactedSessions(sessions: SessionHistory, redactor: Redactor): SessionHistory {
  return {
    load: (sessionId) => sessions.load(sessionId),
    append: (sessionId, messages, runId) => sessions.append(sessionId, redactor.redactStrings<ChatMessage[]>(messages), runId),
    dropOldest: (sessionId, count) => sessions.dropOldest(sessionId, count),
    ...(sessions.expect ? { expect: (sessionId: string) => sessions.expect!(sessionId) } : {}),
    ...(sessions.dismiss ? { dismiss: (sessionId: string) => sessions.dismiss!(sessionId) } : {}),
  };
}
