// A vitest reporter that ends the run with one plain line, `N passed, N failed, N skipped`,
// which CI reads as the suite's verdict. A module that failed to load counts as a failure.
export default class SummaryReporter {
  onTestRunEnd(testModules, unhandledErrors) {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const module of testModules) {
      if (module.state() === 'failed' && [...module.children.allTests()].length === 0) failed++;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  }
}
