/**
 * parseRequest: a request frame in, a CMD_CALL command or a refusal out (docs/codec.md,
 * "Requests"), deciding exactly what host/http/validate.ts and transaction.ts decide, in
 * their order: the route's own checks, then the body's syntax and depth (any JSON error
 * anywhere first), then the semantics of the route, operation by operation.
 *
 * Two passes over the body: syntax.ts checks all of it, then the walk here reads what the
 * route needs in place, writing the command into the output region as it goes. Values are
 * copied once (compacted), keys decoded once; nothing allocates per token or per op.
 */
import {
  CMD_CALL, SHAPE_BATCH, SHAPE_SINGLE, SHAPE_TRANSACTION, ROUTE_KV_BATCH, ROUTE_KV_PATH,
  METHOD_GET, METHOD_PUT, REQ_HAS_QUERY, REQ_HAS_BODY, REQ_REQUIRE_GRANT, CALL_REQUIRE_GRANT,
  PARSE_INVALID, TRANSACTION_OPS_MAX, TRANSACTION_KEYS_MAX,
} from '../abi';
import { inputPtr, outputLen, resetOutput, putU8, putString } from '../buffers';
import {
  readFrame, route, method, requestFlags, tenantPtr, tenantLen, rawNsPtr, rawNsLen, rawKeyPtr,
  rawKeyLen, transactionIdPtr, transactionIdLen, framedBodyPtr, framedBodyLen,
} from './frame';
import { checkSyntax, SYNTAX_ERROR, SYNTAX_TOO_DEEP } from './syntax';
import { skipWs } from './scan';
import { setBody, bodyStart, bodyEnd, isObject, isArray, isNullish, firstElement } from './body';
import {
  walkObject, clearFields, field, F_OPERATIONS, F_REQUIRED_LEASES, F_KV, F_OP, F_NS,
  F_NAMESPACE, F_KEY,
} from './fields';
import { validateList, listOpCount } from './list';
import {
  noTenantFields, startOp, keyedOp, opWriteCode, opAux, opAuxLen,
} from './op';
import {
  isNamespace, writeNamespace, keyFromBytes, NAME_GET, NAME_PUT, NAME_DELETE, nsOff, nsLen,
  keyOff, keyLen,
} from './keys';
import { percentDecode } from './percent';
import { startCommand, finishCommand, writeU8, writeU32, writeI64, writeString } from './command';
import { resetWrites, writeCount, addWrite } from './writes';
import { callGrowth } from './growth';
import { maxOpsPerCall, maxKeysPerCall, maxReadBytes } from './limits';
import {
  setAt, resetRefusal, emitRefusal, refuseNotJson, refuseTooDeep, refuseBody, refusePlain,
  refuseFieldInPath, WHAT_PATH_KEY,
} from './refusal';

/** The percent-decoded namespace or key of a path route; grows with the longest seen. */
let decoded: usize = heap.alloc(256);
let decodedCap: usize = 256;

function decodeRoom(len: i32): usize {
  if (<usize>len > decodedCap) {
    decodedCap = max(decodedCap << 1, <usize>len);
    decoded = heap.realloc(decoded, decodedCap);
  }
  return decoded;
}

/** Syntax and depth of the whole body; on success the body's root value is at bodyStart. */
function parseBody(): bool {
  let start = framedBodyPtr, end = framedBodyPtr + <usize>framedBodyLen;
  let verdict = checkSyntax(start, end);
  if (verdict == SYNTAX_ERROR) return refuseNotJson();
  if (verdict == SYNTAX_TOO_DEEP) return refuseTooDeep();
  setBody(skipWs(start, end), end);
  return true;
}

/** `POST /api/v1/kv`: `{"operations":[...]}` or a bare array. */
function batchRoute(): bool {
  if (!parseBody()) return false;
  let list = bodyStart;
  if (isObject(list)) {
    walkObject(list, bodyEnd);
    if (!noTenantFields()) return false;
    list = field(F_OPERATIONS);
  }
  if (!isArray(list)) return refuseBody('the body must be {"operations":[...]} or an array');
  return validateList(list, maxOpsPerCall, maxKeysPerCall, false);
}

/** A list field of the transaction wire: absent or null is empty; else an array. */
function listField(p: usize, name: string): bool {
  if (isNullish(p) || isArray(p)) return true;
  return refuseBody(name + ' must be an array');
}

/** `POST /api/v1/transaction {operations, requiredLeases, kv}`: only kv, in this build. */
function transactionRoute(): bool {
  if (!parseBody()) return false;
  if (!isObject(bodyStart)) {
    return refuseBody('the body must be {operations, requiredLeases, kv}');
  }
  walkObject(bodyStart, bodyEnd);
  let operations = field(F_OPERATIONS);
  let leases = field(F_REQUIRED_LEASES);
  let kv = field(F_KV);
  if (!listField(operations, 'operations') || !listField(leases, 'requiredLeases') ||
    !listField(kv, 'kv')) return false;
  if ((isArray(operations) && firstElement(operations) != 0) ||
    (isArray(leases) && firstElement(leases) != 0)) {
    return refusePlain('queue_not_available',
      'push, ack and leases need the queue, which is not part of this build; send only kv');
  }
  return validateList(isArray(kv) ? kv : 0, min(TRANSACTION_OPS_MAX, maxOpsPerCall),
    min(TRANSACTION_KEYS_MAX, maxKeysPerCall), true);
}

/** The body of a path route: none, or an object without URL or tenant fields. */
function pathBody(): bool {
  if ((requestFlags & REQ_HAS_BODY) == 0) {
    clearFields();
  } else {
    if (!parseBody()) return false;
    if (!isObject(bodyStart)) return refuseBody('a path route body is a JSON object');
    walkObject(bodyStart, bodyEnd);
  }
  if (field(F_OP) != 0) return refuseFieldInPath('op');
  if (field(F_NS) != 0) return refuseFieldInPath('ns');
  if (field(F_NAMESPACE) != 0) return refuseFieldInPath('namespace');
  if (field(F_KEY) != 0) return refuseFieldInPath('key');
  return noTenantFields();
}

/** `GET|PUT|DELETE /api/v1/kv/:ns/*key`: one op on one key, named by the URL. */
function pathRoute(): bool {
  if ((requestFlags & REQ_HAS_QUERY) != 0) {
    return refusePlain('kv_no_query_string',
      'the path routes refuse any query string; prefix reads live in the POST body');
  }
  if (!pathBody()) return false;
  writeU32(1);
  let name = method == METHOD_GET ? NAME_GET : method == METHOD_PUT ? NAME_PUT : NAME_DELETE;
  let flagsAt = startOp(name);
  let nsLen = percentDecode(rawNsPtr, rawNsLen, decodeRoom(rawNsLen));
  if (nsLen < 0 || !isNamespace(decoded, nsLen)) {
    return refusePlain('kv_bad_namespace',
      'the namespace must match ^[a-z0-9][a-z0-9._-]{0,63}$');
  }
  writeNamespace(decoded, nsLen);
  let keyLen = percentDecode(rawKeyPtr, rawKeyLen, decodeRoom(rawKeyLen));
  if (keyLen < 0) return refusePlain('kv_bad_key', 'the key is not valid percent-encoding');
  if (!keyFromBytes(decoded, keyLen, WHAT_PATH_KEY)) return false;
  if (!keyedOp(name, flagsAt)) return false;
  // The one op writes or not; there is nothing for it to collide with.
  if (opWriteCode != 0) addWrite(opWriteCode, nsOff, nsLen, keyOff, keyLen, opAux, opAuxLen);
  return true;
}

/** The CMD_CALL fields before the ops: shape, transaction id, flags, read ceiling, tenant. */
function writeCallHead(): void {
  writeU8(CMD_CALL);
  let shape = route == ROUTE_KV_BATCH ? SHAPE_BATCH
    : route == ROUTE_KV_PATH ? SHAPE_SINGLE : SHAPE_TRANSACTION;
  writeU8(shape);
  writeString(transactionIdPtr, transactionIdLen);
  writeU8((requestFlags & REQ_REQUIRE_GRANT) != 0 ? CALL_REQUIRE_GRANT : 0);
  writeI64(maxReadBytes);
  writeString(tenantPtr, tenantLen);
}

/** Parses the request frame of `len` bytes in the input region; returns the output length. */
export function parseRequestFrame(len: i32): i32 {
  resetRefusal();
  resetWrites();
  setAt(-1);
  let why = readFrame(inputPtr, <usize>max(len, 0));
  if (why.length > 0) {
    resetOutput();
    putU8(PARSE_INVALID);
    putString(why);
    return <i32>outputLen;
  }
  startCommand();
  writeCallHead();
  let ok = route == ROUTE_KV_PATH ? pathRoute()
    : route == ROUTE_KV_BATCH ? batchRoute() : transactionRoute();
  if (!ok) {
    emitRefusal();
    return <i32>outputLen;
  }
  let opCount = route == ROUTE_KV_PATH ? 1 : listOpCount;
  finishCommand(writeCount > 0, opCount, callGrowth(tenantPtr, tenantLen));
  return <i32>outputLen;
}
