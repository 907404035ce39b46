import type { Server as HttpServer } from "node:http";
import type { AddressInfo, Server as NetServer } from "node:net";

/** Starts `server` on a free port of 127.0.0.1 and resolves with that port. */
export async function listenLoopback(server: HttpServer | NetServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** Closes `server`, cutting the connections still open (a client kept alive, a hung request). */
export async function closeServer(server: HttpServer | NetServer): Promise<void> {
  if ("closeAllConnections" in server) server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
