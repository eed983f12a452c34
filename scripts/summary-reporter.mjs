// A vitest reporter that ends the run with one plain line, `N passed, N failed, N skipped`,
// which CI reads as the suite's verdict. A module that failed to load counts as a failure, and
// so does a module that failed outside its tests (a `beforeAll` that threw leaves its tests
// skipped, and the line must not read `0 failed`).
export default class SummaryReporter {
  onTestRunEnd(testModules, unhandledErrors) {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const module of testModules) {
      const tests = [...module.children.allTests()];
      if (module.state() === 'failed' &&
        !tests.some((test) => test.result().state === 'failed')) failed++;
      for (const test of tests) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  }
}
