// Replaces statements of a compiled module: the walk both build transforms share
// (stack-frame-stores.mjs, short-copies.mjs).
//
// A statement stands as a child of a block, as an arm of an `if`, as a loop's body or as a
// function's body; the walk visits those positions (and the conditions of `if`s) and no
// others, which is where the compiler puts the `memory.fill` and `memory.copy` statements the
// transforms rewrite. Each transform checks afterwards that none was left elsewhere.

/**
 * Every statement of `module` for which `matches(expr)` holds becomes `replacement(expr)`.
 * Returns how many were replaced.
 */
export function replaceStatements(binaryen, module, matches, replacement) {
  let replaced = 0;
  // The expression to stand at a position: the replacement when it matches, else itself,
  // walked.
  const at = (expr) => {
    if (!expr) return null;
    if (matches(expr)) {
      replaced++;
      return replacement(expr);
    }
    visit(expr);
    return null;
  };
  const visit = (expr) => {
    const id = binaryen.getExpressionId(expr);
    if (id === binaryen.BlockId) {
      const count = binaryen.Block.getNumChildren(expr);
      for (let i = 0; i < count; i++) {
        const next = at(binaryen.Block.getChildAt(expr, i));
        if (next !== null) binaryen.Block.setChildAt(expr, i, next);
      }
    } else if (id === binaryen.IfId) {
      visit(binaryen.If.getCondition(expr));
      const ifTrue = at(binaryen.If.getIfTrue(expr));
      if (ifTrue !== null) binaryen.If.setIfTrue(expr, ifTrue);
      const ifFalse = at(binaryen.If.getIfFalse(expr));
      if (ifFalse !== null) binaryen.If.setIfFalse(expr, ifFalse);
    } else if (id === binaryen.LoopId) {
      const body = at(binaryen.Loop.getBody(expr));
      if (body !== null) binaryen.Loop.setBody(expr, body);
    }
  };
  for (let i = 0; i < module.getNumFunctions(); i++) {
    const fn = module.getFunctionByIndex(i);
    const body = at(binaryen.getFunctionInfo(fn).body);
    if (body !== null) binaryen.Function.setBody(fn, body);
  }
  return replaced;
}
