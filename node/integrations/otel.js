'use strict'
// agentbreaker/otel: OpenTelemetry metrics and span events for a Monitor or any breaker, through
// `@opentelemetry/api` (docs/observability.md; the Python twin is agentbreaker.integrations.otel).
//
//   const { instrument } = require('agentbreaker/otel')
//   const monitor = new Monitor()
//   instrument(monitor)                      // the global meter provider, or { meterProvider }
//
// The instruments are the core's vocabulary, with its names, units and descriptions:
// counters `agentbreaker.halts` and `agentbreaker.warnings` (attribute `reason`: the rule's slug,
// `warning` for a breaker's own warning), `agentbreaker.state_changes` (`breaker`, `from`, `to`),
// `agentbreaker.tool_calls` and `agentbreaker.spend` (cents), and the histogram
// `agentbreaker.task.steps` (`outcome`: halted, done, error or ended). `task: true` adds the
// `task` attribute (one series per task: at most 1000 task values, later ones as `_other`).
// Every warning and halt is also an event on the active span (`agentbreaker.warning`,
// `agentbreaker.halt`, with `agentbreaker.reason`, `.task`, `.step`, `.message`, `.nudge`), a
// breaker's state change an `agentbreaker.state_change` event.
//
// What counts is what the core counts: a halt once (a halted task repeats its halt verdict to
// every later event; the Monitor's listeners get it once), every warning, a tool call when the
// Monitor counts it (not on a halted task), spend as the task's spend grows. A Monitor is
// watched through its `verdict` listener and its `observe`/`reset`/`restore` methods (wrapped on
// the instance; `uninstrument()` puts them back); a breaker through its listeners.

const { loadFramework, invalidArgument } = require('./_common.js')
const native = require('../agentbreaker.js')

const api = loadFramework('otel', '@opentelemetry/api', 'the OpenTelemetry API')
const { version } = require('../package.json')

/** The instrumentation scope (meter name). */
const SCOPE = 'agentbreaker'
const SPAN_EVENT_WARNING = 'agentbreaker.warning'
const SPAN_EVENT_HALT = 'agentbreaker.halt'
const SPAN_EVENT_STATE_CHANGE = 'agentbreaker.state_change'
/** The most task values one instrumentation reports (`task: true`); later tasks count as `_other`. */
const MAX_TASKS = 1000
const OTHER_TASK = '_other'

/**
 * The vocabulary (crates/agentbreaker/src/metrics.rs, docs/observability.md): the core's
 * `metricDefinitions()` when the binding has it, else this copy of it.
 */
const VOCABULARY = [
  { name: 'agentbreaker.halts', instrument: 'counter', unit: '{halt}', description: "Halts: a rule tripped and the task was stopped (reason = the rule's slug)" },
  { name: 'agentbreaker.warnings', instrument: 'counter', unit: '{warning}', description: "Warnings: a rule neared its threshold and the model was nudged (reason = the rule's slug)" },
  { name: 'agentbreaker.state_changes', instrument: 'counter', unit: '{change}', description: 'Circuit state changes of a breaker (CLOSED, HALF_OPEN, OPEN)' },
  { name: 'agentbreaker.tool_calls', instrument: 'counter', unit: '{call}', description: 'Tool calls the agent made, as counted against the budgets' },
  { name: 'agentbreaker.spend', instrument: 'counter', unit: '{cent}', description: 'Model spend in cents, as counted against the budgets' },
  {
    name: 'agentbreaker.task.steps',
    instrument: 'histogram',
    unit: '{step}',
    description: 'Steps per task, observed when the task ends (outcome = halted, done, error or ended)',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
  },
]

function definitions() {
  return typeof native.metricDefinitions === 'function' ? native.metricDefinitions() : VOCABULARY
}

const KINDS = [
  ['Monitor', 'monitor'],
  ['FailureBreaker', 'failure'],
  ['StagnationBreaker', 'stagnation'],
  ['BudgetBreaker', 'budget'],
  ['Loop', 'loop'],
  ['ExitStrategy', 'strategy'],
]

// Instruments per meter provider: making the same instrument twice on one meter makes the SDK warn.
const instrumentCache = new WeakMap()

function instruments(provider) {
  let table = instrumentCache.get(provider)
  if (table !== undefined) return table
  const meter = provider.getMeter(SCOPE, version)
  table = {}
  for (const d of definitions()) {
    if (d.instrument === 'counter') {
      const counter = meter.createCounter(d.name, { unit: d.unit, description: d.description })
      table[d.name] = (value, attributes) => counter.add(value, attributes)
    } else {
      const options = { unit: d.unit, description: d.description }
      if (d.buckets) options.advice = { explicitBucketBoundaries: d.buckets }
      const histogram = meter.createHistogram(d.name, options)
      table[d.name] = (value, attributes) => histogram.record(value, attributes)
    }
  }
  instrumentCache.set(provider, table)
  return table
}

/** OpenTelemetry attributes cannot be null: the missing ones are left out. */
function spanAttributes(pairs) {
  const attributes = {}
  for (const [key, value] of Object.entries(pairs)) {
    if (value !== null && value !== undefined) attributes[`agentbreaker.${key}`] = value
  }
  return attributes
}

function addSpanEvent(name, pairs) {
  const span = api.trace.getActiveSpan()
  if (span && span.isRecording()) span.addEvent(name, spanAttributes(pairs))
}

class Instrumentation {
  constructor(target, breaker, undo) {
    this.target = target
    /** The `breaker` attribute of state changes (the kind of object, unless you named it). */
    this.breaker = breaker
    Object.defineProperty(this, '_undo', { value: undo, writable: true })
  }

  get active() {
    return this._undo !== null
  }

  /** Stops the metrics and span events of this instrumentation (idempotent). */
  uninstrument() {
    if (this._undo === null) return
    const undo = this._undo
    this._undo = null
    undo()
  }
}

/**
 * Reports `target`'s metrics to OpenTelemetry and its warnings and halts as span events (see the
 * file's head). `target`: a Monitor or a breaker (FailureBreaker, StagnationBreaker, BudgetBreaker,
 * Loop, ExitStrategy). Options: `meterProvider` (default: the global one; until the application
 * sets one, the API's proxy, which starts recording when it does), `task` (add the `task`
 * attribute), `spanEvents` (default true), `breaker` (the `breaker` attribute; default: the kind).
 */
function instrument(target, options = {}) {
  const { meterProvider, task = false, spanEvents = true, breaker } = options || {}
  const kind = KINDS.find(([cls]) => typeof native[cls] === 'function' && target instanceof native[cls])
  if (kind === undefined) {
    throw invalidArgument('instrument() takes a Monitor or a breaker (FailureBreaker, StagnationBreaker, BudgetBreaker, Loop, ExitStrategy)')
  }
  const name = typeof breaker === 'string' && breaker ? breaker : kind[1]
  const record = instruments(meterProvider || api.metrics.getMeterProvider())
  const tasks = new Set()
  const taskAttr = (attributes, id) => {
    if (task && typeof id === 'string' && id) {
      if (!tasks.has(id) && tasks.size >= MAX_TASKS) {
        attributes.task = OTHER_TASK
      } else {
        tasks.add(id)
        attributes.task = id
      }
    }
    return attributes
  }
  if (kind[0] === 'Monitor') return instrumentMonitor(target, name, record, taskAttr, spanEvents)

  const listeners = {
    stateChange: (event) => {
      record['agentbreaker.state_changes'](1, { breaker: name, from: event.from, to: event.to })
      if (spanEvents) addSpanEvent(SPAN_EVENT_STATE_CHANGE, { breaker: name, from: event.from, to: event.to, message: event.reason })
    },
    warning: (event) => {
      record['agentbreaker.warnings'](1, { reason: 'warning' })
      if (spanEvents) addSpanEvent(SPAN_EVENT_WARNING, { reason: 'warning', message: event.message, breaker: name })
    },
    halt: (event) => {
      const halt = event.halt || {}
      if (typeof halt.slug !== 'string') return
      record['agentbreaker.halts'](1, taskAttr({ reason: halt.slug }, halt.taskId))
      if (spanEvents) addSpanEvent(SPAN_EVENT_HALT, { reason: halt.slug, task: halt.taskId, message: halt.message, breaker: name })
    },
  }
  const added = []
  for (const [type, listener] of Object.entries(listeners)) {
    try {
      target.on(type, listener)
      added.push([type, listener])
    } catch (error) {
      if (!error || error.code !== 'INVALID_ARGUMENT') throw error // an event this kind never emits
    }
  }
  return new Instrumentation(target, name, () => {
    for (const [type, listener] of added) target.off(type, listener)
  })
}

function instrumentMonitor(monitor, name, record, taskAttr, spanEvents) {
  // What the Monitor counted so far: the tasks halted (their tool calls no longer count) and
  // each task's spend (the spend metric adds what it grew by).
  const halted = new Set()
  const spend = new Map()
  const snapshot = () => {
    halted.clear()
    spend.clear()
    for (const t of monitor.status().tasks) {
      if (t.halted) halted.add(t.taskId)
      spend.set(t.taskId, t.spendCents)
    }
  }
  snapshot()
  let haltsInCall = 0

  const onVerdict = (v) => {
    if (v.action === 'halt') {
      haltsInCall++
      halted.add(v.taskId)
      record['agentbreaker.halts'](1, taskAttr({ reason: v.reason }, v.taskId))
      record['agentbreaker.task.steps'](v.step, { outcome: 'halted' })
    } else if (v.action === 'warn') {
      record['agentbreaker.warnings'](1, taskAttr({ reason: v.reason }, v.taskId))
    }
    if (spanEvents) {
      addSpanEvent(v.action === 'halt' ? SPAN_EVENT_HALT : SPAN_EVENT_WARNING, {
        reason: v.reason,
        task: v.taskId,
        step: v.step,
        message: v.message,
        nudge: v.nudge,
      })
    }
  }
  monitor.on('verdict', onVerdict)

  const proto = Object.getPrototypeOf(monitor)
  const observe = function observe(event) {
    const type = event !== null && typeof event === 'object' ? event.type : undefined
    let ending = null
    if (type === 'heartbeat' && (event.phase === 'done' || event.phase === 'error')) {
      const id = typeof event.taskId === 'string' ? event.taskId : 'session'
      const open = monitor.status().tasks.find((t) => t.taskId === id)
      if (open && !open.halted) ending = { steps: open.steps, outcome: event.phase }
    }
    haltsInCall = 0
    const verdict = proto.observe.call(monitor, event)
    const id = verdict.taskId
    if (type === 'tool_use' && id !== null && (verdict.action !== 'halt' || haltsInCall > 0)) {
      record['agentbreaker.tool_calls'](1, taskAttr({}, id))
    } else if (type === 'usage' && id !== null && !halted.has(id)) {
      const entry = monitor.status().tasks.find((t) => t.taskId === id)
      const now = entry ? entry.spendCents : 0
      const grown = now - (spend.get(id) || 0)
      spend.set(id, now)
      if (grown > 0) record['agentbreaker.spend'](grown, taskAttr({}, id))
    } else if (ending !== null) {
      record['agentbreaker.task.steps'](ending.steps, { outcome: ending.outcome })
    }
    if (type === 'heartbeat' && (event.phase === 'done' || event.phase === 'error') && id !== null) {
      halted.delete(id)
      spend.delete(id)
    }
    return verdict
  }
  const reset = function reset() {
    const result = proto.reset.call(monitor)
    snapshot()
    return result
  }
  const restore = function restore(state) {
    const result = proto.restore.call(monitor, state)
    snapshot()
    return result
  }
  const methods = { observe, reset, restore }
  for (const [key, fn] of Object.entries(methods)) {
    Object.defineProperty(monitor, key, { value: fn, writable: true, configurable: true })
  }

  const instrumentation = new Instrumentation(monitor, name, () => {
    monitor.off('verdict', onVerdict)
    for (const [key, fn] of Object.entries(methods)) {
      if (Object.getOwnPropertyDescriptor(monitor, key)?.value === fn) delete monitor[key]
    }
  })
  /**
   * Observes the tasks still open as ended (`agentbreaker.task.steps{outcome="ended"}`): call it
   * when the run or the process ends.
   */
  instrumentation.endTasks = () => {
    for (const t of monitor.status().tasks) {
      if (!t.halted) record['agentbreaker.task.steps'](t.steps, { outcome: 'ended' })
    }
  }
  return instrumentation
}

module.exports = {
  Instrumentation,
  SCOPE,
  SPAN_EVENT_HALT,
  SPAN_EVENT_STATE_CHANGE,
  SPAN_EVENT_WARNING,
  VOCABULARY,
  instrument,
}
