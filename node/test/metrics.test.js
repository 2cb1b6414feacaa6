'use strict'
// The metrics vocabulary from Node (docs/observability.md): `monitor.setMetricsRecorder(fn,
// {task})`, `metricDefinitions()` and `metricUpdates(event, breaker, {task})`, read back as exact
// counts for a scripted stuck session (one warning, one halt, reason repeated_step) and a healthy
// one (none).

const test = require('node:test')
const assert = require('node:assert/strict')

const ab = require('..')

/** Adds updates up as a registry would: counters by name and attributes, histogram values. */
function registry() {
  const counters = new Map()
  const observed = new Map()
  const definitions = new Map(ab.metricDefinitions().map((d) => [d.name, d]))
  return {
    record(updates) {
      for (const [name, value, attributes] of updates) {
        const series = `${name}${JSON.stringify(attributes)}`
        if (definitions.get(name).instrument === 'histogram') {
          observed.set(series, [...(observed.get(series) ?? []), value])
        } else {
          counters.set(series, (counters.get(series) ?? 0) + value)
        }
      }
    },
    counter: (name, attributes = {}) => counters.get(`${name}${JSON.stringify(attributes)}`) ?? 0,
    total: (name) => [...counters].filter(([k]) => k.startsWith(`${name}{`)).reduce((s, [, v]) => s + v, 0),
    histogram: (name, attributes) => observed.get(`${name}${JSON.stringify(attributes)}`) ?? [],
  }
}

function step(i, command) {
  return [
    { type: 'assistant', text: 'Let me look.' },
    { type: 'tool_use', name: 'Bash', id: `t${i}`, input: { command } },
    { type: 'tool_result', id: `t${i}`, ok: true, text: 'the same output' },
  ]
}

test('a stuck session records one warning and one halt (repeated_step)', () => {
  const monitor = new ab.Monitor({ stagnation: { repeatThreshold: 4 }, warnBefore: 1 }, new ab.ManualClock(0))
  const r = registry()
  monitor.setMetricsRecorder((updates) => r.record(updates))
  const verdicts = []
  for (let i = 0; i < 6; i++) for (const e of step(i, 'ls')) verdicts.push(monitor.observe(e))
  monitor.observe({ type: 'usage', costCents: 2.5 })
  assert.equal(verdicts.filter((v) => v.action === 'warn').length, 1)
  assert.ok(verdicts.filter((v) => v.action === 'halt').length > 1, 'the halt repeats')
  assert.equal(r.counter('agentbreaker.warnings', { reason: 'repeated_step' }), 1)
  assert.equal(r.total('agentbreaker.warnings'), 1)
  assert.equal(r.counter('agentbreaker.halts', { reason: 'repeated_step' }), 1)
  assert.equal(r.total('agentbreaker.halts'), 1)
  assert.equal(r.total('agentbreaker.tool_calls'), 4)
  assert.equal(r.total('agentbreaker.spend'), 0)
  assert.deepEqual(r.histogram('agentbreaker.task.steps', { outcome: 'halted' }), [4])
})

test('a healthy session records no warning and no halt; {task: true} adds the task', () => {
  const monitor = new ab.Monitor({}, new ab.ManualClock(0))
  const r = registry()
  monitor.setMetricsRecorder((updates) => r.record(updates), { task: true })
  monitor.observe({ type: 'heartbeat', taskId: 'fix', phase: 'starting' })
  const files = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot']
  files.forEach((file, i) => {
    for (const e of step(i, `cat ${file}.py`)) assert.equal(monitor.observe(e).action, 'continue')
    monitor.observe({ type: 'progress', files: 1 })
  })
  monitor.observe({ type: 'usage', costCents: 2.5 })
  monitor.observe({ type: 'usage', model: 'claude-sonnet-4', usage: { input_tokens: 1000, output_tokens: 100 } })
  monitor.observe({ type: 'heartbeat', taskId: 'fix', phase: 'done' })
  assert.equal(r.total('agentbreaker.warnings'), 0)
  assert.equal(r.total('agentbreaker.halts'), 0)
  assert.equal(r.counter('agentbreaker.tool_calls', { task: 'fix' }), 6)
  assert.ok(r.counter('agentbreaker.spend', { task: 'fix' }) > 2.5)
  assert.deepEqual(r.histogram('agentbreaker.task.steps', { outcome: 'done' }), [6])
})

test('a recorder can be removed and replaced; what it throws is dropped', () => {
  const monitor = new ab.Monitor()
  const seen = []
  monitor.setMetricsRecorder((updates) => seen.push(...updates))
  monitor.observe({ type: 'tool_use', name: 'x' })
  assert.deepEqual(seen, [['agentbreaker.tool_calls', 1, {}]])
  monitor.setMetricsRecorder(null)
  monitor.observe({ type: 'tool_use', name: 'x' })
  assert.equal(seen.length, 1)
  monitor.setMetricsRecorder(() => {
    throw new Error('a broken exporter')
  })
  assert.equal(monitor.observe({ type: 'tool_use', name: 'x' }).action, 'continue')
  assert.equal(monitor.listenerErrors, 0)
  assert.throws(() => monitor.setMetricsRecorder(42), { name: 'TypeError', code: 'INVALID_ARGUMENT' })
  assert.throws(() => monitor.setMetricsRecorder(() => {}, { task: 'yes' }), { name: 'TypeError', code: 'INVALID_ARGUMENT' })
  assert.throws(() => monitor.setMetricsRecorder(() => {}, 7), { name: 'TypeError', code: 'INVALID_ARGUMENT' })
})

test('metricDefinitions() is the core vocabulary', () => {
  const definitions = ab.metricDefinitions()
  assert.deepEqual(definitions.map((d) => d.name), [
    'agentbreaker.halts',
    'agentbreaker.warnings',
    'agentbreaker.state_changes',
    'agentbreaker.tool_calls',
    'agentbreaker.spend',
    'agentbreaker.task.steps',
  ])
  assert.deepEqual(definitions[0], {
    name: 'agentbreaker.halts',
    prometheusName: 'agentbreaker_halts_total',
    instrument: 'counter',
    unit: '{halt}',
    description: "Halts: a rule tripped and the task was stopped (reason = the rule's slug)",
    attributes: ['reason', 'task'],
  })
  assert.deepEqual(definitions[5].buckets, [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
})

test("metricUpdates() maps a listener event through the core's function", () => {
  const clock = new ab.ManualClock(0)
  const breaker = new ab.FailureBreaker({ failureThreshold: 2 }, clock)
  const updates = []
  breaker.on('stateChange', (event) => updates.push(...ab.metricUpdates(event, 'failure')))
  breaker.on('warning', (event) => updates.push(...ab.metricUpdates(event, 'failure')))
  breaker.recordFailure('x')
  breaker.recordFailure('x')
  assert.deepEqual(updates, [
    ['agentbreaker.state_changes', 1, { breaker: 'failure', from: 'CLOSED', to: 'OPEN' }],
  ])
  const halt = { type: 'verdict', action: 'halt', reason: 'repeated_step', taskId: 't1', step: 4, atMs: 0 }
  assert.deepEqual(ab.metricUpdates(halt, 'monitor', { task: true }), [
    ['agentbreaker.halts', 1, { reason: 'repeated_step', task: 't1' }],
    ['agentbreaker.task.steps', 4, { outcome: 'halted' }],
  ])
  assert.deepEqual(ab.metricUpdates({ type: 'verdict', action: 'continue' }, 'monitor'), [])
  assert.deepEqual(ab.metricUpdates({ type: 'something else' }, 'monitor'), [])
  assert.throws(() => ab.metricUpdates(halt), { name: 'TypeError', code: 'INVALID_ARGUMENT' })
  assert.throws(() => ab.metricUpdates(halt, 'monitor', { task: 1 }), { name: 'TypeError', code: 'INVALID_ARGUMENT' })
  assert.throws(() => ab.metricUpdates(Symbol('x'), 'monitor'), { name: 'TypeError', code: 'INVALID_EVENT' })
})
