/**
 * fast-check generators of HTTP requests for the request-parser parity test: valid and
 * invalid operations of every kind, every optional field present, absent, null or of the
 * wrong type, duplicate, unknown and tenant fields, wrong roots, deep nesting around the
 * bound, unicode and escaped keys, invalid UTF-8 inside strings, path routes with
 * percent-encoding and query strings, and transaction bodies.
 *
 * A body is generated as a tree of JSON nodes and written out as bytes under a seeded
 * *style*: whitespace between tokens, which characters of a string are escaped (and how),
 * how each number is spelled (`15`, `1.5e1`, `150E-1`, `15.000`...). Every number is one a
 * double carries exactly (at most 13 significant digits, exponent within +-290), so the
 * reference (which reads numbers through a double) and the machine (which reads them
 * exactly) must agree; the exact-number differences are tested on their own.
 */
import fc from 'fast-check';
import { createUnitRandom } from '../../host/core/prng.js';
import type { PathMethod, RequestFrame } from '../../host/machine/request.js';

export type JsonNode =
  /** Emitted as it is: `true`, `null`, `1e400`, garbage. */
  | { readonly k: 'lit'; readonly text: string }
  /** A number a double carries exactly, spelled by the style. */
  | { readonly k: 'num'; readonly value: number }
  /**
   * A string; `bad` byte runs (invalid UTF-8) are inserted raw by the style. A `plain` one
   * is spelled as JSON.stringify spells it whatever the style (a value sized to a bound).
   */
  | {
      readonly k: 'str'; readonly s: string; readonly bad?: readonly Uint8Array[];
      readonly plain?: boolean;
    }
  | { readonly k: 'arr'; readonly items: readonly JsonNode[] }
  | { readonly k: 'obj'; readonly members: ReadonlyArray<readonly [JsonNode, JsonNode]> };

const lit = (text: string): JsonNode => ({ k: 'lit', text });
const num = (value: number): JsonNode => ({ k: 'num', value });
const str = (s: string): JsonNode => ({ k: 'str', s });
const arr = (items: readonly JsonNode[]): JsonNode => ({ k: 'arr', items });
const obj = (members: ReadonlyArray<readonly [string | JsonNode, JsonNode]>): JsonNode => ({
  k: 'obj', members: members.map(([n, v]) => [typeof n === 'string' ? str(n) : n, v] as const),
});

// ---- writing a tree out under a style ----

/** Random choices of one body's spelling, replayable from its seed. */
class Style {
  private readonly next: () => number;
  /**
   * `canonical`: strings and numbers spelled as JSON.stringify spells them (only the
   * whitespace varies), so compact text and the reference's text have the same length.
   */
  constructor(seed: number, private readonly escapeRate: number,
    private readonly wsRate: number, readonly canonical: boolean) {
    this.next = createUnitRandom(seed);
  }
  chance(p: number): boolean { return this.next() < p; }
  pick<T>(xs: readonly T[]): T { return xs[Math.floor(this.next() * xs.length)] as T; }
  ws(): string {
    return this.chance(this.wsRate) ? this.pick([' ', '\n', '\t', '\r\n', '  ', ' \t ']) : '';
  }
  escapes(): boolean { return this.chance(this.escapeRate); }
  /** An integer in 0..n-1. */
  index(n: number): number { return Math.floor(this.next() * n); }
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t',
};

function hex4(unit: number, upper: boolean): string {
  const h = unit.toString(16).padStart(4, '0');
  return '\\u' + (upper ? h.toUpperCase() : h);
}

/** The JSON text of one UTF-16 unit or pair `ch` inside a string. */
function spellChar(ch: string, style: Style, plain: boolean): string {
  if (plain || style.canonical) return JSON.stringify(ch).slice(1, -1);
  const unit = ch.charCodeAt(0);
  const lone = ch.length === 1 && unit >= 0xd800 && unit <= 0xdfff;
  const short = SHORT_ESCAPES[ch];
  if (unit < 0x20 || ch === '"' || ch === '\\' || lone || style.escapes()) {
    if (short !== undefined && style.chance(0.7)) return short;
    if (ch === '/' && style.chance(0.5)) return '\\/';
    let out = '';
    for (let i = 0; i < ch.length; i++) out += hex4(ch.charCodeAt(i), style.chance(0.5));
    return out;
  }
  return ch;
}

function writeString(node: { s: string; bad?: readonly Uint8Array[]; plain?: boolean },
  style: Style,
  out: Array<string | Uint8Array>): void {
  out.push('"');
  const chars = [...node.s];
  const bad = node.bad ?? [];
  const at = bad.map(() => style.index(chars.length + 1));
  for (let i = 0; i <= chars.length; i++) {
    bad.forEach((b, j) => { if (at[j] === i) out.push(b); });
    if (i < chars.length) out.push(spellChar(chars[i]!, style, node.plain === true));
  }
  out.push('"');
}

/** Digits and exponent of a finite number's shortest spelling: value = 0.digits x 10^exp. */
function decompose(v: number): { neg: boolean; digits: string; exp: number } {
  const text = String(Math.abs(v));
  const neg = v < 0 || Object.is(v, -0);
  const [mantissa = '', e = '0'] = text.split('e');
  const [whole = '', frac = ''] = mantissa.split('.');
  let digits = whole + frac;
  let exp = whole.length + Number(e);
  const lead = digits.length - digits.replace(/^0+/, '').length;
  digits = digits.slice(lead);
  exp -= lead;
  digits = digits.replace(/0+$/, '');
  return { neg, digits, exp: digits === '' ? 0 : exp };
}

/** A spelling of v with exactly v's decimal value: plain, scientific, padded or shifted. */
export function spellNumber(v: number, style: Style): string {
  if (style.canonical) return JSON.stringify(v);
  const { neg, digits, exp } = decompose(v);
  const sign = neg ? '-' : '';
  if (digits === '') return sign + style.pick(['0', '0.0', '0e5', '0.000E-2']);
  const form = style.pick(['plain', 'plain', 'sci', 'shift', 'pad']);
  if (form === 'plain' && exp >= -20 && exp <= 25) {
    const text = exp <= 0 ? '0.' + '0'.repeat(-exp) + digits
      : exp >= digits.length ? digits + '0'.repeat(exp - digits.length)
        : digits.slice(0, exp) + '.' + digits.slice(exp);
    return sign + text;
  }
  if (form === 'pad') {
    return sign + digits[0] + '.' + digits.slice(1) + '0'.repeat(1 + (digits.length % 3)) +
      'e' + (exp - 1);
  }
  // d.ddd x 10^(exp-1), or the digits as an integer x 10^(exp-n), mantissa shifted.
  const e = style.pick(['e', 'E']);
  if (form === 'shift') {
    const x = exp - digits.length;
    return sign + digits + e + (x >= 0 ? style.pick(['', '+']) + x : String(x));
  }
  const mantissa = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
  const x = exp - 1;
  return sign + mantissa + e + (x >= 0 ? style.pick(['', '+']) + x : String(x));
}

function writeNode(node: JsonNode, style: Style, out: Array<string | Uint8Array>): void {
  switch (node.k) {
    case 'lit': out.push(node.text); return;
    case 'num': out.push(spellNumber(node.value, style)); return;
    case 'str': writeString(node, style, out); return;
    case 'arr':
      out.push('[' + style.ws());
      node.items.forEach((item, i) => {
        if (i > 0) out.push(style.ws() + ',' + style.ws());
        writeNode(item, style, out);
      });
      out.push(style.ws() + ']');
      return;
    case 'obj':
      out.push('{' + style.ws());
      node.members.forEach(([name, value], i) => {
        if (i > 0) out.push(style.ws() + ',' + style.ws());
        writeNode(name, style, out);
        out.push(style.ws() + ':' + style.ws());
        writeNode(value, style, out);
      });
      out.push(style.ws() + '}');
  }
}

/** The bytes of `node` written under the style of `seed`. */
export function writeJson(node: JsonNode, seed: number, escapeRate = 0.05,
  wsRate = 0.2, canonical = false): Uint8Array {
  const out: Array<string | Uint8Array> = [];
  const style = new Style(seed, escapeRate, wsRate, canonical);
  out.push(style.ws());
  writeNode(node, style, out);
  out.push(style.ws());
  return Buffer.concat(out.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)));
}

// ---- leaves ----

const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>): fc.WeightedArbitrary<T> =>
  ({ weight, arbitrary });

/** Invalid UTF-8 runs, each decoded by Node to one or more U+FFFD. */
const BAD_BYTES = [[0x80], [0xff], [0xc0, 0x80], [0xc3], [0xe0, 0x80], [0xed, 0xa0, 0x80],
  [0xf0, 0x90], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xc3, 0xc3, 0xa9]].map((b) => Uint8Array.from(b));
const badBytes = fc.array(fc.constantFrom(...BAD_BYTES), { minLength: 1, maxLength: 2 });

/** A double with at most 13 significant digits and a moderate exponent. */
const exactDouble: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }),
  fc.constantFrom(0, -0, 0.1, 0.2, 0.3, 1.5, -2.25, 1e21, 1e-7, 1.5e-7, 123456789012.5,
    9007199254740991, -9007199254740991, 4503599627370496, 1e15, 12.5e100, 3e-290),
  fc.tuple(fc.integer({ min: -9_999_999_999_999, max: 9_999_999_999_999 }),
    fc.integer({ min: -40, max: 40 })).map(([m, e]) => Number(`${m}e${e}`)),
);

const anyString = fc.string({ unit: 'binary', maxLength: 6 });

export const KEYS = ['k', 'k1', 'é', '日本', 'a/b', ' ', 'k\u{1F600}', 'K', 'k\u007f', '\u2028'];
const badKey: fc.Arbitrary<JsonNode> = fc.oneof(
  fc.constantFrom(str(''), str('a\u0000b'), str('\u0000'), str('\ud800'), str('a\udc00b'),
    str('\udbff\u0000'), num(7), lit('null'), lit('true'), arr([str('k')]), obj([])),
  fc.constant<JsonNode>({ k: 'str', s: 'k', bad: [Uint8Array.from([0xff])] }),
);

/** Keys that sit around the key byte limits (512 default, 16 small). */
const sizedKey = fc.constantFrom('x'.repeat(512), 'x'.repeat(513), 'é'.repeat(256),
  'é'.repeat(257), '\u{1F600}'.repeat(128), 'x'.repeat(16), 'x'.repeat(17), 'é'.repeat(8),
  'é'.repeat(9), 'x'.repeat(15) + 'é');

export const keyNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(10, fc.constantFrom(...KEYS).map(str)),
  w(2, anyString.filter((s) => s.length > 0).map(str)),
  w(2, badKey),
  w(1, sizedKey.map(str)),
  w(1, fc.tuple(fc.constantFrom(...KEYS), badBytes)
    .map(([s, bad]): JsonNode => ({ k: 'str', s, bad }))),
);

const NAMESPACES = ['a', 'orders', 'b.c-d_e', '0', 'a'.repeat(64)];
export const nsNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(12, fc.constantFrom(...NAMESPACES).map(str)),
  w(2, fc.constantFrom('A', '', '.a', '-a', '_a', 'a'.repeat(65), 'é', 'a b', 'a\u0000')
    .map(str)),
  w(1, fc.constantFrom(num(1), lit('null'), lit('false'), arr([]))),
);

const opName: fc.Arbitrary<JsonNode> = fc.oneof(
  w(20, fc.constantFrom('get', 'getMany', 'getPrefix', 'put', 'putIfAbsent', 'delete', 'incr',
    'check').map(str)),
  w(2, fc.constantFrom('scan', 'Get', '', 'put ', 'getprefix').map(str)),
  w(1, fc.constantFrom(num(1), lit('null'), lit('true'), arr([str('get')]))),
);

/** A JSON value of bounded depth, objects with distinct member names. */
export const valueNode: fc.Arbitrary<JsonNode> = fc.letrec<{ v: JsonNode }>((tie) => ({
  v: fc.oneof({ depthSize: 'small', withCrossShrink: true },
    w(4, fc.constantFrom(lit('null'), lit('true'), lit('false'))),
    w(4, exactDouble.map(num)),
    w(4, anyString.map(str)),
    w(1, fc.tuple(anyString, badBytes).map(([s, bad]) => ({ k: 'str' as const, s, bad }))),
    w(2, fc.array(tie('v'), { maxLength: 4 }).map(arr)),
    w(2, fc.uniqueArray(fc.tuple(anyString, tie('v')), { maxLength: 4, selector: (m) => m[0] })
      .map((ms) => obj(ms))),
  ),
})).v;

/** Values that are refused or sit at a bound. */
const edgeValue: fc.Arbitrary<JsonNode> = fc.oneof(
  fc.constantFrom(lit('1e400'), lit('-1e400'), lit('1' + '0'.repeat(309)),
    lit('179769313486231580793728971405303415079934132710037826936173778980444968292764750946' +
      '649017977587207096330286416692887910946555547851940402630657488671505820681908902000708' +
      '383676273854845817711531764475730270069855571366959622842914819860834936475292719074168' +
      '444365510704342711559699508093042880177904174497792'),
    lit('1.7976931348623157e308'), lit('1.797693134862315807e308'), lit('1e-400'),
    lit('[1,{"a":1e999}]')),
  // Sized around 65,536 (default) and 64 (small limits) bytes of compact JSON.
  fc.constantFrom(65534, 65535, 65536, 65537, 62, 63, 64, 65, 100)
    .map((n): JsonNode => ({ k: 'str', s: 'v'.repeat(n - 2), plain: true })),
  fc.integer({ min: 500, max: 515 }).map((depth) => lit('['.repeat(depth) + ']'.repeat(depth))),
  // A duplicate member inside a value: the last one is what JSON.parse keeps.
  fc.constant(lit('{"a":1,"a":[2]}')),
);

const ttlNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(8, fc.constantFrom(1, 60, 3600).map(num)),
  w(3, fc.constantFrom(220898620800, 220898620801, 0, -1, 1.5, 2 ** 53, 1e20, -0).map(num)),
  w(2, fc.constantFrom(lit('1e400'), str('60'), lit('null'), lit('true'), arr([]))),
);
const boolNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(6, fc.constantFrom(lit('true'), lit('false'))),
  w(2, fc.constantFrom(lit('null'), str('true'), num(1), num(0), obj([]))),
);
const expectNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(8, fc.constantFrom(0, 1, 5, 9007199254740991).map(num)),
  w(3, fc.constantFrom(2 ** 53, -1, 0.5, -0, 1e3, 2.5).map(num)),
  w(2, fc.constantFrom(lit('null'), str('1'), lit('true'), lit('1e400'))),
);
const decimalNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(8, exactDouble.map(num)),
  w(2, fc.constantFrom(lit('1e400'), lit('-1e400'), lit('null'), str('1'), lit('true'))),
);
const limitNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(6, fc.constantFrom(1, 3, 5, 6, 100, 1000, 1001).map(num)),
  w(3, fc.constantFrom(0, -3, 0.5, 1.9, 1e6, -0, 5.5).map(num)),
  w(2, fc.constantFrom(lit('1e400'), lit('-1e400'), lit('null'), str('5'), lit('true'))),
);
const stringish: fc.Arbitrary<JsonNode> = fc.oneof(
  w(6, keyNode), w(2, fc.constantFrom(str(''), lit('null'))),
);

// ---- operations ----

type Member = readonly [string | JsonNode, JsonNode];
const member = (name: string, value: fc.Arbitrary<JsonNode>): fc.Arbitrary<Member[]> =>
  value.map((v): Member[] => [[name, v]]);
/** The member `name` with probability p, else nothing. */
const maybe = (name: string, value: fc.Arbitrary<JsonNode>, p: number):
  fc.Arbitrary<Member[]> => fc.oneof(
  w(Math.round(p * 100), member(name, value)),
  w(Math.round((1 - p) * 100), fc.constant<Member[]>([])));

const validKey = fc.oneof(w(8, fc.constantFrom('k', 'k1', 'é')), w(4, fc.constantFrom(...KEYS)),
  w(1, anyString.filter((s) => s.length > 0 && !s.includes('\u0000') &&
    !/\p{Cs}/u.test(s))), w(1, fc.constantFrom('x'.repeat(16), 'é'.repeat(8), 'x'.repeat(512))))
  .map(str);
const validNs = fc.oneof(w(8, fc.constant('a')), w(3, fc.constantFrom(...NAMESPACES))).map(str);
const validTtl = fc.constantFrom(1, 60, 3600, 220898620800).map(num);
const validDecimal = exactDouble.map(num);
/** A declared lifetime, valid most of the time. */
const expiry: fc.Arbitrary<Member[]> = fc.oneof(
  w(6, member('ttlSeconds', validTtl)),
  w(4, member('forever', fc.constant(lit('true')))),
  w(1, fc.tuple(validTtl, fc.constantFrom(lit('false'), lit('true')))
    .map(([t, f]): Member[] => [['ttlSeconds', t], ['forever', f]])),
  w(1, fc.constant<Member[]>([])),
);
const required = maybe('required', fc.constantFrom(lit('true'), lit('false'), lit('null')), 0.3);
const expect = (p: number) => maybe('expect', fc.oneof(w(4, fc.constantFrom(0, 1, 7).map(num)),
  w(1, fc.constant(num(9007199254740991)))), p);

/** Valid fields of each op, besides op, ns and key. */
const VALID: Record<string, fc.Arbitrary<Member[]>> = {
  get: fc.constant([]),
  getMany: member('keys', fc.array(validKey, { minLength: 1, maxLength: 5 }).map(arr)),
  getPrefix: fc.tuple(member('prefix', validKey),
    maybe('after', fc.oneof(validKey, fc.constantFrom(str(''), lit('null'))), 0.3),
    maybe('limit', fc.constantFrom(1, 2, 5, 100, 600, 1000, 5000).map(num), 0.5),
    maybe('keysOnly', fc.constantFrom(lit('true'), lit('false'), lit('null')), 0.3))
    .map((g) => g.flat()),
  put: fc.tuple(member('value', fc.oneof(w(12, valueNode), w(1, edgeValue))), expiry,
    expect(0.3), required).map((g) => g.flat()),
  putIfAbsent: fc.tuple(member('value', valueNode), expiry, required).map((g) => g.flat()),
  delete: fc.tuple(expect(0.4), required).map((g) => g.flat()),
  incr: fc.tuple(member('delta', validDecimal), maybe('min', validDecimal, 0.3),
    maybe('max', validDecimal, 0.3), expiry, required).map((g) => g.flat()),
  check: fc.tuple(expect(1), required).map((g) => g.flat()),
};

/** Any value a field may be given by a careless client. */
const wildValue: fc.Arbitrary<JsonNode> = fc.oneof(keyNode, nsNode, opName, ttlNode, boolNode,
  expectNode, decimalNode, limitNode, stringish, valueNode,
  fc.array(keyNode, { maxLength: 3 }).map(arr));
const FIELD_NAMES = ['op', 'ns', 'key', 'keys', 'prefix', 'after', 'limit', 'keysOnly',
  'value', 'ttlSeconds', 'forever', 'expect', 'required', 'delta', 'min', 'max'];
const STRAY_NAMES = ['foo', 'Op', '__proto__', 'constructor', 'valueOf', 'op ', '', 'namespace',
  'tenant', 'tenantId', '_tenant'];

/** The fields each op reads, in no particular order: where two refusals can race. */
const OWN_FIELDS: Record<string, string[]> = {
  get: ['op', 'ns', 'key'],
  getMany: ['op', 'ns', 'keys'],
  getPrefix: ['op', 'ns', 'prefix', 'after', 'limit', 'keysOnly'],
  put: ['op', 'ns', 'key', 'value', 'ttlSeconds', 'forever', 'expect', 'required'],
  putIfAbsent: ['op', 'ns', 'key', 'value', 'ttlSeconds', 'forever', 'expect', 'required'],
  delete: ['op', 'ns', 'key', 'expect', 'required'],
  incr: ['op', 'ns', 'key', 'delta', 'min', 'max', 'ttlSeconds', 'forever', 'expect',
    'required'],
  check: ['op', 'ns', 'key', 'expect', 'required'],
};

/** One careless change to an op's members. */
type Perturbation = { kind: 'set' | 'delete' | 'shadow'; name: string; value: JsonNode };
const perturbation = (op: string): fc.Arbitrary<Perturbation> => fc.record({
  kind: fc.constantFrom('set', 'set', 'set', 'delete', 'shadow'),
  name: fc.oneof(w(8, fc.constantFrom(...OWN_FIELDS[op]!)),
    w(2, fc.constantFrom(...FIELD_NAMES)), w(1, fc.constantFrom(...STRAY_NAMES))),
  value: wildValue,
});
const perturbations = (op: string): fc.Arbitrary<Perturbation[]> => fc.oneof(
  w(5, fc.constant<Perturbation[]>([])),
  w(4, fc.array(perturbation(op), { minLength: 1, maxLength: 3 })));

function perturb(members: Member[], p: Perturbation): Member[] {
  const named = (m: Member): boolean => typeof m[0] !== 'string' ? false : m[0] === p.name;
  if (p.kind === 'delete') return members.filter((m) => !named(m));
  if (p.kind === 'shadow') return [[p.name, p.value], ...members]; // the later member wins
  return [...members.filter((m) => !named(m)), [p.name, p.value]];
}

/** A valid op, then up to two careless changes, its members shuffled. */
const opObject: fc.Arbitrary<JsonNode> = fc.constantFrom(...Object.keys(VALID))
  .chain((name) => fc.tuple(
    fc.constant<Member[]>([['op', str(name)]]), member('ns', validNs),
    name === 'getMany' || name === 'getPrefix' ? fc.constant<Member[]>([])
      : member('key', validKey),
    VALID[name]!,
    perturbations(name),
  ))
  .chain(([a, b, c, d, ps]) => {
    let members: Member[] = [...a, ...b, ...c, ...d];
    for (const p of ps) members = perturb(members, p);
    return fc.shuffledSubarray(members, { minLength: members.length });
  })
  .map((members) => obj(members));

export const opNode: fc.Arbitrary<JsonNode> = fc.oneof(
  w(40, opObject),
  w(1, fc.constantFrom(lit('null'), num(1), str('put'), arr([]))),
);

/** Members no op expects: unknown names, tenant fields, and known ones out of place. */
const strayMember: fc.Arbitrary<Member> = fc.oneof(
  w(4, fc.tuple(fc.constantFrom('foo', 'Op', '__proto__', 'constructor', 'valueOf', 'op ',
    'toString', ''), valueNode)),
  w(1, fc.tuple(fc.constantFrom('tenant', 'tenantId', '_tenant'), valueNode)),
  w(2, fc.tuple(fc.constantFrom(...FIELD_NAMES), valueNode)),
);

// ---- requests ----

const TENANT = '00000000-0000-0000-0000-000000000001';

function frame(route: RequestFrame['route'], body: Uint8Array | null,
  extra: Partial<RequestFrame> = {}): RequestFrame {
  return { route, body, tenant: TENANT, requireGrant: false, ...extra };
}

const simpleGet = obj([['op', str('get')], ['ns', str('a')], ['key', str('k')]]);
/**
 * Valid ops over two keys, for the rules of the call: one write per key, the keys a call
 * names, the ops it holds.
 */
const racingOp: fc.Arbitrary<JsonNode> = fc.tuple(
  fc.constantFrom('get', 'put', 'delete', 'incr', 'check', 'getMany', 'getPrefix'),
  fc.constantFrom('k', 'k1'), fc.integer({ min: 1, max: 4 }),
).map(([op, key, n]) => {
  const head: Member[] = [['op', str(op)], ['ns', str('a')]];
  if (op === 'getMany') return obj([...head, ['keys', arr(new Array(n).fill(str(key)))]]);
  if (op === 'getPrefix') return obj([...head, ['prefix', str(key)], ['limit', num(n)]]);
  const rest: Member[] = op === 'put' ? [['value', num(n)], ['forever', lit('true')]]
    : op === 'incr' ? [['delta', num(n)], ['ttlSeconds', num(60)]]
      : op === 'check' ? [['expect', num(0)]] : [];
  return obj([...head, ['key', str(key)], ...rest]);
});

const opList = fc.oneof(
  w(20, fc.array(opNode, { maxLength: 6 })),
  w(6, fc.array(racingOp, { minLength: 2, maxLength: 6 })),
  w(2, fc.array(opNode, { minLength: 60, maxLength: 70 })),
  // Around QUEEN_KV_MAX_OPS_PER_CALL (256), the bad op last.
  w(1, fc.tuple(fc.integer({ min: 254, max: 257 }), opNode)
    .map(([n, last]) => [...new Array<JsonNode>(n).fill(simpleGet), last])),
);

const batchRoot: fc.Arbitrary<JsonNode> = fc.oneof(
  w(10, opList.map(arr)),
  w(4, fc.tuple(opList, fc.array(strayMember, { maxLength: 2 }), fc.boolean()).map(
    ([ops, stray, dup]) => obj([...(dup ? [['operations', arr([])] as Member] : []),
      ...stray, ['operations', arr(ops)]]))),
  w(1, fc.constantFrom(lit('null'), num(1), str('x'), obj([]), obj([['operations', num(1)]]),
    obj([['operations', lit('null')]]), obj([['Operations', arr([])]]))),
);

const listOrNot: fc.Arbitrary<JsonNode | null> = fc.oneof(
  w(6, fc.constant(null)), w(4, fc.constant(arr([]))),
  w(1, fc.constantFrom(lit('null'), arr([obj([])]), num(1), obj([]))),
);

const transactionRoot: fc.Arbitrary<JsonNode> = fc.oneof(
  w(10, fc.tuple(listOrNot, listOrNot, fc.oneof(w(6, opList.map(arr)), w(1, listOrNot)),
    fc.array(strayMember, { maxLength: 1 })).map(([ops, leases, kv, stray]) => {
    const members: Member[] = [...stray];
    if (ops !== null) members.push(['operations', ops]);
    if (leases !== null) members.push(['requiredLeases', leases]);
    if (kv !== null) members.push(['kv', kv]);
    return obj(members);
  })),
  w(1, fc.constantFrom(lit('null'), arr([]), str('kv'))),
);

/** Seeds of the style a body is written in, with its escape and whitespace rates. */
const style = fc.tuple(fc.nat(), fc.constantFrom(0, 0.05, 0.5), fc.constantFrom(0, 0.2, 0.8));
type StyleTuple = [number, number, number];

export function batchFrame(canonical: boolean): fc.Arbitrary<RequestFrame> {
  return fc.tuple(batchRoot, style, fc.boolean()).map(([root, [seed, esc, ws], grant]) =>
    frame('batch', writeJson(root, seed, esc, ws, canonical), { requireGrant: grant }));
}

export function transactionFrame(canonical: boolean): fc.Arbitrary<RequestFrame> {
  return fc.tuple(transactionRoot, style, fc.uuid()).map(([root, [seed, esc, ws], id]) =>
    frame('transaction', writeJson(root, seed, esc, ws, canonical), { transactionId: id }));
}

const RAW_NS = ['a', 'orders', '%61', 'b.c', '%62%2E%63'];
const RAW_NS_BAD = ['A', '%41', '%', '%zz', 'a%2Fb', '%C3%A9', 'é', 'a'.repeat(65), '%E0%80'];
const RAW_KEYS = ['k', 'a%2Fb', 'a/b/c', '%C3%A9', 'é', '%E0%80', '%ED%A0%80', '%F4%90%80%80',
  '%C3', '%C3x', '%C3%28', '%00', 'a%00', '', '%25', '%2', '%%', '%F0%9F%98%80', '%c3%a9',
  '%C0%80', '%E0%A0%80', '%FF', 'x'.repeat(512), 'x'.repeat(513), '%C3%A9'.repeat(256),
  '%C3%A9'.repeat(257), ' ', '%20'];

const pathBodyRoot: fc.Arbitrary<JsonNode> = fc.oneof(
  w(10, fc.tuple(VALID['put']!, perturbations('put'))
    .map(([members, ps]) => {
      let list = members;
      for (const p of ps) list = perturb(list, p);
      return obj(list);
    })),
  w(2, fc.tuple(fc.constantFrom('op', 'ns', 'namespace', 'key', 'tenant'), valueNode)
    .map(([n, v]) => obj([[n, v], ['value', num(1)], ['forever', lit('true')]]))),
  w(1, fc.constantFrom(lit('null'), arr([]), num(1), str('x'))),
);

export function pathFrame(canonical: boolean): fc.Arbitrary<RequestFrame> {
  return fc.tuple(
  fc.constantFrom<PathMethod>('GET', 'PUT', 'DELETE'),
  fc.option(fc.tuple(pathBodyRoot, style), { freq: 2 }),
  fc.oneof(w(12, fc.constantFrom(...RAW_NS)), w(2, fc.constantFrom(...RAW_NS_BAD)),
    w(1, anyString.map((s) => {
      try { return encodeURIComponent(s); } catch { return '%'; }
    }))),
  fc.oneof(w(6, fc.constantFrom(...RAW_KEYS)), w(1, anyString.map((s) => {
    try { return encodeURIComponent(s); } catch { return 'k'; }
  }))),
  fc.nat({ max: 9 }),
  ).map(([method, body, rawNs, rawKey, q]) => {
    const [seed, esc, ws] = body === null ? [0, 0, 0] : body[1] as StyleTuple;
    return frame('path', body === null ? null : writeJson(body[0], seed, esc, ws, canonical),
      { method, rawNs, rawKey, hasQuery: q === 0 });
  });
}

/** One of the three routes; `canonical` spells values as JSON.stringify does. */
export function requestFrame(canonical: boolean): fc.Arbitrary<RequestFrame> {
  return fc.oneof(w(6, batchFrame(canonical)), w(2, transactionFrame(canonical)),
    w(3, pathFrame(canonical)));
}

/** A byte-level mutation of a body: flip, set, cut, insert. */
export const mutation = fc.record({
  at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }),
  kind: fc.constantFrom('flip', 'set', 'cut', 'insert', 'insertAscii'),
});

export function mutate(bytes: Uint8Array,
  ms: ReadonlyArray<{ at: number; byte: number; kind: string }>): Uint8Array {
  let b = Uint8Array.from(bytes);
  for (const m of ms) {
    const at = b.length === 0 ? 0 : m.at % b.length;
    if (m.kind === 'flip' && b.length > 0) b[at] = b[at]! ^ (1 << (m.byte & 7));
    else if (m.kind === 'set' && b.length > 0) b[at] = m.byte;
    else if (m.kind === 'cut') b = b.subarray(0, at);
    else {
      const byte = m.kind === 'insertAscii' ? '{}[],:"\\ 0-eE.tfn'.charCodeAt(m.byte % 18)
        : m.byte;
      b = Uint8Array.from([...b.subarray(0, at), byte, ...b.subarray(at)]);
    }
  }
  return b;
}
