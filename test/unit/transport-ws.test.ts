/**
 * The WebSocket transport in one process, on loopback: frames flow only over authenticated
 * links; a node that knows nobody yet (being added) hears a member that dials it and answers
 * on that member's socket; the peer table changes at run time (setPeers).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseClusterSecrets } from '../../host/transport/handshake.js';
import { WsTransport } from '../../host/transport/ws-transport.js';
import { waitFor } from '../helpers/cluster.js';

const SECRET = parseClusterSecrets('unit-transport-secret-0123456789');
const OTHER = parseClusterSecrets('another-transport-secret-0123456789');
const open: WsTransport[] = [];

afterEach(async () => {
  for (const transport of open.splice(0)) await transport.close();
});

interface Node {
  readonly transport: WsTransport;
  readonly received: Array<[string, string]>;
  readonly port: number;
}

async function node(id: string, peers: Array<{ id: string; port: number }>,
  secrets = SECRET): Promise<Node> {
  const received: Array<[string, string]> = [];
  const transport = new WsTransport({ selfId: id, clusterId: 'unit', secrets,
    listen: { host: '127.0.0.1', port: 0 },
    peers: peers.map((p) => ({ id: p.id, host: '127.0.0.1', port: p.port })) });
  open.push(transport);
  await transport.start((from, frame) => received.push([from, Buffer.from(frame).toString()]));
  return { transport, received, port: transport.listenPort };
}

/** Sends `text` every 20 ms until `to` has it (links come up asynchronously). */
async function deliver(from: { id: string; node: Node }, to: Node, text: string):
  Promise<void> {
  await waitFor(`${text} at its peer`, 5000, async () => {
    from.node.transport.send(to === from.node ? '' : toId(to), Buffer.from(text));
    await new Promise((resolve) => setTimeout(resolve, 20));
    return to.received.some(([who, got]) => who === from.id && got === text) ? true : undefined;
  });
}

const ids = new Map<Node, string>();
function toId(node: Node): string {
  return ids.get(node) ?? '';
}

interface RawSocket {
  writableCorked: number;
  writableLength: number;
  _writev: unknown;
  _write: unknown;
}

/**
 * Two linked transports, `a` to `b`, the link up, and `a`'s socket to `b` with its writes
 * counted (`writes()`: calls into the socket's write methods, one system call each).
 */
async function countedLink(): Promise<{ a: Node; b: Node; raw: RawSocket;
  writes: () => number }> {
  const b = await node('b', []);
  const a = await node('a', [{ id: 'b', port: b.port }]);
  ids.set(a, 'a').set(b, 'b');
  await deliver({ id: 'a', node: a }, b, 'ready');
  const raw = (a.transport as unknown as {
    links: Map<string, { socket: { _socket: RawSocket } }> }).links.get('b')!.socket._socket;
  let writes = 0;
  for (const method of ['_writev', '_write'] as const) {
    const original = raw[method] as (...args: unknown[]) => unknown;
    raw[method] = function (this: unknown, ...args: unknown[]) {
      writes++;
      return original.apply(this, args);
    };
  }
  return { a, b, raw, writes: () => writes };
}

describe('the WebSocket transport', () => {
  it('carries frames both ways once the links authenticate', async () => {
    const b = await node('b', []);
    const a = await node('a', [{ id: 'b', port: b.port }]);
    b.transport.setPeers([{ id: 'a', host: '127.0.0.1', port: a.port }]);
    ids.set(a, 'a').set(b, 'b');
    await deliver({ id: 'a', node: a }, b, 'a to b');
    await deliver({ id: 'b', node: b }, a, 'b to a');
  });

  it('writes the frames of one turn to a peer in order, in one system call', async () => {
    const { a, b, writes } = await countedLink();
    const before = b.received.length;
    const frames = Array.from({ length: 50 }, (_, i) => `frame ${i}`);
    for (const frame of frames) a.transport.send('b', Buffer.from(frame));
    await waitFor('every frame', 5000, async () =>
      b.received.length - before >= frames.length ? true : undefined);
    expect(b.received.slice(before).map(([, text]) => text)).toEqual(frames);
    expect(writes()).toBe(1);
  });

  it('writes the frames held for the turn at once on flush, before the loop blocks', async () => {
    const { a, b, raw, writes } = await countedLink();
    const before = b.received.length;
    const frames = ['append 1', 'append 2', 'append 3'];
    for (const frame of frames) a.transport.send('b', Buffer.from(frame));
    expect([raw.writableCorked, writes()]).toEqual([1, 0]);
    a.transport.flush();
    // Written in this call, in one write, as a leader does before an fsync on the loop.
    expect([raw.writableCorked, raw.writableLength, writes()]).toEqual([0, 0, 1]);
    a.transport.send('b', Buffer.from('after'));
    await waitFor('every frame', 5000, async () =>
      b.received.length - before >= frames.length + 1 ? true : undefined);
    expect(b.received.slice(before).map(([, text]) => text)).toEqual([...frames, 'after']);
    expect(writes()).toBe(2);
  });

  it('lets a node that knows nobody answer a member on the socket it dialled', async () => {
    const joiner = await node('j', []);
    const leader = await node('l', [{ id: 'j', port: joiner.port }]);
    ids.set(joiner, 'j').set(leader, 'l');
    await deliver({ id: 'l', node: leader }, joiner, 'append');
    await deliver({ id: 'j', node: joiner }, leader, 'append response');
  });

  it('drops a peer removed from the table, and dials one added', async () => {
    const b = await node('b', []);
    const c = await node('c', []);
    const a = await node('a', [{ id: 'b', port: b.port }]);
    ids.set(a, 'a').set(b, 'b').set(c, 'c');
    await deliver({ id: 'a', node: a }, b, 'before');
    a.transport.setPeers([{ id: 'c', host: '127.0.0.1', port: c.port }]);
    await deliver({ id: 'a', node: a }, c, 'to the new member');
    const dropped = a.transport.droppedFrames;
    a.transport.send('b', Buffer.from('after removal'));
    expect(a.transport.droppedFrames).toBe(dropped + 1);
  });

  it('carries nothing between nodes with different secrets', async () => {
    const b = await node('b', [], OTHER);
    const a = await node('a', [{ id: 'b', port: b.port }]);
    for (let i = 0; i < 20; i++) {
      a.transport.send('b', Buffer.from('nope'));
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(b.received).toEqual([]);
    // a dialled: b's challenge proved a secret a does not hold, so a refused, and b heard it.
    expect(a.transport.stats.refusals['handshake-secret'] ?? 0).toBeGreaterThan(0);
    expect(b.transport.stats.refusals['handshake-refused-by-peer'] ?? 0).toBeGreaterThan(0);
  });
});
