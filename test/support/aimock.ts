import { LLMock } from "@copilotkit/aimock";
import { afterAll, beforeAll, beforeEach } from "vitest";

type MockOptions = NonNullable<ConstructorParameters<typeof LLMock>[0]>;

/**
 * An aimock LLM server on loopback for the enclosing describe block: started before its tests,
 * stopped after them, with fixtures, journal, counters and chaos cleared before each test.
 * Hooks registered after this call see the server started (`mock.url` is set).
 */
export function useAimock(options: MockOptions = {}): LLMock {
  const mock = new LLMock({ port: 0, host: "127.0.0.1", ...options });
  beforeAll(async () => {
    await mock.start();
  });
  afterAll(async () => {
    await mock.stop();
  });
  beforeEach(() => {
    mock.clearFixtures();
    mock.clearRequests();
    mock.resetMatchCounts();
    mock.clearChaos();
  });
  return mock;
}
