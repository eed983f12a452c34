// A compiler transform: a copy of at most 32 bytes done in WebAssembly instead of by
// `memory.copy`.
//
// V8 compiles every `memory.copy` to a call into C (a bounds check, then `memmove`), about 50
// instructions before the first byte moves. Most of the machine's copies are short: a key, a
// namespace, a number's digits, a piece of an answer. Every `memory.copy` of the module
// becomes a call to one function added here, which moves up to 32 bytes with two loads and
// two stores (overlapping when the size is not a power of two: both loads come before both
// stores, so overlapping ranges copy as `memmove` does) and leaves longer copies to
// `memory.copy`. A copy that is in bounds gives the same bytes either way; an empty one out
// of bounds no longer traps, which nothing relies on.
//
// Runs after compilation (`afterCompile`) and checks its own work: a `memory.copy` left
// outside the helper stops the build.

import { replaceStatements } from './module-statements.mjs';

const HELPER = '~hivekv/copy';

export class ShortCopies {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const { none } = binaryen;
    const isCopy = (expr) => binaryen.getExpressionId(expr) === binaryen.MemoryCopyId;
    const asCall = (expr) => module.call(HELPER, [binaryen.MemoryCopy.getDest(expr),
      binaryen.MemoryCopy.getSource(expr), binaryen.MemoryCopy.getSize(expr)], none);
    const replaced = replaceStatements(binaryen, module, isCopy, asCall);
    if (replaced === 0) return;
    addHelper(module, binaryen);
    const text = module.emitText();
    const left = (text.match(/\(memory\.copy\b/g)?.length ?? 0) - 1;
    if (left > 0) {
      throw new Error(`short-copies: ${left} memory.copy left outside ${HELPER} ` +
        `(${replaced} replaced)`);
    }
  }
}

/** `(d, s, n)`: copies n bytes from s to d, as `memory.copy` does. */
function addHelper(module, binaryen) {
  const { i32, i64, v128, none } = binaryen;
  const D = 0, S = 1, N = 2, A64 = 3, B64 = 4, A32 = 5, B32 = 6, C32 = 7, AV = 8, BV = 9;
  const get = (index, type) => module.local.get(index, type);
  const set = (index, value) => module.local.set(index, value);
  const at = (base, back) => module.i32.sub(module.i32.add(get(base, i32), get(N, i32)),
    module.i32.const(back));
  const leU = (limit) => module.i32.le_u(get(N, i32), module.i32.const(limit));
  const geU = (limit) => module.i32.ge_u(get(N, i32), module.i32.const(limit));
  // The first `width` bytes and the last `width` (overlapping when n < 2 * width): both
  // loaded into locals `a` and `b` before either is stored.
  const bothEnds = (width, kind, type, a, b) => module.block(null, [
    set(a, kind.load(0, 1, get(S, i32))),
    set(b, kind.load(0, 1, at(S, width))),
    kind.store(0, 1, get(D, i32), get(a, type)),
    kind.store(0, 1, at(D, width), get(b, type)),
    module.return(),
  ]);
  const body = module.block(null, [
    module.if(leU(16), module.block(null, [
      module.if(geU(8), bothEnds(8, module.i64, i64, A64, B64)),
      module.if(geU(4), bothEnds(4, module.i32, i32, A32, B32)),
      module.if(module.i32.eqz(get(N, i32)), module.return()),
      // 1 to 3 bytes: the first, the middle and the last (some the same byte).
      set(A32, module.i32.load8_u(0, 1, get(S, i32))),
      set(B32, module.i32.load8_u(0, 1, module.i32.add(get(S, i32),
        module.i32.shr_u(get(N, i32), module.i32.const(1))))),
      set(C32, module.i32.load8_u(0, 1, at(S, 1))),
      module.i32.store8(0, 1, get(D, i32), get(A32, i32)),
      module.i32.store8(0, 1, module.i32.add(get(D, i32),
        module.i32.shr_u(get(N, i32), module.i32.const(1))), get(B32, i32)),
      module.i32.store8(0, 1, at(D, 1), get(C32, i32)),
      module.return(),
    ])),
    // 17 to 32 bytes.
    module.if(leU(32), bothEnds(16, module.v128, v128, AV, BV)),
    module.memory.copy(get(D, i32), get(S, i32), get(N, i32)),
  ], none);
  module.addFunction(HELPER, binaryen.createType([i32, i32, i32]), none,
    [i64, i64, i32, i32, i32, v128, v128], body);
}
