import { expect } from "vitest";
import { DeliveryError } from "../../src/delivery/errors.js";

/** The DeliveryError a send rejects with; fails the test when it resolves or rejects otherwise. */
export async function deliveryFailure(promise: Promise<unknown>): Promise<DeliveryError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DeliveryError);
  return err as DeliveryError;
}
