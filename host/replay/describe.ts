/**
 * A log entry as JSON a person or a program can read: its index, term and time, its kind,
 * and for a normal entry the envelope's origin and sequence number and the command decoded
 * (host/machine/command-decode.ts); for a config entry the configuration it carries. Bytes
 * that have no reading are shown as hex with the reason, never dropped. Pure.
 */
import { decodeConfigEntry } from '../core/raft/configuration.js';
import type { Entry } from '../core/raft/types.js';
import { decodeCommand } from '../machine/command-decode.js';
import type { Command } from '../machine/commands.js';
import { decodeEnvelope } from '../node/envelope.js';

/** Hex shown of bytes that do not decode, at most. */
const UNREADABLE_HEX_BYTES_MAX = 64;

export interface EntryDescription {
  readonly index: number;
  readonly term: number;
  readonly timeMs: number;
  readonly time: string;
  readonly type: Entry['type'];
  readonly dataBytes: number;
  readonly origin?: { readonly nodeId: string; readonly incarnation: number;
    readonly seq: number };
  readonly command?: Command;
  readonly config?: unknown;
  readonly unreadable?: { readonly reason: string; readonly hex: string };
}

function hexOf(bytes: Uint8Array): string {
  return Buffer.from(bytes.subarray(0, UNREADABLE_HEX_BYTES_MAX)).toString('hex') +
    (bytes.length > UNREADABLE_HEX_BYTES_MAX ? '…' : '');
}

/** The command of a normal entry, or null when its envelope or command has no reading. */
export function entryCommand(entry: Entry): Command | null {
  if (entry.type !== 'normal') return null;
  const envelope = decodeEnvelope(entry.data);
  if (envelope === null) return null;
  const decoded = decodeCommand(envelope.command);
  return decoded.ok ? decoded.command : null;
}

export function describeEntry(entry: Entry): EntryDescription {
  const base = {
    index: entry.index, term: entry.term, timeMs: entry.timeMs,
    time: new Date(entry.timeMs).toISOString(), type: entry.type,
    dataBytes: entry.data.byteLength,
  };
  if (entry.type === 'empty') return base;
  if (entry.type === 'config') {
    const config = decodeConfigEntry(entry.data);
    if (config !== null) return { ...base, config };
    return { ...base, unreadable: { reason: 'not a valid configuration', hex: hexOf(entry.data) } };
  }
  const envelope = decodeEnvelope(entry.data);
  if (envelope === null) {
    return { ...base, unreadable: { reason: 'no valid envelope (applies as a no-op)',
      hex: hexOf(entry.data) } };
  }
  const origin = { ...envelope.origin, seq: envelope.seq };
  const decoded = decodeCommand(envelope.command);
  if (!decoded.ok) {
    return { ...base, origin, unreadable: { reason: decoded.reason,
      hex: hexOf(envelope.command) } };
  }
  return { ...base, origin, command: decoded.command };
}
