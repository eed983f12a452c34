// A compiler transform: drops the shadow-stack frame of every function whose frame the
// collector can never read.
//
// The incremental runtime keeps each function's managed references in a frame on a shadow
// stack, which the collector reads in one place only: `visitStack`, reached from a collection
// step (an allocation, or `__collect`). The compiler gives a frame to every function that
// holds a managed reference, leaf or not: `rowUsageBytes`, which reads a row's header and
// calls nothing that allocates, moves the stack pointer, checks it, zeroes 20 bytes and
// stores the row five times. Counted under callgrind, a batch of 16 puts made 674 framed
// calls, 470 of them into functions that can never reach `visitStack`. While such a function
// runs, no collection can start, so nothing reads its frame: the frame is dead work.
//
// A function qualifies when nothing it calls, directly or not, can reach `visitStack`: no
// indirect call, no import but `abort` (it traps), no callee that may collect. In a
// qualifying function the pointer's moves and the stack check become `nop`, and each store
// into the frame becomes a `drop` of the stored value (kept for its side effects; the
// optimizer removes what is pure). A function whose frame is used in any other way (a shape
// the walk below does not know) keeps its frame: the walk first counts the uses it would
// rewrite against every mention of the stack pointer in the function's text, and rewrites
// only when they agree. Afterwards every rewritten function is checked to mention the stack
// pointer no more; a miss stops the build.
//
// Runs after compilation (`afterCompile`), after stack-frame-stores.mjs.

const STACK_POINTER = '~lib/memory/__stack_pointer';
const STACK_CHECK = '~stack_check';
/** The collector's only reader of frames (runtime itcms.ts). */
const FRAME_READER = '~lib/rt/itcms/visitStack';
/** The one import that never runs WebAssembly code: it traps. */
const TRAPPING_IMPORT = '~lib/builtins/abort';

/** Child slots by expression kind: [wrapper, getter/setter suffixes]. */
function childSlots(binaryen) {
  const slots = new Map();
  const add = (id, wrapper, names) => slots.set(id, { wrapper, names });
  add(binaryen.IfId, binaryen.If, ['Condition', 'IfTrue', 'IfFalse']);
  add(binaryen.LoopId, binaryen.Loop, ['Body']);
  add(binaryen.BreakId, binaryen.Break, ['Condition', 'Value']);
  add(binaryen.SwitchId, binaryen.Switch, ['Condition', 'Value']);
  add(binaryen.LocalSetId, binaryen.LocalSet, ['Value']);
  add(binaryen.GlobalSetId, binaryen.GlobalSet, ['Value']);
  add(binaryen.LoadId, binaryen.Load, ['Ptr']);
  add(binaryen.StoreId, binaryen.Store, ['Ptr', 'Value']);
  add(binaryen.UnaryId, binaryen.Unary, ['Value']);
  add(binaryen.BinaryId, binaryen.Binary, ['Left', 'Right']);
  add(binaryen.SelectId, binaryen.Select, ['IfTrue', 'IfFalse', 'Condition']);
  add(binaryen.DropId, binaryen.Drop, ['Value']);
  add(binaryen.ReturnId, binaryen.Return, ['Value']);
  add(binaryen.MemoryGrowId, binaryen.MemoryGrow, ['Delta']);
  add(binaryen.MemoryCopyId, binaryen.MemoryCopy, ['Dest', 'Source', 'Size']);
  add(binaryen.MemoryFillId, binaryen.MemoryFill, ['Dest', 'Value', 'Size']);
  add(binaryen.SIMDExtractId, binaryen.SIMDExtract, ['Vec']);
  add(binaryen.SIMDReplaceId, binaryen.SIMDReplace, ['Vec', 'Value']);
  add(binaryen.SIMDShuffleId, binaryen.SIMDShuffle, ['Left', 'Right']);
  add(binaryen.SIMDTernaryId, binaryen.SIMDTernary, ['A', 'B', 'C']);
  add(binaryen.SIMDShiftId, binaryen.SIMDShift, ['Vec', 'Shift']);
  add(binaryen.SIMDLoadId, binaryen.SIMDLoad, ['Ptr']);
  add(binaryen.SIMDLoadStoreLaneId, binaryen.SIMDLoadStoreLane, ['Ptr', 'Vec']);
  return slots;
}

/** The function's body as text (empty for an import). */
function textOf(binaryen, info) {
  return info.body ? binaryen.emitText(info.body) : '';
}

/** Names of the functions that may reach the frame reader: a fixpoint over the call graph. */
function mayCollectSet(functions, byName) {
  const mayCollect = new Set([FRAME_READER]);
  const callees = new Map();
  for (const f of functions) {
    if (f.info.module) {
      if (f.info.name !== TRAPPING_IMPORT) mayCollect.add(f.info.name);
      continue;
    }
    if (/\(call_indirect|\(call_ref|\(return_call/.test(f.text)) mayCollect.add(f.info.name);
    const names = new Set();
    // A name with a space or a comma is printed quoted: `$"Map<K, V>#get"`.
    for (const match of f.text.matchAll(/\(call \$(?:"([^"\\]*)"|([^\s)"]+))/g)) {
      const name = match[1] ?? match[2];
      if (!byName.has(name)) {
        throw new Error(`unread-frames: ${f.info.name} calls ${name}, which is no function`);
      }
      names.add(name);
    }
    callees.set(f.info.name, names);
  }
  for (let changed = true; changed;) {
    changed = false;
    for (const [name, names] of callees) {
      if (mayCollect.has(name) || ![...names].some((callee) => mayCollect.has(callee))) continue;
      mayCollect.add(name);
      changed = true;
    }
  }
  return mayCollect;
}

/** The frame's uses the rewrite knows: the pointer's moves, the check, stores into it. */
function frameShapes(binaryen) {
  const isPointer = (expr) => binaryen.getExpressionId(expr) === binaryen.GlobalGetId &&
    binaryen.GlobalGet.getName(expr) === STACK_POINTER;
  return {
    // `global.set sp (i32.sub|i32.add (global.get sp) (i32.const n))`
    isMove(expr) {
      if (binaryen.getExpressionId(expr) !== binaryen.GlobalSetId) return false;
      if (binaryen.GlobalSet.getName(expr) !== STACK_POINTER) return false;
      const value = binaryen.GlobalSet.getValue(expr);
      if (binaryen.getExpressionId(value) !== binaryen.BinaryId) return false;
      const op = binaryen.Binary.getOp(value);
      if (op !== binaryen.SubInt32 && op !== binaryen.AddInt32) return false;
      return isPointer(binaryen.Binary.getLeft(value)) &&
        binaryen.getExpressionId(binaryen.Binary.getRight(value)) === binaryen.ConstId;
    },
    isCheck: (expr) => binaryen.getExpressionId(expr) === binaryen.CallId &&
      binaryen.Call.getTarget(expr) === STACK_CHECK,
    isFrameStore: (expr) => binaryen.getExpressionId(expr) === binaryen.StoreId &&
      isPointer(binaryen.Store.getPtr(expr)),
  };
}

/**
 * `walk(expr, rewrite, counts)`: walks `expr`, counting in `counts.mentions` the mentions of
 * the stack pointer in the frame's known uses and, when `rewrite`, replacing those uses.
 * Returns the expression to stand in place of `expr` (itself when unchanged).
 */
function frameWalker(binaryen, module) {
  const slots = childSlots(binaryen);
  const shapes = frameShapes(binaryen);
  const walkChild = (get, set, expr, rewrite, counts) => {
    const child = get(expr);
    if (!child) return;
    const next = walk(child, rewrite, counts);
    if (next !== child) set(expr, next);
  };
  const walkOperands = (wrapper, expr, rewrite, counts) => {
    const n = wrapper.getNumOperands(expr);
    for (let i = 0; i < n; i++) {
      walkChild((e) => wrapper.getOperandAt(e, i), (e, v) => wrapper.setOperandAt(e, i, v),
        expr, rewrite, counts);
    }
  };
  const walk = (expr, rewrite, counts) => {
    if (shapes.isMove(expr)) {
      counts.mentions += 2;
      return rewrite ? module.nop() : expr;
    }
    if (shapes.isCheck(expr)) return rewrite ? module.nop() : expr;
    if (shapes.isFrameStore(expr)) {
      counts.mentions += 1;
      const value = walk(binaryen.Store.getValue(expr), rewrite, counts);
      return rewrite ? module.drop(value) : expr;
    }
    const id = binaryen.getExpressionId(expr);
    if (id === binaryen.BlockId) {
      const n = binaryen.Block.getNumChildren(expr);
      for (let i = 0; i < n; i++) {
        walkChild((e) => binaryen.Block.getChildAt(e, i),
          (e, v) => binaryen.Block.setChildAt(e, i, v), expr, rewrite, counts);
      }
    } else if (id === binaryen.CallId) {
      walkOperands(binaryen.Call, expr, rewrite, counts);
    } else if (id === binaryen.CallIndirectId) {
      walkChild(binaryen.CallIndirect.getTarget, binaryen.CallIndirect.setTarget, expr,
        rewrite, counts);
      walkOperands(binaryen.CallIndirect, expr, rewrite, counts);
    } else {
      const slot = slots.get(id);
      for (const name of slot?.names ?? []) {
        walkChild(slot.wrapper[`get${name}`], slot.wrapper[`set${name}`], expr, rewrite,
          counts);
      }
    }
    return expr;
  };
  return walk;
}

export class UnreadFrames {
  afterCompile(module) {
    const binaryen = this.binaryen;
    const functions = [];
    for (let i = 0; i < module.getNumFunctions(); i++) {
      const fn = module.getFunctionByIndex(i);
      const info = binaryen.getFunctionInfo(fn);
      functions.push({ fn, info, text: textOf(binaryen, info) });
    }
    const byName = new Map(functions.map((f) => [f.info.name, f]));
    if (!byName.has(FRAME_READER)) {
      throw new Error(`unread-frames: the runtime has no ${FRAME_READER}; the collector ` +
        'reads its frames elsewhere now, and this transform no longer knows when it may');
    }
    const mayCollect = mayCollectSet(functions, byName);
    const walk = frameWalker(binaryen, module);
    const mentionsOf = (text) => text.split(`$${STACK_POINTER}`).length - 1;
    for (const f of functions) {
      if (f.info.module || mayCollect.has(f.info.name)) continue;
      const mentions = mentionsOf(f.text);
      if (mentions === 0) continue;
      const counts = { mentions: 0 };
      walk(f.info.body, false, counts);
      if (counts.mentions !== mentions) continue;
      const body = walk(f.info.body, true, { mentions: 0 });
      if (body !== f.info.body) binaryen.Function.setBody(f.fn, body);
      const after = textOf(binaryen, binaryen.getFunctionInfo(f.fn));
      if (mentionsOf(after) !== 0 || after.includes(`(call $${STACK_CHECK}`)) {
        throw new Error(`unread-frames: ${f.info.name} still uses its frame after the rewrite`);
      }
    }
  }
}
