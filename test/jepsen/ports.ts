/**
 * Loopback ports for nodes whose ports must be known before they start: a cluster's peer
 * table names every member's peer port.
 *
 * A port the kernel picks (`listen(0)`) and the picker then frees lies in the ephemeral range
 * (Linux: 32768-60999), where the local end of any outgoing connection, a peer link or a
 * client's, may take it before the node listens, and hold it for as long as that connection
 * lives: the node then cannot start at all. So ports are taken below that range, and each
 * vitest worker (VITEST_POOL_ID) takes them from a band of its own, so that workers running
 * side by side never hand out the same port; a process outside vitest (the fault-run CLI)
 * has band 0. Within a band, ports are handed out in turn from a random start, each checked
 * free first.
 */
import { createServer } from 'node:net';

const FIRST_PORT = 20_000;
const BAND_PORTS = 1_500;
/** Band 0 and the bands of workers 1 to 7: 20000 to 31999, below the ephemeral range. */
const BANDS = 8;

function band(): number {
  const id = Number(process.env['VITEST_POOL_ID'] ?? 0);
  return Number.isInteger(id) && id >= 1 && id < BANDS ? id : 0;
}

const bandStart = FIRST_PORT + band() * BAND_PORTS;
let nextOffset = Math.floor(Math.random() * BAND_PORTS);

function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A loopback port nothing listens on now, from this process's band. */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < BAND_PORTS; tried++) {
    const port = bandStart + (nextOffset++ % BAND_PORTS);
    if (await listenable(port)) return port;
  }
  throw new Error(`no free loopback port in ${bandStart}..${bandStart + BAND_PORTS - 1}`);
}
