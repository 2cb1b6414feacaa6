'use strict'
// Tests of the JavaScript API beyond the conformance suite: the shapes JavaScript users see,
// guarded calls, listeners, type conversion and hostile input, persistence, threads, GC.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { Worker } = require('node:worker_threads')

const ab = require('..')

const CODES = [
  'INVALID_CONFIG',
  'INVALID_ARGUMENT',
  'INVALID_EVENT',
  'INVALID_SNAPSHOT',
  'IO',
  'INTERNAL',
  'CIRCUIT_OPEN',
]

/** Asserts that `fn` throws an error with `code` (and, when given, of class `type`). */
function throwsCode(fn, code, type = Error) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof type, `expected a ${type.name}, got ${error && error.constructor.name}: ${error}`)
    assert.equal(error.code, code, `${error.code}: ${error.message}`)
    return true
  })
}

function tmpDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbreaker-node-api-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

test('the package exports every class and function of the contract', () => {
  for (const name of [
    'FailureBreaker',
    'StagnationBreaker',
    'BudgetBreaker',
    'ExitStrategy',
    'FixPlan',
    'Loop',
    'Monitor',
    'ManualClock',
    'SystemClock',
    'AgentHaltedError',
  ]) {
    assert.equal(typeof ab[name], 'function', name)
  }
  for (const name of ['analyze', 'fingerprint', 'configFromEnv']) {
    assert.equal(typeof ab[name], 'function', name)
  }
  assert.equal(new ab.FailureBreaker().getStatus().state, 'CLOSED')
})

test('FailureBreaker walks through seed 004: warning at 3, open at 5, cooldown, probe, close', () => {
  const clock = new ab.ManualClock(0)
  const breaker = new ab.FailureBreaker({ failureThreshold: 5 }, clock)
  const events = []
  breaker.on('warning', (e) => events.push(e)).on('stateChange', (e) => events.push(e))
  for (let i = 0; i < 5; i++) breaker.recordFailure('Path not found: ServerScriptService.MainScript')
  assert.deepEqual(
    events.map((e) => e.type === 'warning' ? e.message : `${e.from}->${e.to}`),
    ['Warning: 3 consecutive failures. 2 more will open circuit.', 'CLOSED->OPEN'],
  )
  clock.set(1000)
  assert.deepEqual(breaker.shouldAllowOperation(), {
    allowed: false,
    message:
      'Circuit breaker OPEN. 29 seconds remaining in cooldown. 5 consecutive failures detected. Human intervention required.',
  })
  assert.equal(breaker.state, 'OPEN')
  clock.set(30_000)
  assert.deepEqual(breaker.shouldAllowOperation(), {
    allowed: true,
    message: 'Circuit breaker testing - one operation allowed',
  })
  breaker.recordSuccess()
  assert.equal(breaker.state, 'CLOSED')
  const metrics = breaker.metrics()
  assert.deepEqual(
    { ...metrics },
    { totalFailures: 5, totalSuccesses: 1, trips: 1, recoveries: 1, reopenings: 0, recoveryRate: 1, mtbfMs: 0 },
  )
})

test('results are plain objects with the contract keys, in the order of the contract', () => {
  const breaker = new ab.FailureBreaker()
  const status = breaker.getStatus()
  assert.equal(Object.getPrototypeOf(status), Object.prototype)
  assert.deepEqual(Object.keys(status), [
    'state',
    'consecutiveFailures',
    'threshold',
    'failureHistory',
    'openedAt',
    'cooldownMs',
    'cooldownRemainingMs',
    'trips',
  ])
  assert.deepEqual(Object.keys(breaker.shouldAllowOperation()), ['allowed', 'message'])
  assert.deepEqual(JSON.parse(JSON.stringify(breaker.snapshot())), breaker.snapshot())
  const budget = new ab.BudgetBreaker({ maxToolCallsPerTask: 1 })
  budget.ingest({ type: 'tool_use', name: 'x' })
  assert.deepEqual(Object.keys(budget.ingest({ type: 'tool_use', name: 'x' })), [
    'kind',
    'slug',
    'taskId',
    'message',
    'actual',
    'limit',
  ])
})

test('timestamps of the system clock are numbers, not BigInts', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 }, new ab.SystemClock())
  breaker.recordFailure('x')
  const status = breaker.getStatus()
  assert.equal(typeof status.openedAt, 'number')
  assert.ok(status.openedAt > 1_577_836_800_000)
  assert.equal(typeof status.failureHistory[0].atMs, 'number')
  const now = new ab.SystemClock().now()
  assert.ok(Number.isSafeInteger(now) && now >= status.openedAt)
})

test('map keys are plain own properties, even __proto__', () => {
  const breaker = new ab.StagnationBreaker({ errorMatch: 'exact' })
  breaker.recordError('__proto__')
  const counts = breaker.getStatus().errorCounts
  assert.ok(Object.prototype.hasOwnProperty.call(counts, '__proto__'))
  assert.equal(counts.__proto__, 1) // eslint-disable-line no-proto
})

test('call() guards sync and async functions and passes arguments and results on', async () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 2 })
  assert.equal(await breaker.call((a, b) => a + b, 2, 3), 5)
  assert.equal(await breaker.call(async (a) => a * 2, 21), 42)
  const value = { nested: true }
  assert.equal(await breaker.call(() => value), value)
  assert.equal(breaker.metrics().totalSuccesses, 3)
})

test('call() records a throw or a rejection with the error message and passes the error on', async () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 5 })
  const syncError = new TypeError('sync failure')
  await assert.rejects(breaker.call(() => { throw syncError }), (e) => e === syncError)
  await assert.rejects(breaker.call(async () => { throw new Error('async failure') }), /async failure/)
  await assert.rejects(breaker.call(() => Promise.reject('a plain string')), (e) => e === 'a plain string')
  await assert.rejects(breaker.call(() => { throw 42 }), (e) => e === 42) // eslint-disable-line no-throw-literal
  await assert.rejects(breaker.call(() => { throw Object.create(null) }))
  assert.deepEqual(
    breaker.getStatus().failureHistory.map((r) => r.error),
    ['sync failure', 'async failure', 'a plain string', '42', '[object Object]'],
  )
})

test('call() refuses with CIRCUIT_OPEN without calling the function', async () => {
  const clock = new ab.ManualClock(0)
  const breaker = new ab.FailureBreaker({ failureThreshold: 1, cooldownMs: 10_000 }, clock)
  breaker.recordFailure('down')
  let called = false
  const pending = breaker.call(() => { called = true })
  assert.ok(pending instanceof Promise)
  await assert.rejects(pending, (e) => {
    assert.equal(e.code, 'CIRCUIT_OPEN')
    assert.match(e.message, /^Circuit breaker OPEN\. 10 seconds remaining in cooldown\./)
    return true
  })
  assert.equal(called, false)
  // After the cooldown the next call is the probe; a success closes the circuit.
  clock.advance(10_000)
  assert.equal(await breaker.call(async () => 'probe ok'), 'probe ok')
  assert.equal(breaker.state, 'CLOSED')
  // A second call during an unanswered probe is refused too.
  breaker.recordFailure('down again')
  clock.advance(10_000)
  let release
  const probe = breaker.call(() => new Promise((resolve) => { release = resolve }))
  await assert.rejects(breaker.call(() => 'second'), { code: 'CIRCUIT_OPEN' })
  release('done')
  assert.equal(await probe, 'done')
  await assert.rejects(breaker.call('not a function'), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(ab.FailureBreaker.prototype.call.call({}, () => 1), { code: 'INVALID_ARGUMENT' })
  throwsCode(() => ab.Loop.prototype.on.call(null, 'halt', () => {}), 'INVALID_ARGUMENT', TypeError)
})

test('tryAcquire() is the first half of a guarded call', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 })
  assert.deepEqual(breaker.tryAcquire(), { allowed: true, message: null })
  breaker.recordFailure('x')
  throwsCode(() => breaker.tryAcquire(), 'CIRCUIT_OPEN')
})

test('listeners are called synchronously, in order, and a throwing one is isolated', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 })
  const seen = []
  breaker.on('stateChange', () => { throw new Error('listener bug') })
  breaker.on('stateChange', function (event) {
    seen.push([this === breaker, event.from, event.to, breaker.state])
  })
  breaker.recordFailure('x')
  assert.deepEqual(seen, [[true, 'CLOSED', 'OPEN', 'OPEN']]) // delivered before recordFailure returned
  assert.equal(breaker.listenerErrors, 1)
  breaker.reset()
  assert.equal(seen.length, 2)
  assert.equal(breaker.listenerErrors, 2)
})

test('a listener may call back into its breaker', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 })
  const seen = []
  breaker.on('stateChange', (event) => {
    seen.push(`${event.from}->${event.to}`)
    if (event.to === 'OPEN') breaker.reset()
  })
  breaker.recordFailure('x')
  assert.deepEqual(seen, ['CLOSED->OPEN', 'OPEN->CLOSED'])
  assert.equal(breaker.state, 'CLOSED')
})

test('off() removes one registration; on() rejects unknown event types and non-functions', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 1 })
  const seen = []
  const listener = (e) => seen.push(e.to)
  breaker.on('stateChange', listener).on('stateChange', listener)
  breaker.off('stateChange', listener).off('warning', listener).off('stateChange', () => {})
  breaker.recordFailure('x')
  assert.deepEqual(seen, ['OPEN'])
  breaker.off('stateChange', listener)
  breaker.reset()
  assert.deepEqual(seen, ['OPEN'])
  throwsCode(() => breaker.on('halt', listener), 'INVALID_ARGUMENT')
  throwsCode(() => breaker.on(42, listener), 'INVALID_ARGUMENT')
  throwsCode(() => breaker.on('stateChange', 'not a function'), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => new ab.BudgetBreaker().on('stateChange', listener), 'INVALID_ARGUMENT')
})

test('a Loop reports its components\' stateChange, warning and halt events', () => {
  const loop = new ab.Loop({
    strategy: { type: 'fix_plan', steps: [{ description: 'parse', maxAttempts: 1 }, { description: 'lex' }] },
    stagnation: { noProgressThreshold: 1 },
    budget: { maxToolCallsPerTask: 1 },
  })
  const events = []
  for (const type of ['stateChange', 'warning', 'halt']) loop.on(type, (e) => events.push(e.type))
  const decision = loop.observe({
    output: 'still working',
    events: [{ type: 'tool_use', name: 'a' }, { type: 'tool_use', name: 'b' }],
  })
  assert.equal(decision.halt.slug, 'tool_call_limit')
  assert.deepEqual(events.sort(), ['halt', 'stateChange', 'warning'])
})

test('a breaker with a listener that refers to it is garbage-collected', async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  let collected = 0
  const registry = new FinalizationRegistry(() => { collected++ })
  for (let i = 0; i < 50; i++) {
    const breaker = new ab.FailureBreaker()
    breaker.on('stateChange', () => breaker.getStatus())
    registry.register(breaker, i)
  }
  for (let i = 0; i < 20 && collected < 50; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  assert.equal(collected, 50)
})

test('breakers work in worker threads, listeners included', async () => {
  const worker = new Worker(
    `
    const { parentPort } = require('node:worker_threads')
    const ab = require(${JSON.stringify(path.join(__dirname, '..'))})
    const breaker = new ab.FailureBreaker({ failureThreshold: 2 })
    const seen = []
    breaker.on('stateChange', (e) => seen.push(e.to))
    breaker.recordFailure('a')
    breaker.recordFailure('b')
    parentPort.postMessage({ seen, state: breaker.state })
    `,
    { eval: true },
  )
  const [message] = await require('node:events').once(worker, 'message')
  assert.deepEqual(message, { seen: ['OPEN'], state: 'OPEN' })
  await worker.terminate()
})

test('config: camelCase keys, defaults, undefined as absent, typos and bad values refused', () => {
  const breaker = new ab.FailureBreaker({ failureThreshold: 2, cooldownMs: undefined, warningThreshold: null })
  assert.equal(breaker.getStatus().threshold, 2)
  assert.equal(breaker.getStatus().cooldownMs, 30_000)
  throwsCode(() => new ab.FailureBreaker({ failureTreshold: 5 }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: 0 }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: 5.5 }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: '5' }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({ warningThreshold: 5 }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: NaN }), 'INVALID_CONFIG', TypeError)
  throwsCode(() => new ab.FailureBreaker({ cooldownMs: Infinity }), 'INVALID_CONFIG', TypeError)
  throwsCode(() => new ab.FailureBreaker({ backoffMultiplier: -Infinity }), 'INVALID_CONFIG', TypeError)
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: () => 5 }), 'INVALID_CONFIG', TypeError)
  throwsCode(() => new ab.FailureBreaker('failureThreshold=5'), 'INVALID_CONFIG')
  throwsCode(() => new ab.FailureBreaker({}, 'a clock'), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => new ab.ExitStrategy({ threshold: 70 }), 'INVALID_CONFIG')
  throwsCode(() => new ab.FixPlan(), 'INVALID_CONFIG')
  // Whole numbers are integers whatever their spelling; fractions stay fractions; a whole number
  // beyond 2^64 is no integer.
  throwsCode(() => new ab.FailureBreaker({ failureThreshold: 1e300 }), 'INVALID_CONFIG')
  const clock = new ab.ManualClock(5)
  clock.set(-0)
  assert.equal(clock.now(), 0)
  clock.set(2 ** 53 - 1)
  assert.equal(clock.now(), Number.MAX_SAFE_INTEGER)
  assert.equal(new ab.FailureBreaker({ backoffMultiplier: 2 }).getStatus().cooldownMs, 30_000)
  assert.equal(new ab.BudgetBreaker({ similarityJaccardThreshold: 1 }) instanceof ab.BudgetBreaker, true)
})

test('wrong argument types are INVALID_ARGUMENT TypeErrors', () => {
  const clock = new ab.ManualClock()
  const breaker = new ab.FailureBreaker({}, clock)
  for (const bad of [42, true, null, undefined, {}, ['x'], Symbol('x'), 10n]) {
    throwsCode(() => breaker.recordFailure(bad), 'INVALID_ARGUMENT', TypeError)
  }
  for (const bad of [NaN, Infinity, -Infinity, '5', undefined, null, {}]) {
    throwsCode(() => clock.set(bad), 'INVALID_ARGUMENT', TypeError)
    throwsCode(() => clock.advance(bad), 'INVALID_ARGUMENT', TypeError)
  }
  for (const bad of [-1, 1.5, 2 ** 64]) {
    throwsCode(() => clock.set(bad), 'INVALID_ARGUMENT')
  }
  throwsCode(() => new ab.ManualClock(-5), 'INVALID_ARGUMENT')
  assert.equal(breaker.metrics().totalFailures, 0)
  const stagnation = new ab.StagnationBreaker()
  throwsCode(() => stagnation.recordProgress({ filesChanged: 1.5 }), 'INVALID_ARGUMENT')
  throwsCode(() => stagnation.recordProgress({ filesChanged: NaN }), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => stagnation.recordProgress({ filesChanged: -1 }), 'INVALID_ARGUMENT')
  throwsCode(() => stagnation.recordProgress(), 'INVALID_ARGUMENT')
  throwsCode(() => stagnation.recordError('x', { transient: 'yes' }), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => stagnation.recordError('x', { transiant: true }), 'INVALID_ARGUMENT')
  throwsCode(() => stagnation.recordError('x', true), 'INVALID_ARGUMENT', TypeError)
  assert.equal(stagnation.getStatus().consecutiveNoProgress, 0)
  assert.deepEqual(stagnation.getStatus().errorCounts, {})
  const budget = new ab.BudgetBreaker()
  throwsCode(() => budget.ingest({ type: 'usage', usage: { input_tokens: NaN } }), 'INVALID_EVENT', TypeError)
  throwsCode(() => budget.ingest({ type: 'usage', usage: { input_tokens: -1 } }), 'INVALID_EVENT')
  throwsCode(() => budget.ingest('tool_use'), 'INVALID_EVENT')
  throwsCode(() => breaker.restore({ version: 2 }), 'INVALID_SNAPSHOT')
  throwsCode(() => breaker.restore({ ...breaker.snapshot(), openedAt: Infinity }), 'INVALID_SNAPSHOT', TypeError)
  throwsCode(() => ab.analyze(42), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => ab.fingerprint('x', 'fuzzy'), 'INVALID_ARGUMENT') // an argument, as in every binding
  const strategy = new ab.ExitStrategy()
  throwsCode(() => strategy.shouldExit(ab.analyze('done'), 'open'), 'INVALID_ARGUMENT')
  throwsCode(() => strategy.shouldExit(ab.analyze('done'), 7), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => strategy.shouldExit({ confidence: 90 }), 'INVALID_ARGUMENT')
  throwsCode(() => strategy.shouldExit('All tasks complete'), 'INVALID_ARGUMENT')
  throwsCode(() => new ab.Loop().observe({ output: 42 }), 'INVALID_ARGUMENT')
  throwsCode(() => ab.configFromEnv({ AGENTBREAKER_TOOL_CAP: 75 }), 'INVALID_ARGUMENT')
})

test('hostile values never crash the process: every throw carries a stable code', () => {
  const cyclic = {}
  cyclic.self = cyclic
  let deep = []
  for (let i = 0; i < 10_000; i++) deep = [deep]
  const sparse = []
  sparse.length = 2 ** 32 - 1
  const values = [
    undefined, null, NaN, Infinity, -Infinity, -0, 2 ** 64, -(2 ** 63) - 4096, 1e300, '', 'x'.repeat(1 << 20),
    '\u0000\ud800', Symbol('s'), 10n, () => {}, cyclic, deep, sparse, new Date(0), new Map([[1, 2]]),
    new Uint8Array(3), Object.create(null), new Proxy({}, { ownKeys() { throw new RangeError('trap') } }),
    { toJSON() { return 1 } }, [undefined, , 3], { a: undefined }, // eslint-disable-line no-sparse-arrays
  ]
  const clock = new ab.ManualClock()
  const subjects = () => [
    new ab.FailureBreaker({}, clock),
    new ab.StagnationBreaker({}, clock),
    new ab.BudgetBreaker({}, clock),
    new ab.ExitStrategy(null, clock),
    new ab.FixPlan({ steps: [] }, clock),
    new ab.Loop({ budget: {} }, clock),
    new ab.Monitor({ clock }),
  ]
  const check = (fn) => {
    try {
      fn()
    } catch (error) {
      if (error instanceof RangeError && error.message === 'trap') return // the Proxy's own error
      assert.ok(CODES.includes(error.code), `${error.code}: ${error.message}`)
    }
  }
  for (const value of values) {
    for (const Ctor of [ab.FailureBreaker, ab.StagnationBreaker, ab.BudgetBreaker, ab.ExitStrategy, ab.FixPlan, ab.Loop, ab.Monitor, ab.ManualClock]) {
      check(() => new Ctor(value))
      check(() => new Ctor(undefined, value))
    }
    for (const subject of subjects()) {
      const proto = Object.getPrototypeOf(subject)
      for (const name of Object.getOwnPropertyNames(proto)) {
        if (name === 'constructor' || name === 'call' || name === 'on' || name === 'off') continue
        const descriptor = Object.getOwnPropertyDescriptor(proto, name)
        if (typeof descriptor.value !== 'function') continue
        check(() => subject[name](value))
        check(() => subject[name](value, value))
      }
    }
    for (const fn of [ab.analyze, ab.fingerprint, ab.configFromEnv]) {
      check(() => fn(value))
      check(() => fn('x', value))
    }
    check(() => clock.set(value))
  }
  // Every object is still usable.
  for (const subject of subjects()) assert.ok(subject.listenerErrors >= 0)
})

test('persistence: save() and load() round-trip, a missing file is a fresh breaker, statePath saves', (t) => {
  const dir = tmpDir(t)
  const clock = new ab.ManualClock(1000)
  const breaker = new ab.FailureBreaker({ failureThreshold: 2 }, clock)
  breaker.recordFailure('a')
  breaker.recordFailure('b')
  const file = path.join(dir, 'state.json')
  breaker.save(file)
  const restored = new ab.FailureBreaker({ failureThreshold: 2 }, clock)
  assert.equal(restored.load(file), true)
  assert.equal(restored.state, 'OPEN')
  assert.equal(restored.getStatus().openedAt, 1000)
  assert.equal(restored.load(path.join(dir, 'missing.json')), false)
  throwsCode(() => restored.save(path.join(dir, 'no', 'such', 'dir', 'state.json')), 'IO')
  fs.writeFileSync(path.join(dir, 'corrupt.json'), '{not json')
  throwsCode(() => restored.load(path.join(dir, 'corrupt.json')), 'INVALID_SNAPSHOT')
  const statePath = path.join(dir, 'auto.json')
  const auto = new ab.FailureBreaker({ failureThreshold: 1, statePath }, clock)
  auto.recordFailure('x')
  assert.equal(JSON.parse(fs.readFileSync(statePath, 'utf8')).state, 'OPEN')
  assert.equal(new ab.FailureBreaker({ statePath }, clock).state, 'OPEN')
})

test('StagnationBreaker: progress, transient errors, snapshot and restore', () => {
  const breaker = new ab.StagnationBreaker({ noProgressThreshold: 2, sameErrorThreshold: 2 })
  const changes = []
  breaker.on('stateChange', (e) => changes.push(e.to))
  breaker.recordProgress({ filesChanged: 1, outputLength: 100 })
  breaker.recordError('429 Too Many Requests', { transient: true })
  breaker.recordError('429 Too Many Requests', { transient: true })
  assert.equal(breaker.check().allowContinue, true)
  breaker.recordProgress({})
  breaker.recordProgress({})
  assert.deepEqual(breaker.check(), {
    allowContinue: true,
    state: 'HALF_OPEN',
    reason: 'No progress in 2 consecutive iterations',
    slug: 'no_progress',
  })
  const snapshot = breaker.snapshot()
  breaker.recordError('TypeError at line 12')
  breaker.recordError('TypeError at line 13')
  assert.equal(breaker.state, 'OPEN')
  assert.deepEqual(changes, ['HALF_OPEN', 'OPEN'])
  breaker.restore(snapshot)
  assert.equal(breaker.state, 'CLOSED') // HALF_OPEN restores as CLOSED
})

test('profiles configure the three breakers; the step detectors watch recordStep()', () => {
  assert.deepEqual(ab.profileNames(), ['seed', 'coding-agent'])
  assert.equal(ab.profile('no such profile'), null)
  throwsCode(() => ab.profile(42), 'INVALID_ARGUMENT', TypeError)
  const seed = ab.profile('seed')
  assert.deepEqual(new ab.FailureBreaker(seed.failure).getStatus(), new ab.FailureBreaker().getStatus())
  const coding = ab.profile('coding-agent')
  assert.equal(coding.stagnation.errorMatch, 'key_line')
  const clock = new ab.ManualClock()
  const breakers = [
    new ab.FailureBreaker(coding.failure, clock),
    new ab.StagnationBreaker(coding.stagnation, clock),
    new ab.BudgetBreaker(coding.budget, clock),
  ]
  const stagnation = breakers[1]
  const changes = []
  stagnation.on('stateChange', (e) => changes.push(e.reason))
  for (let i = 0; i < 4; i++) stagnation.recordStep({ action: 'bash: cat missing.txt', result: 'No such file', failed: true })
  assert.equal(stagnation.state, 'CLOSED')
  stagnation.recordStep({ action: 'bash: cat missing.txt', result: 'No such file', failed: true })
  assert.equal(stagnation.state, 'OPEN')
  assert.equal(changes.length, 1)
  throwsCode(() => stagnation.recordStep({ result: 'x' }), 'INVALID_ARGUMENT')
  throwsCode(() => stagnation.recordStep({ action: 'x', failed: 'yes' }), 'INVALID_ARGUMENT')
  // The seed's defaults ignore steps.
  const plain = new ab.StagnationBreaker()
  for (let i = 0; i < 50; i++) plain.recordStep({ action: 'a' })
  assert.equal(plain.state, 'CLOSED')
})

test('BudgetBreaker: halts, tick, and a config read from the environment', () => {
  const clock = new ab.ManualClock(0)
  const { config, warnings } = ab.configFromEnv({ AGENTBREAKER_TOOL_CAP: '2', AGENTBREAKER_IDLE_SECS: 'soon' })
  assert.equal(config.maxToolCallsPerTask, 2)
  assert.equal(config.maxIdleSecs, 300)
  assert.deepEqual(warnings.map((w) => w.variable), ['AGENTBREAKER_IDLE_SECS'])
  const budget = new ab.BudgetBreaker(config, clock)
  const halts = []
  budget.on('halt', (e) => halts.push(e.halt.slug))
  budget.ingest({ type: 'heartbeat', taskId: 'research', phase: 'starting' })
  assert.equal(budget.ingest({ type: 'tool_use', name: 'web_fetch' }), null)
  assert.equal(budget.ingest({ type: 'tool_use', name: 'web_fetch' }), null)
  assert.deepEqual(budget.ingest({ type: 'tool_use', name: 'web_fetch' }), {
    kind: 'ToolCallLimit',
    slug: 'tool_call_limit',
    taskId: 'research',
    message: 'tool calls: 3 of 2',
    actual: 3,
    limit: 2,
  })
  budget.ingest({ type: 'heartbeat', taskId: 'sibling', phase: 'starting' })
  clock.set(301_000)
  assert.deepEqual(budget.tick().map((h) => [h.taskId, h.slug]), [['sibling', 'idle_timeout']])
  assert.deepEqual(halts, ['tool_call_limit', 'idle_timeout'])
  assert.equal(budget.snapshot().tasks.length, 2)
})

test('configFromEnv() reads process.env by default', () => {
  const before = process.env.AGENTBREAKER_DURATION_SECS
  process.env.AGENTBREAKER_DURATION_SECS = '77'
  try {
    assert.equal(ab.configFromEnv().config.maxTaskDurationSecs, 77)
    assert.equal(ab.configFromEnv(undefined).config.maxTaskDurationSecs, 77)
    assert.equal(ab.configFromEnv({}).config.maxTaskDurationSecs, 1800)
    assert.equal(ab.configFromEnv({ AGENTBREAKER_DURATION_SECS: undefined }).config.maxTaskDurationSecs, 1800)
  } finally {
    if (before === undefined) delete process.env.AGENTBREAKER_DURATION_SECS
    else process.env.AGENTBREAKER_DURATION_SECS = before
  }
})

test('analyze(), strategies and fix plans', () => {
  const analysis = ab.analyze('All tasks complete, nothing left to do. 42 tests passed.')
  assert.deepEqual(analysis, {
    completionSignal: { detected: true, confidence: 90, phrases: ['all tasks complete', 'nothing left to do'] },
    confidence: 90,
    exitSignal: null,
    testsPassing: 42,
    testsFailing: null,
  })
  assert.deepEqual(new ab.ExitStrategy().shouldExit(analysis), { exit: true, reason: 'completed' })
  const breakerStrategy = new ab.ExitStrategy({ type: 'circuit_breaker' })
  assert.deepEqual(breakerStrategy.shouldExit(analysis, 'OPEN'), { exit: true, reason: 'circuit_open' })
  assert.equal(breakerStrategy.planStatus(), null)
  const plan = ab.FixPlan.fromMarkdown('- [x] lex\n- [ ] parse\nnotes\n* [ ] emit', 1)
  const warnings = []
  plan.on('warning', (e) => warnings.push(e.message))
  assert.equal(plan.getStatus().currentStep, 1)
  assert.deepEqual(plan.shouldExit(ab.analyze('working on it')), { exit: false, reason: null })
  assert.deepEqual(warnings, ['Step 2 skipped after 1 attempts: parse'])
  assert.deepEqual(plan.shouldExit(ab.analyze('Done.')), { exit: true, reason: 'plan_exhausted' })
  plan.reset()
  assert.equal(plan.getStatus().currentStep, 1)
  assert.equal(ab.fingerprint('Path not found: ServerScriptService.MainScript', 'template'), 'Path not found: <path>')
  assert.equal(ab.fingerprint('  exact  ', 'exact'), 'exact')
  assert.equal(ab.fingerprint('Error: disk full at 12:30\n  detail 1', 'key_line'), 'Error: disk full at #')
  // A recorded analysis goes back into a strategy; a malformed one is refused.
  assert.deepEqual(new ab.ExitStrategy().shouldExit(JSON.parse(JSON.stringify(analysis))), { exit: true, reason: 'completed' })
  throwsCode(() => new ab.ExitStrategy().shouldExit({ ...analysis, confidence: 101 }), 'INVALID_ARGUMENT')
})

test('the README example guards an agent loop', () => {
  const loop = new ab.Loop({ maxIterations: 5, budget: { maxToolCallsPerTask: 20 } })
  const outputs = ['Refactored the parser.', 'All tasks complete, nothing left to do. 42 tests passed.']
  let decision
  for (const output of outputs) {
    decision = loop.observe({ output, filesChanged: 1, events: [{ type: 'tool_use', name: 'edit' }] })
    if (decision.action === 'exit') break
  }
  assert.deepEqual([decision.action, decision.reason, decision.outcome, decision.iteration], ['exit', 'completed', 'success', 2])
  throwsCode(() => loop.observe({ output: 'more' }), 'INVALID_ARGUMENT')
  loop.reset()
  assert.equal(loop.getStatus().iteration, 0)
})

test("the README's Node examples run", (t) => {
  const readme = path.join(__dirname, '..', '..', 'README.md')
  const blocks = [...fs.readFileSync(readme, 'utf8').matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])
  assert.ok(blocks.length > 0)
  // The examples `require('agentbreaker')`: resolve that name to this package.
  const dir = tmpDir(t)
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'agentbreaker'), 'dir')
  for (const [i, code] of blocks.entries()) {
    const file = path.join(dir, `example${i}.js`)
    fs.writeFileSync(file, code)
    execFileSync(process.execPath, [file], { cwd: dir, stdio: 'pipe' })
  }
})

test('ES modules import the named exports', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'esm.mjs')
  const url = require('node:url').pathToFileURL(path.join(__dirname, '..', 'agentbreaker.js')).href
  fs.writeFileSync(
    file,
    `import { FailureBreaker, Loop } from ${JSON.stringify(url)}\n` +
      `const b = new FailureBreaker({ failureThreshold: 1 })\n` +
      `b.recordFailure('x')\n` +
      `await b.call(() => 1).catch((e) => console.log(e.code, typeof Loop))\n`,
  )
  assert.equal(execFileSync(process.execPath, [file], { encoding: 'utf8' }).trim(), 'CIRCUIT_OPEN function')
})

test('index.d.ts has no `any`', () => {
  const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')
  const code = dts
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/'[^'\n]*'/g, "''")
  assert.doesNotMatch(code, /\bany\b/)
})

// Monitor -----------------------------------------------------------------------------------

/** The events of one step of an agent that re-runs a failing command. */
function failingStep(i) {
  return [
    { type: 'assistant', text: 'Let me run the tests.' },
    { type: 'tool_use', name: 'Bash', id: `t${i}`, input: { command: 'pytest -q' } },
    { type: 'tool_result', id: `t${i}`, ok: false, text: '1 failed' },
  ]
}

test('Monitor: every event gets a verdict; warn with a nudge, then halt; the task stays halted', () => {
  const clock = new ab.ManualClock(0)
  const monitor = new ab.Monitor({ profile: 'coding-agent', clock })
  const verdicts = []
  for (let i = 0; i < 5; i++) for (const event of failingStep(i)) verdicts.push(monitor.observe(event))
  const first = verdicts[0]
  assert.equal(Object.getPrototypeOf(first), Object.prototype)
  assert.deepEqual(Object.keys(first), ['action', 'reason', 'message', 'nudge', 'taskId', 'step', 'detail'])
  assert.deepEqual(first, { action: 'continue', reason: null, message: null, nudge: null, taskId: 'session', step: 1, detail: null })
  const warn = verdicts.find((v) => v.action === 'warn')
  assert.equal(warn.reason, 'repeated_step')
  assert.match(warn.nudge, /pytest -q/)
  assert.deepEqual([warn.detail.count, warn.detail.threshold], [3, 5])
  const halt = verdicts.at(-1)
  assert.deepEqual([halt.action, halt.reason, halt.step], ['halt', 'repeated_step', 5])
  assert.deepEqual(monitor.observe({ type: 'alive' }), halt)
  const [task] = monitor.status().tasks
  assert.deepEqual([task.taskId, task.halted, task.toolCalls, task.halt], ['session', true, 5, halt])
  assert.equal(task.rules.repeated_step.count, 5)
  monitor.reset()
  assert.deepEqual(monitor.status().tasks, [])
  assert.equal(monitor.config.profile, 'coding-agent')
  assert.equal(monitor.config.warnBefore, 2)
})

test('Monitor: malformed events are INVALID_EVENT and change nothing; bad configs INVALID_CONFIG', () => {
  const monitor = new ab.Monitor({ clock: new ab.ManualClock(0) })
  monitor.observe({ type: 'tool_use', name: 'Bash' })
  const before = monitor.snapshot()
  throwsCode(() => monitor.observe({ type: 'tool_use' }), 'INVALID_EVENT')
  throwsCode(() => monitor.observe({ type: 'tool_result', ok: 'yes' }), 'INVALID_EVENT')
  throwsCode(() => monitor.observe('tool_use'), 'INVALID_EVENT')
  throwsCode(() => monitor.observe(), 'INVALID_EVENT')
  throwsCode(() => monitor.observe({ type: 'usage', costCents: NaN }), 'INVALID_EVENT', TypeError)
  throwsCode(() => monitor.observe({ type: 'tool_use', name: 'Bash', input: () => 1 }), 'INVALID_EVENT', TypeError)
  assert.deepEqual(monitor.snapshot(), before)
  assert.equal(monitor.observe({ type: 'something_else' }).taskId, null)
  assert.equal(monitor.status().ignoredEvents, 1)
  throwsCode(() => new ab.Monitor({ profile: 'fast' }), 'INVALID_CONFIG')
  throwsCode(() => new ab.Monitor({ toolLimits: { web_fetch: -1 } }), 'INVALID_CONFIG')
  throwsCode(() => new ab.Monitor({ warnBefore: Infinity }), 'INVALID_CONFIG', TypeError)
  throwsCode(() => new ab.Monitor({ stagnation: { repeatTreshold: 3 } }), 'INVALID_CONFIG')
  throwsCode(() => new ab.Monitor('coding-agent'), 'INVALID_CONFIG')
})

test('Monitor: the clock comes in the options or second, not both', () => {
  const clock = new ab.ManualClock(1000)
  const inOptions = new ab.Monitor({ profile: 'seed', budget: { maxIdleSecs: 10 }, clock })
  const second = new ab.Monitor({ profile: 'seed', budget: { maxIdleSecs: 10 } }, clock)
  for (const monitor of [inOptions, second]) monitor.observe({ type: 'alive' })
  clock.advance(11_000)
  for (const monitor of [inOptions, second]) {
    assert.deepEqual(monitor.tick().map((v) => [v.action, v.reason]), [['halt', 'idle_timeout']])
  }
  assert.ok(new ab.Monitor({ clock: new ab.SystemClock() }) instanceof ab.Monitor)
  assert.ok(new ab.Monitor({ clock: null }, null) instanceof ab.Monitor)
  throwsCode(() => new ab.Monitor({ clock }, clock), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => new ab.Monitor({ clock: {} }), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => new ab.Monitor({ clock: new ab.FailureBreaker() }), 'INVALID_ARGUMENT', TypeError)
  throwsCode(() => new ab.Monitor({}, 'a clock'), 'INVALID_ARGUMENT', TypeError)
})

test('Monitor: listeners hear every warning and halt as {type: "verdict", ..., atMs}', () => {
  const monitor = new ab.Monitor({ clock: new ab.ManualClock(7) })
  const heard = []
  const listener = (event) => heard.push(event)
  monitor.on('verdict', listener)
  throwsCode(() => monitor.on('halt', listener), 'INVALID_ARGUMENT')
  for (let i = 0; i < 5; i++) for (const event of failingStep(i)) monitor.observe(event)
  // Every warning, not only the one the verdict carries.
  assert.deepEqual(heard.map((e) => [e.type, e.action, e.reason, e.step]), [
    ['verdict', 'warn', 'repeated_step', 3],
    ['verdict', 'warn', 'fail_streak', 3],
    ['verdict', 'halt', 'repeated_step', 5],
  ])
  assert.deepEqual(Object.keys(heard[2]), ['type', 'action', 'reason', 'message', 'nudge', 'taskId', 'step', 'detail', 'atMs'])
  assert.equal(heard[2].atMs, 7)
  monitor.off('verdict', listener)
  monitor.on('verdict', () => {
    throw new Error('a listener that throws')
  })
  monitor.reset()
  for (let i = 0; i < 5; i++) for (const event of failingStep(i)) monitor.observe(event)
  assert.equal(heard.length, 3)
  assert.equal(monitor.listenerErrors, 3)
})

test('Monitor: a snapshot through JSON text restores into a new monitor, which goes on alike', () => {
  const a = new ab.Monitor({ clock: new ab.ManualClock(0) })
  const b = new ab.Monitor({ clock: new ab.ManualClock(0) })
  for (let i = 0; i < 3; i++) for (const event of failingStep(i)) a.observe(event)
  b.restore(JSON.parse(JSON.stringify(a.snapshot())))
  assert.deepEqual(b.snapshot(), a.snapshot())
  for (let i = 3; i < 5; i++) {
    for (const event of failingStep(i)) assert.deepEqual(b.observe(event), a.observe(event))
  }
  assert.equal(b.status().tasks[0].halted, true)
  throwsCode(() => b.restore({ ...a.snapshot(), kind: 'failure' }), 'INVALID_SNAPSHOT')
  throwsCode(() => b.restore({ ...a.snapshot(), lastEventAt: Infinity }), 'INVALID_SNAPSHOT', TypeError)
  throwsCode(() => b.restore(), 'INVALID_SNAPSHOT')
  assert.deepEqual(b.snapshot(), a.snapshot())
})

test('Monitor.observe: plain events (sent as JSON text) and others (walked) get the same answers', () => {
  // A class instance is not a plain object: it goes through the addon's walker.
  class Walked {
    constructor(fields) {
      Object.assign(this, fields)
    }
  }
  const events = [
    ...failingStep(0),
    { type: 'usage', usage: { input_tokens: 2 ** 60, output_tokens: 10 } },
    { type: 'usage', costCents: 0.1 + 0.2, model: 'claude-sonnet-4', extra: [1, undefined, null] },
    { type: 'assistant', text: 'lone \ud800 surrogate', taskId: undefined },
    { type: 'progress', files: ['a.py', 'b.py'], digest: 'ab'.repeat(8), testsPassing: 3 },
    { type: 'tool_use', name: 'edit', input: { path: 'a.py', lines: [1, 2.5, -0], deep: { a: { b: { c: [] } } } } },
    ...failingStep(1),
    ...failingStep(2),
  ]
  const fast = new ab.Monitor({ clock: new ab.ManualClock(0) })
  const walked = new ab.Monitor({ clock: new ab.ManualClock(0) })
  for (const event of events) {
    assert.deepEqual(fast.observe(event), walked.observe(new Walked(event)), JSON.stringify(event))
  }
  assert.deepEqual(fast.snapshot(), walked.snapshot())
  for (const bad of [{ type: 'tool_use' }, { type: 'usage', usage: { input_tokens: -1 } }, { type: 'progress', files: 1.5 }, 'x', null]) {
    const message = (monitor, event) => {
      try {
        monitor.observe(event)
      } catch (error) {
        return [error.code, error.message, error instanceof TypeError]
      }
      return null
    }
    const wrapped = bad !== null && typeof bad === 'object' ? new Walked(bad) : bad
    assert.deepEqual(message(fast, bad), message(walked, wrapped))
    assert.equal(message(fast, bad)[0], 'INVALID_EVENT')
  }
  assert.deepEqual(fast.snapshot(), walked.snapshot())
})

test('Monitors work in worker threads, listeners included', async () => {
  const worker = new Worker(
    `
    const { parentPort } = require('node:worker_threads')
    const ab = require(${JSON.stringify(path.join(__dirname, '..'))})
    const monitor = new ab.Monitor({ profile: 'seed', budget: { maxToolCallsPerTask: 1 }, budgetWarnPercent: 0 })
    const seen = []
    monitor.on('verdict', (e) => seen.push(e.reason))
    monitor.observe({ type: 'tool_use', name: 'a' })
    const verdict = monitor.observe({ type: 'tool_use', name: 'b' })
    parentPort.postMessage({ seen, action: verdict.action })
    `,
    { eval: true },
  )
  const [message] = await require('node:events').once(worker, 'message')
  assert.deepEqual(message, { seen: ['tool_call_limit'], action: 'halt' })
  await worker.terminate()
})

test('AgentHaltedError carries the halt verdict and code HALTED', () => {
  const monitor = new ab.Monitor({ clock: new ab.ManualClock(0) })
  let halt
  for (let i = 0; i < 5; i++) for (const event of failingStep(i)) halt = monitor.observe(event)
  const error = new ab.AgentHaltedError(halt)
  assert.ok(error instanceof Error)
  assert.deepEqual([error.name, error.code, error.message], ['AgentHaltedError', 'HALTED', halt.message])
  assert.equal(error.verdict, halt)
  assert.match(String(error), /^AgentHaltedError: the same step 5 times/)
  const byHand = new ab.AgentHaltedError('stopped by the operator')
  assert.deepEqual([byHand.message, byHand.verdict.action, byHand.verdict.reason], ['stopped by the operator', 'halt', null])
  for (const bad of [undefined, null, 42, ['halt']]) throwsCode(() => new ab.AgentHaltedError(bad), 'INVALID_ARGUMENT', TypeError)
})

test("the README's Monitor example prints what its comments say", (t) => {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8')
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes('new Monitor('))
  assert.ok(block, 'the README has a Monitor example')
  const expected = block.split('\n').filter((l) => l.startsWith('// ') && /^\/\/ (nudge|halted)/.test(l)).map((l) => l.slice(3))
  assert.equal(expected.length, 2)
  const dir = tmpDir(t)
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'agentbreaker'), 'dir')
  fs.writeFileSync(path.join(dir, 'monitor.js'), block)
  const output = execFileSync(process.execPath, [path.join(dir, 'monitor.js')], { cwd: dir, encoding: 'utf8' })
  assert.deepEqual(output.trim().split('\n'), expected)
})

test('ES modules import the Monitor and AgentHaltedError', (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, 'esm-monitor.mjs')
  const url = require('node:url').pathToFileURL(path.join(__dirname, '..', 'agentbreaker.js')).href
  fs.writeFileSync(
    file,
    `import { AgentHaltedError, Monitor } from ${JSON.stringify(url)}\n` +
      `const v = new Monitor().observe({ type: 'alive' })\n` +
      `console.log(v.action, new AgentHaltedError('x').code)\n`,
  )
  assert.equal(execFileSync(process.execPath, [file], { encoding: 'utf8' }).trim(), 'continue HALTED')
})
