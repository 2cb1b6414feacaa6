// A node:test reporter that prints libtest-style lines (`test <name> ... ok|FAILED`), the format
// tools/mutate_scenarios.py reads: `make mutate-node` runs the suite's mutation check against the
// Node runner with it.
export default async function* libtestReporter(source) {
  let passed = 0
  let failed = 0
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { name, details, nesting } = event.data
    if (nesting !== 0 || name.endsWith('.js')) continue
    if (event.type === 'test:pass') {
      passed++
      yield `test ${name} ... ok\n`
    } else {
      failed++
      const error = details && details.error
      const cause = error && error.cause !== undefined ? error.cause : error
      yield `test ${name} ... FAILED\n    ${String(cause && cause.message ? cause.message : cause)}\n`
    }
  }
  yield `\ntest result: ${failed ? 'FAILED' : 'ok'}. ${passed} passed; ${failed} failed\n`
}
