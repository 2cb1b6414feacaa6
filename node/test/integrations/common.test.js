'use strict'
// What every Node adapter shares (integrations/_common.js): Watcher.observe never throws. An
// event the Monitor refuses is given again as its JSON-safe copy; if still refused, it is counted
// in `observeErrors`, warned about once, and answered with a `continue` verdict.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Monitor } = require('agentbreaker')
const { Watcher, jsonSafe } = require('../../integrations/_common.js')

function deep(levels) {
  let value = []
  for (let i = 1; i < levels; i++) value = [value]
  return value
}

test('jsonSafe: BigInt, cycles, functions, symbols, non-finite numbers, Map, Set, Date, depth', () => {
  const cyclic = { name: 'a' }
  cyclic.self = cyclic
  const shared = { x: 1 }
  const copy = jsonSafe({
    big: 12345678901234567890n,
    cyclic,
    twice: [shared, shared],
    fn: function probe() {},
    sym: Symbol('s'),
    nan: NaN,
    inf: -Infinity,
    map: new Map([[1, 2n], ['k', 'v']]),
    set: new Set([1, 'a']),
    date: new Date(0),
    gone: undefined,
    list: [undefined, 1],
  })
  assert.deepEqual(copy, {
    big: '12345678901234567890',
    cyclic: { name: 'a', self: '<cycle>' },
    twice: [{ x: 1 }, { x: 1 }],
    fn: '<function probe>',
    sym: 'Symbol(s)',
    nan: 'NaN',
    inf: '-Infinity',
    map: { 1: '2', k: 'v' },
    set: [1, 'a'],
    date: '1970-01-01T00:00:00.000Z',
    list: [null, 1],
  })
  // past 64 levels, the rest is text: the Monitor takes the copy (its limit is 127)
  let level = jsonSafe(deep(200))
  let depth = 0
  while (Array.isArray(level)) {
    level = level[0]
    depth++
  }
  assert.equal(depth, 64)
  assert.equal(typeof level, 'string')
  new Monitor().observe({ type: 'tool_use', name: 'x', id: 'd', input: jsonSafe(deep(200)) })
})

test('Watcher.observe: an input the Monitor refuses is watched as its JSON-safe copy', () => {
  const watcher = new Watcher(new Monitor())
  const run = watcher.run('t')
  const cyclic = {}
  cyclic.self = cyclic
  const inputs = [{ n: 1n }, cyclic, { f() {} }, { s: Symbol('x') }, deep(200)]
  for (const [i, input] of inputs.entries()) {
    assert.throws(() => new Monitor().observe({ type: 'tool_use', name: 'x', input, id: `i${i}` }), { code: 'INVALID_EVENT' })
    const verdict = watcher.observe(run, { type: 'tool_use', name: 'x', input, id: `i${i}` })
    assert.equal(verdict.action, 'continue')
    assert.equal(verdict.taskId, 't')
  }
  assert.equal(watcher.monitor.status().tasks[0].toolCalls, inputs.length)
  assert.equal(watcher.observeErrors, 0)
  // the same BigInt call failing again and again is a repeated step like any other
  for (let i = 0; i < 5; i++) {
    watcher.observe(run, { type: 'assistant', text: '' })
    watcher.observe(run, { type: 'tool_use', name: 'get', input: { id: 7n }, id: `g${i}` })
    watcher.observe(run, { type: 'tool_result', ok: false, name: 'get', text: 'refused', id: `g${i}` })
  }
  assert.equal(run.halt.reason, 'repeated_step')
})

test('Watcher.observe: an event refused even as its copy is counted, warned about once, and answered with continue', async () => {
  const warnings = []
  const listener = (warning) => warnings.push(warning)
  process.on('warning', listener)
  try {
    const watcher = new Watcher(new Monitor())
    const run = watcher.run('t')
    for (const id of ['a', 'b']) {
      const verdict = watcher.observe(run, { type: 'tool_use', name: '', id })
      assert.deepEqual(verdict, { action: 'continue', reason: null, message: null, nudge: null, taskId: 't', step: 0, detail: null })
    }
    assert.equal(watcher.observeErrors, 2)
    assert.equal(run.latest, null)
    await new Promise((resolve) => setImmediate(resolve))
    const ours = warnings.filter((w) => w.name === 'AgentBreakerWarning')
    assert.equal(ours.length, 1)
    assert.match(ours[0].message, /^agentbreaker: an event was not watched \(INVALID_EVENT: /)
  } finally {
    process.off('warning', listener)
  }
})
