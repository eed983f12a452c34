// A compiler transform: zeroes each shadow-stack frame with plain stores instead of
// `memory.fill`.
//
// The runtime keeps a function's managed references in a frame on a shadow stack, zeroed on
// entry so that the collector never scans a stale pointer. For frames over 16 bytes the
// compiler zeroes it with `memory.fill`, and V8 compiles every `memory.fill` to a call into
// C: counted under callgrind, a 44-byte fill costs about 90 instructions a call against
// about 43 for the same bytes as stores. Most functions on the apply path (the tree, a row's
// accounting, its hash, the decoder) have such a frame, so a put paid it a dozen times. The
// frames are 20 to 76 bytes; this writes them as 8-byte stores (and one 4-byte store for a
// size that is 4 modulo 8): the same bytes zeroed, before the optimizer runs.
//
// Runs after compilation (`afterCompile`) and checks its own work: a frame fill left behind
// (in a place the walk below does not reach) stops the build.

import { replaceStatements } from './module-statements.mjs';

const STACK_POINTER = '~lib/memory/__stack_pointer';
const LARGEST_FRAME = 512;

export class StackFrameStores {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const isFrameFill = (expr) => {
      if (binaryen.getExpressionId(expr) !== binaryen.MemoryFillId) return false;
      const fill = binaryen.getExpressionInfo(expr);
      const dest = binaryen.getExpressionInfo(fill.dest);
      const value = binaryen.getExpressionInfo(fill.value);
      const size = binaryen.getExpressionInfo(fill.size);
      return dest.id === binaryen.GlobalGetId && dest.name === STACK_POINTER &&
        value.id === binaryen.ConstId && value.value === 0 &&
        size.id === binaryen.ConstId && size.value > 0 && size.value % 4 === 0 &&
        size.value <= LARGEST_FRAME;
    };
    const zeroStores = (expr) => {
      const bytes = binaryen.getExpressionInfo(binaryen.getExpressionInfo(expr).size).value;
      const sp = () => module.global.get(STACK_POINTER, binaryen.i32);
      const stores = [];
      let offset = 0;
      for (; offset + 8 <= bytes; offset += 8) {
        stores.push(module.i64.store(offset, 0, sp(), module.i64.const(0n)));
      }
      if (offset < bytes) stores.push(module.i32.store(offset, 0, sp(), module.i32.const(0)));
      return module.block(null, stores, binaryen.none);
    };
    const replaced = replaceStatements(binaryen, module, isFrameFill, zeroStores);
    const left = module.emitText().match(
      /\(memory\.fill\s+\(global\.get \$~lib\/memory\/__stack_pointer\)/g)?.length ?? 0;
    if (left > 0) {
      throw new Error(`stack-frame-stores: ${left} frame fills left as memory.fill ` +
        `(${replaced} replaced)`);
    }
  }
}
