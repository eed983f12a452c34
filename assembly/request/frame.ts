/**
 * The request frame the host writes into the input region (docs/codec.md, "Requests"):
 *   u8 route, u8 method, u8 requestFlags, string tenant, string rawNs, string rawKey,
 *   string transactionId, u32 bodyLen, body
 * Read with bounds checks; anything malformed is the host's bug, reported as PARSE_INVALID
 * with a reason and never a trap. Strings the host resolved must be well-formed UTF-8, so
 * that every string a command carries is.
 */
import {
  ROUTE_KV_BATCH, ROUTE_KV_PATH, ROUTE_TRANSACTION, METHOD_GET, METHOD_DELETE, REQ_HAS_QUERY,
  REQ_HAS_BODY, REQ_REQUIRE_GRANT, TENANT_BYTES_MAX, TRANSACTION_ID_BYTES_MAX,
} from '../abi';
import { Reader } from '../buffers';
import { isUtf8 } from './scan';

export let route: i32 = 0;
export let method: i32 = 0;
export let requestFlags: i32 = 0;
export let tenantPtr: usize = 0;
export let tenantLen: i32 = 0;
export let rawNsPtr: usize = 0;
export let rawNsLen: i32 = 0;
export let rawKeyPtr: usize = 0;
export let rawKeyLen: i32 = 0;
export let transactionIdPtr: usize = 0;
export let transactionIdLen: i32 = 0;
export let framedBodyPtr: usize = 0;
export let framedBodyLen: i32 = 0;

const ALL_REQUEST_FLAGS: i32 = REQ_HAS_QUERY | REQ_HAS_BODY | REQ_REQUIRE_GRANT;

function readHeader(rd: Reader): void {
  route = rd.u8();
  method = rd.u8();
  requestFlags = rd.u8();
  if (rd.failed) return;
  if (route < ROUTE_KV_BATCH || route > ROUTE_TRANSACTION) rd.fail('bad route');
  else if ((route == ROUTE_KV_PATH) != (method != 0)) rd.fail('bad method');
  else if (method != 0 && (method < METHOD_GET || method > METHOD_DELETE)) rd.fail('bad method');
  else if ((requestFlags & ~ALL_REQUEST_FLAGS) != 0) rd.fail('bad request flags');
  else if (route != ROUTE_KV_PATH && (requestFlags & REQ_HAS_QUERY) != 0) {
    rd.fail('a query flag off the path route');
  }
}

function readStrings(rd: Reader): void {
  tenantPtr = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  tenantLen = <i32>rd.lastLen;
  rawNsPtr = rd.bytes(u32.MAX_VALUE, 'namespace');
  rawNsLen = <i32>rd.lastLen;
  rawKeyPtr = rd.bytes(u32.MAX_VALUE, 'key');
  rawKeyLen = <i32>rd.lastLen;
  transactionIdPtr = rd.bytes(<u32>TRANSACTION_ID_BYTES_MAX, 'transaction id');
  transactionIdLen = <i32>rd.lastLen;
  if (rd.failed) return;
  if (tenantLen == 0) rd.fail('empty tenant');
  else if (!isUtf8(tenantPtr, tenantLen) || !isUtf8(rawNsPtr, rawNsLen) ||
    !isUtf8(rawKeyPtr, rawKeyLen) || !isUtf8(transactionIdPtr, transactionIdLen)) {
    rd.fail('a string that is not UTF-8');
  } else if ((route == ROUTE_TRANSACTION) != (transactionIdLen > 0)) {
    rd.fail('a transaction id belongs to the transaction route only');
  } else if (route != ROUTE_KV_PATH && (rawNsLen > 0 || rawKeyLen > 0)) {
    rd.fail('a namespace or key off the path route');
  }
}

/** One reader for every frame: reading a request allocates nothing. */
const rd = new Reader(0, 0);

/** Reads the frame of `len` bytes at `start`; returns the reason it is malformed, or ''. */
export function readFrame(start: usize, len: usize): string {
  rd.pos = start;
  rd.end = start + len;
  rd.failed = false;
  rd.clearWhy();
  readHeader(rd);
  readStrings(rd);
  let bodyLen = rd.u32();
  if (!rd.failed && !rd.has(<usize>bodyLen)) return rd.why;
  if (rd.failed) return rd.why;
  framedBodyPtr = rd.pos;
  framedBodyLen = <i32>bodyLen;
  if (bodyLen > 0 && (requestFlags & REQ_HAS_BODY) == 0) return 'a body without the body flag';
  if (rd.end - rd.pos != <usize>bodyLen) return 'trailing bytes';
  return '';
}
