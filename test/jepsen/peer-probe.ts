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
/** Bytes of the node's answer a probe keeps. */
export const RECEIVED_KEPT_BYTES = 4096;

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
  /** The first RECEIVED_KEPT_BYTES of them (an HTTP status line, handshake messages). */
  readonly received: Buffer;
  /** The node closed or reset the connection (rather than the probe ending it). */
  readonly closedByNode: boolean;
  /** How long the connection lived, in ms. */
  readonly lifetimeMs: number;
}

/**
 * The handshake part of bytes a dialler sent: its upgrade request and its first two frames
 * (hello and proof), without the Raft frames that followed. Null when they are incomplete.
 */
export function handshakePart(recorded: Buffer): Buffer | null {
  const headEnd = recorded.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  let at = headEnd + 4;
  for (let frames = 0; frames < 2; frames++) {
    if (at + 2 > recorded.length) return null;
    const short = (recorded[at + 1] ?? 0) & 0x7f;
    const masked = ((recorded[at + 1] ?? 0) & 0x80) !== 0;
    const extra = short === 126 ? 2 : short === 127 ? 8 : 0;
    if (at + 2 + extra > recorded.length) return null;
    const length = short === 126 ? recorded.readUInt16BE(at + 2)
      : short === 127 ? Number(recorded.readBigUInt64BE(at + 2)) : short;
    at += 2 + extra + (masked ? 4 : 0) + length;
  }
  return at <= recorded.length ? recorded.subarray(0, at) : null;
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
    const kept: Buffer[] = [];
    let closedByNode = false;
    let ended = false;
    let timer: NodeJS.Timeout | null = null;
    const finish = () => {
      if (ended) return;
      ended = true;
      if (timer !== null) clearTimeout(timer);
      clearTimeout(cap);
      socket.destroy();
      const received = Buffer.concat(kept).subarray(0, RECEIVED_KEPT_BYTES);
      resolve({ bytesSent, bytesReceived, received, closedByNode,
        lifetimeMs: Date.now() - started });
    };
    const cap = setTimeout(finish, PROBE_TIMEOUT_MS_MAX);
    socket.on('error', () => {
      closedByNode = true;
      finish();
    });
    socket.on('data', (chunk: Buffer) => {
      if (bytesReceived < RECEIVED_KEPT_BYTES) kept.push(chunk);
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

// ---------------------------------------------------------------- the catalogue

/** What a probe may know of the cluster: everything but the secret. */
export interface ProbeContext {
  readonly clusterId: string;
  /** The member id of the node under probe. */
  readonly targetId: string;
  /** Another member's id, for probes that claim to be it. */
  readonly memberId: string;
  /** A raw Raft frame that would be valid from `memberId` (sent before any handshake). */
  readonly raftFrame: Uint8Array;
  /** Bytes a real member once sent on a link to the target (a recorded handshake), if any. */
  readonly recorded: () => Buffer | null;
}

export const PROBE_KINDS = [
  'random-bytes', 'http-garbage', 'huge-headers', 'plain-http', 'wrong-path', 'huge-frame',
  'truncated-frame', 'random-frames', 'flood', 'junk-text', 'long-hello', 'forged-proof',
  'wrong-cluster', 'raft-before-handshake', 'raft-after-hello', 'replay', 'slow-upgrade',
  'slow-hello', 'idle',
] as const;
export type ProbeKind = (typeof PROBE_KINDS)[number];

/** Probes that last until the node's handshake deadline cuts them. */
export const SLOW_PROBES: readonly ProbeKind[] = ['slow-upgrade', 'slow-hello', 'idle'];

function seededBytes(random: () => number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

function int(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

function b64(random: () => number): string {
  return seededBytes(random, 32).toString('base64url');
}

/** One byte at a time, `pauseMs` apart. */
function trickle(bytes: Buffer, pauseMs: number): ScriptStep[] {
  return [...bytes].map((byte) => ({ bytes: Buffer.from([byte]), pauseMs }));
}

function hello(context: ProbeContext, random: () => number, cluster = context.clusterId): Buffer {
  return Buffer.from(JSON.stringify({ t: 'hello', v: 1, cluster, from: context.memberId,
    to: context.targetId, nonce: b64(random) }));
}

/** The script of one probe of `kind`, drawn from `random` (replayable from its seed). */
export function probeScript(kind: ProbeKind, random: () => number, target: ProbeTarget,
  context: ProbeContext): ScriptStep[] {
  const upgrade = { bytes: upgradeRequest(target, '/raft/v1'), pauseMs: 50 };
  switch (kind) {
    case 'random-bytes': return [{ bytes: seededBytes(random, int(random, 1, 4096)) }];
    case 'http-garbage':
      return [{ bytes: Buffer.concat([seededBytes(random, int(random, 1, 200)),
        Buffer.from('\r\n\r\n')]) }];
    case 'huge-headers':
      return [{ bytes: Buffer.from(`GET /raft/v1 HTTP/1.1\r\nHost: x\r\nX-Pad: ` +
        `${'a'.repeat(int(random, 5000, 64_000))}\r\n\r\n`) }];
    case 'plain-http': return [{ bytes: Buffer.from('GET /raft/v1 HTTP/1.1\r\nHost: x\r\n\r\n') }];
    case 'wrong-path': return [{ bytes: upgradeRequest(target, '/raft/n2') }];
    case 'huge-frame': {
      const lengths = [2 ** 40, 2 ** 53 - 1, 2 ** 31, 80 * 1024 * 1024, 65_536, 1 << 20];
      const length = lengths[int(random, 0, lengths.length - 1)] ?? 2 ** 40;
      return [upgrade, { bytes: frameHeader({ opcode: int(random, 1, 2), length }) },
        { bytes: seededBytes(random, int(random, 0, 8192)) }];
    }
    case 'truncated-frame':
      return [upgrade, { bytes: frameHeader({ opcode: 2, length: 2 ** 40 })
        .subarray(0, int(random, 1, 9)) }];
    case 'random-frames':
      return [upgrade, ...Array.from({ length: int(random, 1, 8) }, () => ({
        bytes: Buffer.concat([frameHeader({ opcode: int(random, 0, 15),
          length: int(random, 0, 300), fin: random() < 0.7, masked: random() < 0.9 }),
        seededBytes(random, int(random, 0, 300))]) }))];
    case 'flood':
      return [upgrade, ...Array.from({ length: 16 }, () =>
        ({ bytes: seededBytes(random, 16 * 1024) }))];
    case 'junk-text':
      return [upgrade, { bytes: frame(1, seededBytes(random, int(random, 0, 400))) }];
    case 'long-hello':
      return [upgrade, { bytes: frame(1, Buffer.from(JSON.stringify({ t: 'hello', v: 1,
        pad: 'x'.repeat(int(random, 500, 1500)) }))) }];
    case 'forged-proof':
      return [upgrade, { bytes: frame(1, hello(context, random)), pauseMs: 100 },
        { bytes: frame(1, Buffer.from(JSON.stringify({ t: 'proof', v: 1,
          proof: b64(random) }))) }];
    case 'wrong-cluster':
      return [upgrade, { bytes: frame(1, hello(context, random, 'another-cluster')) }];
    case 'raft-before-handshake': return [upgrade, { bytes: frame(2, context.raftFrame) }];
    case 'raft-after-hello':
      return [upgrade, { bytes: frame(1, hello(context, random)), pauseMs: 100 },
        { bytes: frame(2, context.raftFrame) }];
    case 'replay': {
      const whole = context.recorded();
      const recorded = whole === null ? null : handshakePart(whole);
      return recorded === null ? [upgrade, { bytes: frame(1, hello(context, random)) }]
        : [{ bytes: recorded }];
    }
    case 'slow-upgrade': return trickle(upgradeRequest(target, '/raft/v1'), 250);
    case 'slow-hello': return [upgrade, ...trickle(frame(1, hello(context, random)), 250)];
    case 'idle': return [upgrade, { bytes: Buffer.alloc(0), pauseMs: 8000 }];
  }
}
