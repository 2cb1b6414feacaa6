'use strict'
// agentbreaker/otel through the real @opentelemetry/api, read back with @opentelemetry/sdk-metrics
// (a MetricReader collecting in memory) and @opentelemetry/sdk-trace-base (InMemorySpanExporter).

const test = require('node:test')
const assert = require('node:assert/strict')
const api = require('@opentelemetry/api')
const { MeterProvider, MetricReader, DataPointType } = require('@opentelemetry/sdk-metrics')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const ab = require('agentbreaker')
const { SPAN_EVENT_HALT, SPAN_EVENT_WARNING, VOCABULARY, instrument } = require('agentbreaker/otel')

class Reader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** A synchronous context manager: enough for startActiveSpan around synchronous code. */
class StackContextManager {
  constructor() {
    this.stack = [api.ROOT_CONTEXT]
  }
  active() {
    return this.stack[this.stack.length - 1]
  }
  with(context, fn, thisArg, ...args) {
    this.stack.push(context)
    try {
      return fn.call(thisArg, ...args)
    } finally {
      this.stack.pop()
    }
  }
  bind(context, target) {
    return target
  }
  enable() {
    return this
  }
  disable() {
    this.stack = [api.ROOT_CONTEXT]
    return this
  }
}
api.context.setGlobalContextManager(new StackContextManager())

function setup() {
  const reader = new Reader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  const exporter = new InMemorySpanExporter()
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('test')
  /** name -> [[attributes, value]] (histograms: {count, sum}) */
  const collect = async () => {
    const { resourceMetrics, errors } = await reader.collect()
    assert.deepEqual(errors, [])
    const out = {}
    for (const scope of resourceMetrics.scopeMetrics) {
      assert.equal(scope.scope.name, 'agentbreaker')
      for (const metric of scope.metrics) {
        out[metric.descriptor.name] = metric.dataPoints.map((p) => [
          p.attributes,
          metric.dataPointType === DataPointType.HISTOGRAM ? { count: p.value.count, sum: p.value.sum } : p.value,
        ])
        out[`${metric.descriptor.name}:unit`] = metric.descriptor.unit
      }
    }
    return out
  }
  return { meterProvider, exporter, tracer, collect }
}

/** The stuck session: the same failing call, seven times (halted at the fifth), with usage. */
function stuckSession(monitor, taskId) {
  for (let i = 0; i < 7; i++) {
    monitor.observe({ type: 'assistant', text: 'Let me run the tests again.', taskId })
    monitor.observe({ type: 'usage', usage: { input_tokens: 1000, output_tokens: 100 }, taskId })
    monitor.observe({ type: 'tool_use', name: 'Bash', input: { command: 'pytest -q' }, id: `t${i}`, taskId })
    monitor.observe({ type: 'tool_result', ok: false, text: '1 failed', id: `t${i}`, taskId })
  }
}

test('a stuck session: one warning per rule, one halt, its steps, tool calls and spend; span events', async () => {
  const { meterProvider, exporter, tracer, collect } = setup()
  const monitor = new ab.Monitor()
  instrument(monitor, { meterProvider })
  tracer.startActiveSpan('agent run', (span) => {
    stuckSession(monitor, undefined)
    span.end()
  })
  const m = await collect()
  assert.deepEqual(m['agentbreaker.halts'], [[{ reason: 'repeated_step' }, 1]])
  assert.deepEqual(m['agentbreaker.warnings'], [[{ reason: 'repeated_step' }, 1], [{ reason: 'fail_streak' }, 1]])
  assert.deepEqual(m['agentbreaker.tool_calls'], [[{}, 5]], 'the calls of the halted task do not count')
  assert.deepEqual(m['agentbreaker.spend'], [[{}, 2.25]])
  assert.deepEqual(m['agentbreaker.task.steps'], [[{ outcome: 'halted' }, { count: 1, sum: 5 }]])
  assert.equal(m['agentbreaker.spend:unit'], '{cent}')
  assert.equal(m['agentbreaker.halts:unit'], '{halt}')
  const [span] = exporter.getFinishedSpans()
  assert.deepEqual(span.events.map((e) => e.name), [SPAN_EVENT_WARNING, SPAN_EVENT_WARNING, SPAN_EVENT_HALT])
  const halt = span.events[2].attributes
  assert.equal(halt['agentbreaker.reason'], 'repeated_step')
  assert.equal(halt['agentbreaker.task'], 'session')
  assert.equal(halt['agentbreaker.step'], 5)
  assert.match(halt['agentbreaker.nudge'], /pytest -q/)
})

test('a healthy session: no warning, no halt; done tasks observe their steps; task attributes on request', async () => {
  const { meterProvider, collect } = setup()
  const monitor = new ab.Monitor()
  const instrumentation = instrument(monitor, { meterProvider, task: true, spanEvents: false })
  for (const [i, tool] of ['grep', 'read', 'edit', 'test'].entries()) {
    monitor.observe({ type: 'assistant', text: `step ${i}`, taskId: 'fix' })
    monitor.observe({ type: 'tool_use', name: tool, input: { i }, id: `h${i}`, taskId: 'fix' })
    monitor.observe({ type: 'tool_result', ok: true, text: `${tool} ok`, id: `h${i}`, taskId: 'fix' })
  }
  monitor.observe({ type: 'heartbeat', taskId: 'fix', phase: 'done' })
  monitor.observe({ type: 'tool_use', name: 'x', taskId: 'open' })
  instrumentation.endTasks()
  const m = await collect()
  assert.equal(m['agentbreaker.halts'], undefined)
  assert.equal(m['agentbreaker.warnings'], undefined)
  assert.deepEqual(m['agentbreaker.tool_calls'], [[{ task: 'fix' }, 4], [{ task: 'open' }, 1]])
  assert.deepEqual(m['agentbreaker.task.steps'], [[{ outcome: 'done' }, { count: 1, sum: 4 }], [{ outcome: 'ended' }, { count: 1, sum: 1 }]])
  instrumentation.uninstrument()
  assert.equal(instrumentation.active, false)
  assert.deepEqual(Object.keys(monitor), [], 'observe, reset and restore are the prototype\'s again')
  monitor.observe({ type: 'tool_use', name: 'y', taskId: 'open' })
  assert.deepEqual((await collect())['agentbreaker.tool_calls'], [[{ task: 'fix' }, 4], [{ task: 'open' }, 1]])
})

test('breakers: state changes, their warnings and budget halts', async () => {
  const { meterProvider, collect } = setup()
  const failure = new ab.FailureBreaker({ failureThreshold: 5 })
  instrument(failure, { meterProvider })
  const budget = new ab.BudgetBreaker({ maxToolCallsPerTask: 1 })
  instrument(budget, { meterProvider, breaker: 'tools' })
  for (let i = 0; i < 5; i++) failure.recordFailure('boom')
  budget.ingest({ type: 'tool_use', name: 'a' })
  budget.ingest({ type: 'tool_use', name: 'b' })
  const m = await collect()
  assert.deepEqual(m['agentbreaker.state_changes'], [[{ breaker: 'failure', from: 'CLOSED', to: 'OPEN' }, 1]])
  assert.deepEqual(m['agentbreaker.warnings'], [[{ reason: 'warning' }, 1]])
  assert.deepEqual(m['agentbreaker.halts'], [[{ reason: 'tool_call_limit' }, 1]])
  assert.throws(() => instrument({}), (e) => e.code === 'INVALID_ARGUMENT')
})

/** The vocabulary as the core defines it (crates/agentbreaker/src/metrics.rs), read from its source. */
function coreVocabulary() {
  const fs = require('node:fs')
  const path = require('node:path')
  const source = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'crates', 'agentbreaker', 'src', 'metrics.rs'), 'utf8')
  const rustString = (text) => JSON.parse(`"${text.replace(/\\\n\s*/g, '')}"`)
  const metrics = []
  for (const [, body] of source.matchAll(/pub const [A-Z_]+: Metric = Metric \{([\s\S]*?)\n\};/g)) {
    const field = (key) => body.match(new RegExp(`${key}: ((?:"(?:[^"\\\\]|\\\\[\\s\\S])*")|[A-Za-z:]+)`))[1]
    metrics.push({
      name: rustString(field('name').slice(1, -1)),
      instrument: field('instrument') === 'Instrument::Counter' ? 'counter' : 'histogram',
      unit: rustString(field('unit').slice(1, -1)),
      description: rustString(field('description').slice(1, -1)),
    })
  }
  const buckets = source.match(/pub const STEP_BUCKETS: \[f64; \d+\] = \[([^\]]*)\]/)[1].split(',').map(Number)
  return { metrics, buckets }
}

test('the vocabulary is the core\'s (docs/observability.md), and the global meter provider is the default', async () => {
  const core = coreVocabulary()
  assert.equal(core.metrics.length, 6)
  const byName = new Map(core.metrics.map((m) => [m.name, m]))
  assert.deepEqual(VOCABULARY.map(({ buckets, ...m }) => m), VOCABULARY.map((v) => byName.get(v.name)))
  assert.deepEqual(VOCABULARY.find((d) => d.buckets).buckets, core.buckets)
  assert.deepEqual(VOCABULARY.map((d) => [d.name, d.instrument, d.unit]), [
    ['agentbreaker.halts', 'counter', '{halt}'],
    ['agentbreaker.warnings', 'counter', '{warning}'],
    ['agentbreaker.state_changes', 'counter', '{change}'],
    ['agentbreaker.tool_calls', 'counter', '{call}'],
    ['agentbreaker.spend', 'counter', '{cent}'],
    ['agentbreaker.task.steps', 'histogram', '{step}'],
  ])
  const { meterProvider, collect } = setup()
  assert.ok(api.metrics.setGlobalMeterProvider(meterProvider))
  try {
    const monitor = new ab.Monitor()
    instrument(monitor)
    stuckSession(monitor, 'g')
    assert.deepEqual((await collect())['agentbreaker.halts'], [[{ reason: 'repeated_step' }, 1]])
  } finally {
    api.metrics.disable()
  }
})

/** The review's sequence (/tmp/review_obs/common_seq.json): spend on model calls and usage, two tasks. */
const SPEND_SEQUENCE = [
  { type: 'heartbeat', taskId: 'a', phase: 'starting' },
  { type: 'assistant', text: 'Working on it', costCents: 2.5 },
  { type: 'tool_use', name: 'Bash', id: 't0', input: { command: 'make check' } },
  { type: 'tool_result', id: 't0', ok: true, text: 'nothing' },
  { type: 'usage', costCents: 1.25 },
  ...[1, 2, 3, 4].flatMap((i) => [
    { type: 'assistant', text: 'Let me check the build again.' },
    { type: 'tool_use', name: 'Bash', id: `t${i}`, input: { command: 'make check' } },
    { type: 'tool_result', id: `t${i}`, ok: true, text: 'nothing' },
  ]),
  { type: 'tool_use', name: 'Bash', id: 't5', input: { command: 'make check' } },
  { type: 'usage', costCents: 3 },
  { type: 'heartbeat', taskId: 'a', phase: 'done' },
  { type: 'heartbeat', taskId: 'b', phase: 'starting' },
  { type: 'tool_use', name: 'Read', id: 'u1', input: { file: 'x' } },
  { type: 'assistant', text: 'done b', costCents: 4 },
  { type: 'heartbeat', taskId: 'b', phase: 'done' },
]

test("the core's updates: spend of model calls and of the halting event, the same values as Python's", async () => {
  for (const task of [false, true]) {
    const { meterProvider, collect } = setup()
    const monitor = new ab.Monitor({ stagnation: { repeatThreshold: 4 } })
    instrument(monitor, { meterProvider, task })
    for (const event of SPEND_SEQUENCE) monitor.observe(event)
    const m = await collect()
    // what python/agentbreaker/integrations/otel.py records for the same sequence
    const t = (attributes, id) => (task ? { ...attributes, task: id } : attributes)
    assert.deepEqual(m['agentbreaker.spend'], task ? [[{ task: 'a' }, 3.75], [{ task: 'b' }, 4]] : [[{}, 7.75]])
    assert.deepEqual(m['agentbreaker.tool_calls'], task ? [[{ task: 'a' }, 4], [{ task: 'b' }, 1]] : [[{}, 5]])
    assert.deepEqual(m['agentbreaker.halts'], [[t({ reason: 'repeated_step' }, 'a'), 1]])
    assert.deepEqual(m['agentbreaker.warnings'], [[t({ reason: 'repeated_step' }, 'a'), 1]])
    assert.deepEqual(m['agentbreaker.task.steps'], [[{ outcome: 'halted' }, { count: 1, sum: 4 }], [{ outcome: 'done' }, { count: 1, sum: 2 }]])
  }
  // the usage event that trips the spend budget counts, as the budget counts it
  const { meterProvider, collect } = setup()
  const monitor = new ab.Monitor({ budget: { maxTokenSpendCentsPerTask: 5 } })
  instrument(monitor, { meterProvider })
  assert.deepEqual([3, 4, 2].map((c) => monitor.observe({ type: 'usage', costCents: c }).action), ['continue', 'halt', 'halt'])
  const m = await collect()
  assert.equal(monitor.status().tasks[0].spendCents, 7)
  assert.deepEqual(m['agentbreaker.spend'], [[{}, 7]])
  assert.deepEqual(m['agentbreaker.halts'], [[{ reason: 'token_spend_limit' }, 1]])
})

test('task: true reports at most 1000 task values, later tasks as _other', async () => {
  const { meterProvider, collect } = setup()
  const monitor = new ab.Monitor()
  instrument(monitor, { meterProvider, task: true })
  for (let i = 0; i < 1010; i++) {
    monitor.observe({ type: 'tool_use', name: 'Read', taskId: `task-${i}` })
    monitor.observe({ type: 'heartbeat', taskId: `task-${i}`, phase: 'done' })
  }
  const calls = (await collect())['agentbreaker.tool_calls']
  assert.equal(calls.length, 1001)
  assert.deepEqual(calls.find(([a]) => a.task === '_other'), [{ task: '_other' }, 10])
})

test('an instrument that throws is contained: the verdict comes back, the rest is recorded, one warning', async () => {
  const { meterProvider, collect } = setup()
  // the real SDK's instruments, but the tool-call counter's exporter is broken
  const broken = {
    getMeter: (...args) => {
      const meter = meterProvider.getMeter(...args)
      return {
        createHistogram: (name, options) => meter.createHistogram(name, options),
        createCounter: (name, options) => {
          const counter = meter.createCounter(name, options)
          return {
            add: (value, attributes) => {
              if (name === 'agentbreaker.tool_calls') throw new Error('exporter broke')
              counter.add(value, attributes)
            },
          }
        },
      }
    },
  }
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    const monitor = new ab.Monitor({ stagnation: { repeatThreshold: 4 } })
    const instrumentation = instrument(monitor, { meterProvider: broken })
    const verdicts = []
    for (let i = 0; i < 5; i++) {
      verdicts.push(monitor.observe({ type: 'assistant', text: 'again' }))
      verdicts.push(monitor.observe({ type: 'tool_use', name: 'Bash', id: `t${i}`, input: { c: 1 } }))
      verdicts.push(monitor.observe({ type: 'tool_result', id: `t${i}`, ok: true, text: 'same' }))
    }
    assert.equal(verdicts.filter((v) => v.action === 'halt').length > 0, true)
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(instrumentation.errors, 4, 'each failed record is counted')
    assert.deepEqual(warnings.map((w) => [w.name, w.code]), [['AgentBreakerWarning', 'AGENTBREAKER_OTEL']])
    assert.match(warnings[0].message, /exporter broke/)
    const m = await collect()
    assert.deepEqual(m['agentbreaker.halts'], [[{ reason: 'repeated_step' }, 1]])
    assert.deepEqual(m['agentbreaker.task.steps'], [[{ outcome: 'halted' }, { count: 1, sum: 4 }]])
    assert.equal(m['agentbreaker.tool_calls'], undefined)
  } finally {
    process.off('warning', onWarning)
  }
})

test('without a meterProvider, a Monitor instrumented before the global provider is set records into it', async () => {
  const first = setup()
  const second = setup()
  const monitor = new ab.Monitor()
  instrument(monitor) // the application has not set its provider yet
  monitor.observe({ type: 'tool_use', name: 'early', taskId: 'x' }) // into the no-op provider
  try {
    assert.ok(api.metrics.setGlobalMeterProvider(first.meterProvider))
    monitor.observe({ type: 'tool_use', name: 'R', taskId: 'x' })
    monitor.observe({ type: 'tool_use', name: 'R', taskId: 'x' })
    assert.deepEqual((await first.collect())['agentbreaker.tool_calls'], [[{}, 2]])
    api.metrics.disable()
    assert.ok(api.metrics.setGlobalMeterProvider(second.meterProvider))
    monitor.observe({ type: 'tool_use', name: 'R', taskId: 'x' })
    assert.deepEqual((await second.collect())['agentbreaker.tool_calls'], [[{}, 1]])
    assert.deepEqual((await first.collect())['agentbreaker.tool_calls'], [[{}, 2]])
  } finally {
    api.metrics.disable()
  }
})

test('a second instrument() of a Monitor replaces the first; uninstrumenting the first leaves it', async () => {
  const one = setup()
  const two = setup()
  const monitor = new ab.Monitor({ stagnation: { repeatThreshold: 4 } })
  const first = instrument(monitor, { meterProvider: one.meterProvider })
  const second = instrument(monitor, { meterProvider: two.meterProvider })
  assert.equal(first.active, false)
  assert.equal(second.active, true)
  two.tracer.startActiveSpan('agent run', (span) => {
    for (let i = 0; i < 5; i++) {
      monitor.observe({ type: 'assistant', text: 'again' })
      monitor.observe({ type: 'tool_use', name: 'Bash', id: `t${i}`, input: { c: 1 } })
      monitor.observe({ type: 'tool_result', id: `t${i}`, ok: true, text: 'same' })
    }
    span.end()
  })
  assert.deepEqual(await one.collect(), {})
  const m = await two.collect()
  assert.deepEqual(m['agentbreaker.halts'], [[{ reason: 'repeated_step' }, 1]])
  assert.deepEqual(m['agentbreaker.warnings'], [[{ reason: 'repeated_step' }, 1]])
  assert.deepEqual(m['agentbreaker.tool_calls'], [[{}, 4]])
  const [span] = two.exporter.getFinishedSpans()
  assert.deepEqual(span.events.map((e) => e.name), [SPAN_EVENT_WARNING, SPAN_EVENT_HALT], 'one span event each, not two')
  first.uninstrument()
  monitor.reset()
  monitor.observe({ type: 'tool_use', name: 'Read' })
  assert.deepEqual((await two.collect())['agentbreaker.tool_calls'], [[{}, 5]], 'the live one still records')
  second.uninstrument()
  monitor.observe({ type: 'tool_use', name: 'Read' })
  assert.deepEqual((await two.collect())['agentbreaker.tool_calls'], [[{}, 5]])
  assert.deepEqual(await one.collect(), {})
})
