'use strict'
// The panic boundary (issue 10a), run against the addon built with the core's `test-panic`
// feature: `make test-node-panic` builds it into <target>/node-test-panic and loads it through the
// package (NAPI_RS_NATIVE_LIBRARY_PATH), so agentbreaker.js and the generated loader are the ones
// users get. With that feature the core panics on the trigger text below: in
// FailureBreaker::record_failure while it holds the breaker's lock, and in analyze().
//
// Not named *.test.js: against the normal build (which `node --test test/*.test.js` loads) the
// trigger is ordinary text and these tests would fail, as they must.

const test = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const ab = require('..')

/** agentbreaker::TEST_PANIC_TRIGGER */
const TRIGGER = 'agentbreaker:test-panic'

/** An error of the addon's panic boundary: an Error with code INTERNAL naming the panic. */
function isInternal(error) {
  assert.ok(error instanceof Error, `expected an Error, got ${error}`)
  assert.equal(error.code, 'INTERNAL', `${error.code}: ${error.message}`)
  assert.match(error.message, /panic/)
  return true
}

test('the package loaded the test-panic build of the addon', () => {
  const library = process.env.NAPI_RS_NATIVE_LIBRARY_PATH
  assert.ok(library, 'NAPI_RS_NATIVE_LIBRARY_PATH names the test-panic build')
  assert.match(path.basename(path.dirname(library)), /^node-test-panic$/)
})

test('a panic inside recordFailure (inside the lock) is INTERNAL; the same breaker keeps working', () => {
  const clock = new ab.ManualClock(0)
  const breaker = new ab.FailureBreaker({ failureThreshold: 2, cooldownMs: 1000 }, clock)
  const changes = []
  breaker.on('stateChange', (event) => changes.push(`${event.from}->${event.to}`))
  breaker.recordFailure('first')
  assert.throws(() => breaker.recordFailure(TRIGGER), isInternal)
  // The panic came before anything was recorded: one failure, still CLOSED, the lock usable.
  const status = breaker.getStatus()
  assert.equal(status.state, 'CLOSED')
  assert.equal(status.consecutiveFailures, 1)
  assert.deepEqual(status.failureHistory.map((r) => r.error), ['first'])
  // The threshold behaves as before: the next failure opens the circuit.
  breaker.recordFailure('second')
  assert.equal(breaker.state, 'OPEN')
  assert.equal(breaker.shouldAllowOperation().allowed, false)
  clock.advance(1000)
  assert.equal(breaker.shouldAllowOperation().allowed, true)
  breaker.recordSuccess()
  assert.equal(breaker.state, 'CLOSED')
  assert.deepEqual(changes, ['CLOSED->OPEN', 'OPEN->HALF_OPEN', 'HALF_OPEN->CLOSED'])
  assert.equal(breaker.metrics().totalFailures, 2)
  assert.equal(breaker.listenerErrors, 0)
})

test('a panic again and again: every one is INTERNAL, none is counted', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 3 })
  for (let i = 0; i < 50; i++) {
    assert.throws(() => breaker.recordFailure(TRIGGER), isInternal)
  }
  assert.equal(breaker.getStatus().consecutiveFailures, 0)
  breaker.recordFailure('a')
  breaker.recordFailure('b')
  breaker.recordFailure('c')
  assert.equal(breaker.state, 'OPEN')
})

test('a guarded call whose failure panics while it is recorded rejects with INTERNAL', async () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 })
  await assert.rejects(breaker.call(() => { throw new Error(TRIGGER) }), isInternal)
  await assert.rejects(breaker.call(async () => { throw new Error(TRIGGER) }), isInternal)
  assert.equal(breaker.state, 'CLOSED')
  assert.equal(await breaker.call(async (x) => x + 1, 41), 42)
  await assert.rejects(breaker.call(() => { throw new Error('real') }), /real/)
  assert.equal(breaker.state, 'OPEN')
  await assert.rejects(breaker.call(() => 1), { code: 'CIRCUIT_OPEN' })
})

test('a panic in analyze() is INTERNAL; analyze() works on ordinary text afterwards', () => {
  assert.throws(() => ab.analyze(TRIGGER), isInternal)
  const analysis = ab.analyze('All tests pass. The task is complete.\nEXIT_SIGNAL: true')
  assert.equal(analysis.exitSignal, true)
  assert.equal(analysis.completionSignal.detected, true)
  assert.throws(() => ab.analyze(TRIGGER), isInternal)
  assert.equal(ab.analyze('still working on it').exitSignal, null)
})

test('a panic in analyze() inside Loop.observe() is INTERNAL; the loop keeps working', () => {
  const loop = new ab.Loop({ maxIterations: 10 })
  assert.throws(() => loop.observe({ output: TRIGGER }), isInternal)
  // (The core counts the iteration before it analyzes the output, so the failed observation
  // is counted: reported, not asserted either way.)
  const first = loop.observe({ output: 'working on it', filesChanged: 1 })
  assert.equal(first.action, 'continue')
  const second = loop.observe({ output: 'still working', filesChanged: 1 })
  assert.equal(second.action, 'continue')
  assert.equal(second.iteration, first.iteration + 1)
  assert.equal(loop.getStatus().iteration, second.iteration)
  assert.throws(() => loop.observe({ output: TRIGGER }), isInternal)
  assert.equal(loop.observe({ output: 'All tests pass. The task is complete.\nEXIT_SIGNAL: true' }).action, 'exit')
})

test('the host process survives the panics and exits normally', () => {
  const script = [
    "const ab = require('.')",
    'const b = new ab.FailureBreaker()',
    `for (const f of [() => b.recordFailure('${TRIGGER}'), () => ab.analyze('${TRIGGER}')]) {`,
    '  try { f() } catch (e) { console.log(e.code) }',
    '}',
    "b.recordFailure('x')",
    'console.log(b.getStatus().consecutiveFailures)',
  ].join('\n')
  const output = execFileSync(process.execPath, ['-e', script], {
    cwd: path.join(__dirname, '..'),
    env: process.env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'], // the panic messages go to stderr
  })
  assert.equal(output, 'INTERNAL\nINTERNAL\n1\n')
})
