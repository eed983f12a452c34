/**
 * Byte-level probes of a node's peer port, by a process that knows no secret: the raw
 * WebSocket upgrade, frame headers that announce any length, garbage, floods and slow
 * sends. The fuzz test and the fault run's probe nemesis both use them; each probe is
 * bounded in bytes and in time and never throws (a refused or reset connection is the
 * expected outcome, reported as data).
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** A probe never keeps a connection longer than this. */
export const PROBE_TIMEOUT_MS_MAX = 10_000;

export interface ProbeTarget {
  readonly host: string;
  readonly port: number;
  /** Speak TLS first (a `wss` peer port); the probe presents no client certificate. */
  readonly tls?: boolean;
}

export interface ProbeOutcome {
  /** Bytes the probe managed to write before the node cut it off or it finished. */
  readonly bytesSent: number;
  /** Bytes the node answered. */
  readonly bytesReceived: number;
  /** The node closed or reset the connection (rather than the probe ending it). */
  readonly closedByNode: boolean;
  /** How long the connection lived, in ms. */
  readonly lifetimeMs: number;
}

/** The HTTP request that upgrades a connection to a WebSocket at `path`. */
export function upgradeRequest(target: ProbeTarget, path: string): Buffer {
  const key = randomBytes(16).toString('base64');
  return Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${target.host}:${target.port}\r\n` +
    'Upgrade: websocket\r\nConnection: Upgrade\r\n' +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
}

export interface FrameHeaderFields {
  /** 0x1 text, 0x2 binary, 0x8 close, 0x9 ping... */
  readonly opcode: number;
  /** The payload length announced, up to 2^53 - 1 (the wire allows 2^63 - 1). */
  readonly length: number;
  readonly fin?: boolean;
  /** Client frames must be masked (RFC 6455 §5.1); an unmasked one is a protocol error. */
  readonly masked?: boolean;
}

/** A WebSocket frame header (RFC 6455 §5.2) announcing `length` bytes, with its mask key. */
export function frameHeader(fields: FrameHeaderFields): Buffer {
  const { opcode, length } = fields;
  const first = ((fields.fin ?? true) ? 0x80 : 0) | (opcode & 0x0f);
  const mask = (fields.masked ?? true) ? 0x80 : 0;
  let header: Buffer;
  if (length < 126) {
    header = Buffer.from([first, mask | length]);
  } else if (length < 0x10000) {
    header = Buffer.alloc(4);
    header.writeUInt8(first, 0);
    header.writeUInt8(mask | 126, 1);
    header.writeUInt16BE(length, 2);
  } else {
    header = Buffer.alloc(10);
    header.writeUInt8(first, 0);
    header.writeUInt8(mask | 127, 1);
    header.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
    header.writeUInt32BE(length >>> 0, 6);
  }
  return mask === 0 ? header : Buffer.concat([header, Buffer.from([1, 2, 3, 4])]);
}

/** A whole masked frame carrying `payload`. */
export function frame(opcode: number, payload: Uint8Array): Buffer {
  const header = frameHeader({ opcode, length: payload.length });
  const masked = Buffer.from(payload);
  const key = header.subarray(header.length - 4);
  for (let i = 0; i < masked.length; i++) masked[i] = (masked[i] ?? 0) ^ (key[i % 4] ?? 0);
  return Buffer.concat([header, masked]);
}

/** One write of a script: bytes, then an optional pause before the next one. */
export interface ScriptStep {
  readonly bytes: Uint8Array;
  readonly pauseMs?: number;
}

function open(target: ProbeTarget): Socket {
  if (target.tls !== true) return connect({ host: target.host, port: target.port });
  return tlsConnect({ host: target.host, port: target.port, rejectUnauthorized: false });
}

/**
 * Connects, writes the script (pausing where it says), then waits up to `lingerMs` for the
 * node to close. Resolves with what happened; never rejects.
 */
export function runScript(target: ProbeTarget, script: readonly ScriptStep[],
  lingerMs = 200): Promise<ProbeOutcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = open(target);
    let bytesSent = 0;
    let bytesReceived = 0;
    let closedByNode = false;
    let ended = false;
    let timer: NodeJS.Timeout | null = null;
    const finish = () => {
      if (ended) return;
      ended = true;
      if (timer !== null) clearTimeout(timer);
      clearTimeout(cap);
      socket.destroy();
      resolve({ bytesSent, bytesReceived, closedByNode, lifetimeMs: Date.now() - started });
    };
    const cap = setTimeout(finish, PROBE_TIMEOUT_MS_MAX);
    socket.on('error', () => {
      closedByNode = true;
      finish();
    });
    socket.on('data', (chunk: Buffer) => {
      bytesReceived += chunk.length;
    });
    socket.on('close', () => {
      if (!ended) closedByNode = true;
      finish();
    });
    const writeFrom = (at: number) => {
      if (ended) return;
      const step = script[at];
      if (step === undefined) {
        timer = setTimeout(finish, lingerMs);
        return;
      }
      socket.write(step.bytes, () => {
        bytesSent += step.bytes.length;
      });
      timer = setTimeout(() => writeFrom(at + 1), step.pauseMs ?? 0);
    };
    socket.once(target.tls === true ? 'secureConnect' : 'connect', () => writeFrom(0));
  });
}
