'use strict'
// The store keys from Node (docs/distributed.md) against a real redis-server: `new
// FailureBreaker({store, key})` and `new Monitor({store, key})` reach the core's config, breakers
// and monitors in two processes on one key share one circuit and one budget, the hot path never
// waits for the store, bad configs are INVALID_CONFIG, a refused password is IO and never shown.
// Each test starts its own redis-server (Debian's package) on a free loopback port with a
// temporary directory, and stops it at its end. Run by `make test-node-redis` (not by
// `node --test test/*.test.js`: it needs redis-server).

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawn } = require('node:child_process')

const ab = require('..')

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A throw-away redis-server (no persistence), paused and stopped on demand. */
async function redisServer(t, ...args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbreaker-node-redis-'))
  const port = await freePort()
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    '--save', '', '--appendonly', 'no', '--loglevel', 'warning', ...args], { stdio: 'ignore' })
  const server = {
    port,
    url: (password) => `redis://${password ? `:${password}@` : ''}127.0.0.1:${port}/0`,
    cli: (...command) => {
      const auth = args.includes('--requirepass')
        ? ['--no-auth-warning', '-a', args[args.indexOf('--requirepass') + 1]]
        : []
      try {
        return execFileSync('redis-cli', ['-p', String(port), ...auth, ...command], { encoding: 'utf8', stdio: 'pipe' }).trim()
      } catch (error) {
        return String(error.stdout) + String(error.stderr)
      }
    },
    pause: () => process.kill(proc.pid, 'SIGSTOP'),
    resume: () => process.kill(proc.pid, 'SIGCONT'),
  }
  t.after(() => {
    try {
      server.resume()
    } catch {}
    proc.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  })
  for (let i = 0; i < 500; i++) {
    const reply = server.cli('PING')
    if (reply.includes('PONG') || reply.includes('NOAUTH')) return server
    await sleep(20)
  }
  throw new Error(`redis-server did not start on ${port}`)
}

/** Whether the object's link to the store is up. */
const linked = (o) => o.storeStatus().mode === 'shared'

/** Runs `body` (JavaScript, with `ab` in scope) in another Node process; returns its stdout. */
function inAnotherProcess(body) {
  const script = `const ab = require(${JSON.stringify(path.join(__dirname, '..'))});\n${body}`
  return execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })
}

async function eventually(check, limitMs = 5000) {
  const deadline = Date.now() + limitMs
  while (Date.now() < deadline) {
    if (check()) return true
    await sleep(5)
  }
  return check()
}

function throwsCode(fn, code) {
  assert.throws(fn, (error) => {
    assert.equal(error.code, code, `${error.code}: ${error.message}`)
    return true
  })
}

test('two breakers in two processes share one circuit', async (t) => {
  const server = await redisServer(t)
  const config = { store: server.url(), key: 'tool:search', failureThreshold: 3 }
  const breaker = new ab.FailureBreaker(config)
  const changes = []
  breaker.on('stateChange', (event) => changes.push(event))
  breaker.recordFailure('boom')
  // Another process records the second and the third failure: its third opens the circuit.
  const other = inAnotherProcess(`
    const b = new ab.FailureBreaker(${JSON.stringify(config)})
    const changes = []
    b.on('stateChange', (e) => changes.push(e.to))
    b.recordFailure('boom'); b.recordFailure('boom')
    console.log(JSON.stringify([b.state, changes, b.getStatus().consecutiveFailures]))`)
  assert.deepEqual(JSON.parse(other), ['OPEN', ['OPEN'], 3])
  assert.ok(await eventually(() => breaker.state === 'OPEN'), 'this process hears of the opening')
  assert.equal(breaker.shouldAllowOperation().allowed, false)
  await assert.rejects(breaker.call(() => 42), { code: 'CIRCUIT_OPEN' })
  assert.equal(breaker.getStatus().consecutiveFailures, 3)
  assert.deepEqual(changes, [], 'only the process whose call opened it emits the change')
  assert.deepEqual(breaker.storeStatus(), {
    url: server.url(), key: 'tool:search', mode: 'shared', outages: 0, lastError: null,
  })
  assert.equal(new ab.FailureBreaker().storeStatus(), null)
  assert.equal(server.cli('HGET', 'tool:search:failure', 'state'), 'OPEN')
  breaker.reset() // for every process
  assert.equal(server.cli('HGET', 'tool:search:failure', 'state'), 'CLOSED')
  assert.equal(inAnotherProcess(`
    console.log(new ab.FailureBreaker(${JSON.stringify(config)}).shouldAllowOperation().allowed)`).trim(), 'true')
})

test('two monitors in two processes share one budget', async (t) => {
  const server = await redisServer(t)
  const config = { store: server.url(), key: 'tenant-7', profile: 'seed', budget: { maxToolCallsPerTask: 3 } }
  const monitor = new ab.Monitor(config)
  assert.equal(monitor.config.store, server.url())
  assert.equal(monitor.config.key, 'tenant-7')
  assert.equal(monitor.config.storeTimeoutMs, 50)
  assert.equal(monitor.config.storeFailure, 'open')
  assert.equal(monitor.config.failure.store, undefined)
  const use = { type: 'tool_use', name: 'search', taskId: 't1' }
  assert.equal(monitor.observe(use).action, 'continue')
  const other = inAnotherProcess(`
    const m = new ab.Monitor(${JSON.stringify(config)})
    const use = ${JSON.stringify(use)}
    console.log(JSON.stringify([m.observe(use).action, m.observe(use).action]))`)
  // The fleet's third call reaches 80 % of the cap: a warning, in the other process.
  assert.deepEqual(JSON.parse(other), ['continue', 'warn'])
  const verdict = monitor.observe(use)
  assert.equal(verdict.action, 'halt')
  assert.equal(verdict.reason, 'tool_call_limit')
  assert.equal(verdict.message, 'tool calls: 4 of 3')
  const status = monitor.status()
  assert.equal(status.store.mode, 'shared')
  assert.equal(status.tasks[0].toolCalls, 4) // the fleet's, as of this process's last round trip
  assert.equal(server.cli('HGET', 'tenant-7:task:t1', 'toolCalls'), '4')
  assert.equal(monitor.storeStatus().mode, 'shared')
  assert.equal(new ab.Monitor().storeStatus(), null)
})

test('the hot path never waits for the store; the calls that may wait at most storeTimeoutMs', async (t) => {
  const server = await redisServer(t)
  const timeout = 400
  const breaker = new ab.FailureBreaker({ store: server.url(), key: 'hot', storeTimeoutMs: timeout })
  const monitor = new ab.Monitor({ store: server.url(), key: 'hot', storeTimeoutMs: timeout })
  // Construction waits for the first connection at most the timeout; on a loaded machine the
  // link can come up later, and a call before it falls back at once instead of waiting.
  assert.ok(await eventually(() => linked(breaker) && linked(monitor), 10000),
    `no link to the store: ${JSON.stringify([breaker.storeStatus(), monitor.storeStatus()])}`)
  monitor.observe({ type: 'alive' })
  const warnings = []
  breaker.on('warning', (event) => warnings.push(event.message))
  server.pause()
  const took = (fn) => {
    const start = process.hrtime.bigint()
    fn()
    return Number(process.hrtime.bigint() - start) / 1e6
  }
  // CLOSED with nothing pending: answered from this process's view, no round trip.
  let slowest = 0
  for (let i = 0; i < 1000; i++) {
    slowest = Math.max(slowest, took(() => breaker.shouldAllowOperation()),
      took(() => breaker.recordSuccess()), took(() => breaker.tryAcquire()))
  }
  const start = Date.now()
  for (let i = 0; i < 1000; i++) await breaker.call(() => i)
  assert.ok(Date.now() - start < timeout, `1000 guarded calls took ${Date.now() - start} ms`)
  assert.ok(slowest < 50, `the slowest CLOSED call took ${slowest} ms with the store paused`)
  // A failure and a Monitor's tool call are round trips: each waits, at most the timeout (plus
  // the socket timer's lateness), then the local fallback decides.
  const failure = took(() => breaker.recordFailure('x'))
  assert.ok(failure >= timeout * 0.9 && failure < timeout + 200, `recordFailure took ${failure} ms`)
  assert.equal(breaker.storeStatus().mode, 'local')
  assert.match(warnings[0], /Shared circuit state unreachable at redis:\/\/127\.0\.0\.1:\d+\/0 \(key hot\)/)
  const observe = took(() => monitor.observe({ type: 'tool_use', name: 'x' }))
  assert.ok(observe < timeout + 200, `observe took ${observe} ms`)
  server.resume()
})

test('a bad store config is INVALID_CONFIG', () => {
  const bad = [
    { key: 'k' }, // no store
    { store: 'redis://127.0.0.1:6379/0' }, // no key
    { store: 'http://127.0.0.1:6379/0', key: 'k' },
    { store: 'redis://127.0.0.1:0/0', key: 'k' },
    { store: 'redis://127.0.0.1:6379/x', key: 'k' },
    { store: 'redis://127.0.0.1:6379/0', key: 'k', storeTimeoutMs: 0 },
    { store: 'redis://127.0.0.1:6379/0', key: 'k', storeTimeoutMs: 60_001 },
    { store: 'redis://127.0.0.1:6379/0', key: 'k', storeFailure: 'maybe' },
    { store: 'redis://127.0.0.1:6379/0', key: 'k', statePath: '/tmp/x.json' },
  ]
  for (const config of bad) {
    throwsCode(() => new ab.FailureBreaker(config), 'INVALID_CONFIG')
    if (config.statePath === undefined) throwsCode(() => new ab.Monitor(config), 'INVALID_CONFIG')
  }
  assert.throws(() => new ab.Monitor({ failure: { store: 'redis://127.0.0.1:6379/0', key: 'k' } }),
    { code: 'INVALID_CONFIG', message: /top level/ })
  assert.throws(() => new ab.FailureBreaker({ store: 42, key: 'k' }), { code: 'INVALID_CONFIG' })
})

test('a refused password is IO and never shown', async (t) => {
  const secret = 'Pa55-n0t-sh0wn'
  const server = await redisServer(t, '--requirepass', secret)
  for (const make of [(c) => new ab.FailureBreaker(c), (c) => new ab.Monitor(c)]) {
    assert.throws(() => make({ store: server.url('wrong-Pa55word'), key: 'k' }), (error) => {
      assert.equal(error.code, 'IO', error.message)
      assert.ok(!error.message.includes('wrong-Pa55word'), error.message)
      assert.match(error.message, /redis:\/\/:\*\*\*@127\.0\.0\.1/)
      return true
    })
  }
  assert.throws(() => new ab.Monitor({ store: `redis://:${secret}@127.0.0.1:0/0`, key: 'k' }), (error) => {
    assert.equal(error.code, 'INVALID_CONFIG')
    assert.ok(!error.message.includes(secret), error.message)
    return true
  })
  const breaker = new ab.FailureBreaker({ store: server.url(secret), key: 'pw', failureThreshold: 2 })
  const monitor = new ab.Monitor({ store: server.url(secret), key: 'pw' })
  const shown = [JSON.stringify(breaker.storeStatus()), JSON.stringify(monitor.config)]
  assert.equal(monitor.config.store, `redis://:***@127.0.0.1:${server.port}/0`)
  breaker.on('stateChange', (e) => shown.push(JSON.stringify(e)))
  breaker.recordFailure('x')
  breaker.recordFailure('x')
  assert.equal(breaker.state, 'OPEN')
  shown.push(JSON.stringify(breaker.getStatus()), breaker.shouldAllowOperation().message)
  assert.equal(breaker.storeStatus().url, `redis://:***@127.0.0.1:${server.port}/0`)
  for (const text of shown) assert.ok(!text.includes(secret), text)
})
